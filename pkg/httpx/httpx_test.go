package httpx_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/httpx"
)

func TestInFlight(t *testing.T) {
	l := httpx.NewInFlight(3, 2)
	r1, err := l.Acquire("a")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.Acquire("a", "link")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire("a"); !errors.Is(err, httpx.ErrKeyBusy) {
		t.Fatalf("third for key a: %v, want ErrKeyBusy", err)
	}
	if _, err := l.Acquire("b", "link"); err != nil {
		t.Fatalf("second for link: %v", err)
	}
	if _, err := l.Acquire("c"); !errors.Is(err, httpx.ErrBusy) {
		t.Fatalf("fourth overall: %v, want ErrBusy", err)
	}
	r1()
	r1() // a second release changes nothing
	if l.InUse() != 2 {
		t.Fatalf("in use = %d, want 2", l.InUse())
	}
	r2()
	if _, err := l.Acquire("a"); err != nil {
		t.Fatalf("after the releases: %v", err)
	}
}

// slowServer answers how reading its request body ended, through MinRateBody.
func slowServer(t *testing.T, rate int64, window time.Duration) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := httpx.MinRateBody(r.Body, rate, window, httpx.ResponseDeadline(w))
		n, err := io.Copy(io.Discard, body)
		if httpx.TooSlow(body) {
			w.WriteHeader(http.StatusRequestTimeout)
			return
		}
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, strings.Repeat("x", int(n%2)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// trickle writes chunk to pw every interval until stop is called, then closes pw.
func trickle(pw *io.PipeWriter, every time.Duration, chunk string) (stop func()) {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				pw.Close()
				return
			case <-time.After(every):
				_, _ = pw.Write([]byte(chunk))
			}
		}
	}()
	return func() { close(done) }
}

func TestMinRateBodyCutsAStall(t *testing.T) {
	url := slowServer(t, 1000, 200*time.Millisecond)
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte("a few bytes, then nothing")) }()
	start := time.Now()
	resp, err := http.Post(url, "application/octet-stream", pr)
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("status = %d, want 408", resp.StatusCode)
		}
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("a stalled body was cut after %s, want about one window", took)
	}
}

func TestMinRateBodyCutsATrickle(t *testing.T) {
	url := slowServer(t, 1000, 200*time.Millisecond)
	pr, pw := io.Pipe()
	defer trickle(pw, 50*time.Millisecond, "x")() // 20 bytes/s against a minimum of 1000
	resp, err := http.Post(url, "application/octet-stream", pr)
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("status = %d, want 408", resp.StatusCode)
		}
	}
}

func TestMinRateBodyLetsAFastBodyThrough(t *testing.T) {
	url := slowServer(t, 1000, 200*time.Millisecond)
	resp, err := http.Post(url, "application/octet-stream", strings.NewReader(strings.Repeat("y", 1<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200", resp.StatusCode)
	}
}

// TestMinRateBodyWithoutDeadline: without a connection deadline a timer closes the
// body, so a blocked Read still returns.
func TestMinRateBodyWithoutDeadline(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	requireCut(t, httpx.MinRateBody(pr, 1000, 100*time.Millisecond, nil), "a blocked read was not cut")
}

// requireCut reads body to its end: the read must end in ErrTooSlow, with TooSlow(body),
// within 2s, else the test fails with notCut.
func requireCut(t *testing.T, body io.ReadCloser, notCut string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, body)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, httpx.ErrTooSlow) || !httpx.TooSlow(body) {
			t.Fatalf("read error = %v, want ErrTooSlow", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal(notCut)
	}
}

// TestLimitBodyTimeout: a body that keeps above the minimum rate but goes on past
// its time limit is cut at the limit, through the connection's deadline or, without
// one, the timer; a body within the limit is read whole.
func TestLimitBodyTimeout(t *testing.T) {
	for name, c := range map[string]struct {
		minRate int64
	}{
		"rate and deadline": {10},
		"timeout alone":     {0},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body := httpx.LimitBody(r.Body, c.minRate, 100*time.Millisecond, 300*time.Millisecond, httpx.ResponseDeadline(w))
				_, err := io.Copy(io.Discard, body)
				switch {
				case httpx.TooSlow(body):
					w.WriteHeader(http.StatusRequestTimeout)
				case err != nil:
					w.WriteHeader(http.StatusBadRequest)
				}
			}))
			defer srv.Close()
			pr, pw := io.Pipe()
			defer trickle(pw, 10*time.Millisecond, strings.Repeat("z", 100))() // 10 kB/s, far above the minimum
			start := time.Now()
			resp, err := http.Post(srv.URL, "application/json", pr)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusRequestTimeout {
					t.Fatalf("status = %d, want 408", resp.StatusCode)
				}
			}
			if took := time.Since(start); took < 250*time.Millisecond || took > 3*time.Second {
				t.Fatalf("cut after %s, want about the 300 ms limit", took)
			}
			// A short body well within the limit goes through.
			resp, err = http.Post(srv.URL, "application/json", strings.NewReader(`{"a": 1}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("a quick body: %d, want 200", resp.StatusCode)
			}
		})
	}
	if b := io.NopCloser(strings.NewReader("")); httpx.LimitBody(b, 0, time.Second, 0, nil) != b {
		t.Fatal("LimitBody without a rate or a limit wraps the body")
	}
}

// TestLimitBodyTimeoutWithoutDeadline: without a connection deadline the timer
// closes the body at the time limit, so a blocked Read returns.
func TestLimitBodyTimeoutWithoutDeadline(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte(strings.Repeat("z", 1000))) }() // fast, then nothing
	requireCut(t, httpx.LimitBody(pr, 10, time.Hour, 200*time.Millisecond, nil), "a blocked read was not cut at the time limit")
}

// TestStopBody: Stop ends a body's reading at once, even while a Read is blocked on a
// client that sends nothing more, with or without a minimum rate; the body is not
// "too slow" then.
func TestStopBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate int64
	}{{"minimum rate", 1000}, {"no minimum", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan error, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body := httpx.MinRateBody(r.Body, tc.rate, time.Minute, httpx.ResponseDeadline(w))
				buf := make([]byte, 5)
				if _, err := io.ReadFull(body, buf); err != nil {
					got <- err
					return
				}
				time.AfterFunc(50*time.Millisecond, func() {
					if !httpx.Stop(body) {
						got <- errors.New("not stoppable")
					}
				})
				_, err := io.Copy(io.Discard, body) // blocks: the client sends nothing more
				if httpx.TooSlow(body) {
					err = errors.New("reported too slow")
				}
				got <- err
				if _, err := body.Read(buf); !errors.Is(err, httpx.ErrStopped) {
					got <- err
				}
				w.WriteHeader(http.StatusBadRequest)
			}))
			defer srv.Close()
			pr, pw := io.Pipe()
			defer pw.Close()
			go func() { _, _ = pw.Write([]byte("hello")) }()
			go func() {
				if resp, err := http.Post(srv.URL, "application/octet-stream", pr); err == nil {
					resp.Body.Close()
				}
			}()
			select {
			case err := <-got:
				if !errors.Is(err, httpx.ErrStopped) {
					t.Fatalf("read error = %v, want ErrStopped", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a blocked read was not stopped")
			}
			select {
			case err := <-got:
				t.Fatalf("a read after Stop = %v, want ErrStopped", err)
			case <-time.After(100 * time.Millisecond):
			}
			if httpx.Stop(io.NopCloser(strings.NewReader(""))) {
				t.Fatal("a plain body reported as stopped")
			}
		})
	}
}

// TestStopBodyKeepsWhatArrived: what the client sent before the Stop is still read;
// then the body ends with ErrStopped.
func TestStopBodyKeepsWhatArrived(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := httpx.MinRateBody(r.Body, 1000, time.Minute, httpx.ResponseDeadline(w))
		buf := make([]byte, 5)
		if _, err := io.ReadFull(body, buf); err != nil {
			got <- err.Error()
			return
		}
		time.Sleep(200 * time.Millisecond) // the client's next bytes arrive meanwhile
		httpx.Stop(body)
		rest, err := io.ReadAll(body)
		if !errors.Is(err, httpx.ErrStopped) {
			got <- fmt.Sprintf("read error %v", err)
			return
		}
		got <- string(rest)
	}))
	defer srv.Close()
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		_, _ = pw.Write([]byte("hello"))
		_, _ = pw.Write([]byte(" world"))
	}()
	go func() {
		if resp, err := http.Post(srv.URL, "application/octet-stream", pr); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case s := <-got:
		if s != " world" {
			t.Fatalf("read after the Stop: %q, want \" world\"", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stopped body did not end")
	}
}
