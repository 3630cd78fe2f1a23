package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

func TestSenderRefusesPrivateTargetsAtDialTime(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	req := app.Request{URL: srv.URL + "/hook", Header: http.Header{}, Body: []byte(`{}`)}

	resp := NewSender(SenderOptions{Timeout: 2 * time.Second}).Send(context.Background(), req)
	if resp.StatusCode != 0 || resp.Err == nil {
		t.Fatalf("private target: status %d err %v, want a refusal", resp.StatusCode, resp.Err)
	}
	if !errors.Is(resp.Err, ErrRefused) || !strings.Contains(resp.Err.Error(), "refused") || !strings.Contains(resp.Err.Error(), "loopback") {
		t.Errorf("error %q does not say the loopback target was refused", resp.Err)
	}
	if strings.Contains(resp.Err.Error(), "/hook") {
		t.Errorf("error %q carries the URL", resp.Err)
	}
	if hits.Load() != 0 {
		t.Fatalf("the receiver got %d requests", hits.Load())
	}

	resp = NewSender(SenderOptions{Timeout: 2 * time.Second, AllowPrivate: true}).Send(context.Background(), req)
	if resp.Err != nil || resp.StatusCode != http.StatusOK || hits.Load() != 1 {
		t.Fatalf("allow-private: status %d err %v hits %d", resp.StatusCode, resp.Err, hits.Load())
	}
}

func TestSenderRefusesNamesResolvingToPrivateAddresses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	// "localhost" passes any check of the URL's text; the dial-time check catches it.
	url := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	resp := NewSender(SenderOptions{Timeout: 2 * time.Second}).Send(context.Background(), app.Request{URL: url, Header: http.Header{}})
	if !errors.Is(resp.Err, ErrRefused) {
		t.Fatalf("localhost: err %v, want a refusal", resp.Err)
	}
}

func TestSenderDoesNotFollowRedirects(t *testing.T) {
	var followed atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed.Add(1)
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	resp := NewSender(SenderOptions{Timeout: 2 * time.Second, AllowPrivate: true}).
		Send(context.Background(), app.Request{URL: srv.URL, Header: http.Header{}, Body: []byte(`{}`)})
	if resp.StatusCode != http.StatusTemporaryRedirect || followed.Load() != 0 {
		t.Fatalf("status %d, followed %d: want the 307 itself", resp.StatusCode, followed.Load())
	}
}

// TestSenderSendsURLCredentialsAsBasicAuth: a URL with a user name and password (which
// the gateway refuses on save now, but a subscription of an earlier version may hold)
// still authenticates (they go as basic auth), and an Authorization header of the request
// wins.
func TestSenderSendsURLCredentialsAsBasicAuth(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	s := NewSender(SenderOptions{Timeout: 2 * time.Second, AllowPrivate: true})
	withUser := strings.Replace(srv.URL, "http://", "http://hook:s3cret@", 1)
	if resp := s.Send(context.Background(), app.Request{URL: withUser, Header: http.Header{}, Body: []byte(`{}`)}); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d (%v)", resp.StatusCode, resp.Err)
	}
	if want := "Basic aG9vazpzM2NyZXQ="; got.Load() != want {
		t.Fatalf("Authorization %q, want %q", got.Load(), want)
	}
	h := http.Header{"Authorization": {"Bearer x"}}
	if resp := s.Send(context.Background(), app.Request{URL: withUser, Header: h, Body: []byte(`{}`)}); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d (%v)", resp.StatusCode, resp.Err)
	}
	if got.Load() != "Bearer x" {
		t.Fatalf("Authorization %q, want the request's own", got.Load())
	}
}

// TestSenderNamesAnHTTPSURLOfAPlainServer: the attempt log says what went wrong when an
// https URL reaches a plain HTTP server: http.ErrSchemeMismatch, as net/http names it.
func TestSenderNamesAnHTTPSURLOfAPlainServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	resp := NewSender(SenderOptions{Timeout: 2 * time.Second, AllowPrivate: true}).
		Send(context.Background(), app.Request{URL: strings.Replace(srv.URL, "http://", "https://", 1), Header: http.Header{}, Body: []byte(`{}`)})
	if resp.StatusCode != 0 || !errors.Is(resp.Err, http.ErrSchemeMismatch) {
		t.Fatalf("status %d, err %v: want %v", resp.StatusCode, resp.Err, http.ErrSchemeMismatch)
	}
}

// TestSenderResendsOnAConnectionTheReceiverClosedWhileIdle: a receiver that closes a
// kept-alive connection (its idle timeout) just before the next delivery reuses it
// gets that delivery on a new connection, not a failed attempt.
func TestSenderResendsOnAConnectionTheReceiverClosedWhileIdle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var requests, conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				req, err := http.ReadRequest(r)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				requests.Add(1)
				// Answered with keep-alive, then closed at once, as an idle timeout
				// that expires between two deliveries does.
				_, _ = c.Write([]byte("HTTP/1.1 204 No Content\r\n\r\n"))
			}()
		}
	}()
	s := NewSender(SenderOptions{Timeout: 2 * time.Second, AllowPrivate: true})
	req := app.Request{URL: "http://" + ln.Addr().String() + "/hook", Header: http.Header{}, Body: []byte(`{}`)}
	for i := range 3 {
		if resp := s.Send(context.Background(), req); resp.Err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("delivery %d: status %d err %v", i+1, resp.StatusCode, resp.Err)
		}
		// Let the close reach the client before the next delivery picks the connection.
		time.Sleep(20 * time.Millisecond)
	}
	if requests.Load() != 3 || conns.Load() < 3 {
		t.Fatalf("%d requests on %d connections, want 3 on 3", requests.Load(), conns.Load())
	}
}

// TestSenderTakesLongAnswers: an answer with a body of megabytes and headers of 8 KiB
// is still an answer (its status counts); only the body's start is read.
func TestSenderTakesLongAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("p", 8<<10))
		_, _ = w.Write(bytes.Repeat([]byte("<html>"), 2<<20))
	}))
	defer srv.Close()
	s := NewSender(SenderOptions{Timeout: 5 * time.Second, AllowPrivate: true})
	for i := range 2 {
		resp := s.Send(context.Background(), app.Request{URL: srv.URL, Header: http.Header{}, Body: []byte(`{}`)})
		if resp.Err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("answer %d: status %d err %v", i+1, resp.StatusCode, resp.Err)
		}
		if len(resp.Excerpt) != excerptMax || !strings.HasPrefix(resp.Excerpt, "<html>") {
			t.Fatalf("answer %d: excerpt of %d bytes", i+1, len(resp.Excerpt))
		}
	}
}

func TestSenderIgnoresProxyEnvironment(t *testing.T) {
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { proxied.Add(1) }))
	defer proxy.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	// A name no resolver knows: through a proxy the proxy would get the request; without
	// one the dial fails.
	resp := NewSender(SenderOptions{Timeout: 2 * time.Second, AllowPrivate: true}).
		Send(context.Background(), app.Request{URL: "http://receiver.invalid/hook", Header: http.Header{}})
	if proxied.Load() != 0 {
		t.Fatal("the request went through HTTP_PROXY")
	}
	if resp.Err == nil {
		t.Fatalf("status %d: want a resolution error", resp.StatusCode)
	}
}

// hangingServer answers nothing for 5 s, or until the request is given up.
func hangingServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSenderTimeout(t *testing.T) {
	srv := hangingServer(t)
	start := time.Now()
	resp := NewSender(SenderOptions{Timeout: 300 * time.Millisecond, AllowPrivate: true}).
		Send(context.Background(), app.Request{URL: srv.URL, Header: http.Header{}})
	if resp.StatusCode != 0 || resp.Err == nil || !strings.Contains(resp.Err.Error(), "no response within 300ms") {
		t.Fatalf("status %d err %v", resp.StatusCode, resp.Err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("took %s", el)
	}
}

// TestSenderReturnsWhenCancelled: a cancelled context (the end of the dispatcher's
// grace period) ends Send at once, while the receiver has not answered.
func TestSenderReturnsWhenCancelled(t *testing.T) {
	srv := hangingServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	resp := NewSender(SenderOptions{Timeout: 10 * time.Second, AllowPrivate: true}).
		Send(ctx, app.Request{URL: srv.URL, Header: http.Header{}, Body: []byte(`{}`)})
	if resp.StatusCode != 0 || !errors.Is(resp.Err, context.Canceled) {
		t.Fatalf("status %d err %v, want context.Canceled", resp.StatusCode, resp.Err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("took %s", el)
	}
}

func TestSenderExcerptAndRetryAfter(t *testing.T) {
	// One byte, then two-byte runes: the cut at 1024 bytes falls inside a rune.
	long := strings.Repeat("é", 600)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte("\x00" + long))
	}))
	defer srv.Close()
	resp := NewSender(SenderOptions{Timeout: 2 * time.Second, AllowPrivate: true}).
		Send(context.Background(), app.Request{URL: srv.URL, Header: http.Header{}})
	if resp.StatusCode != http.StatusTooManyRequests || resp.RetryAfter != 3*time.Second {
		t.Fatalf("status %d retry-after %s", resp.StatusCode, resp.RetryAfter)
	}
	if !utf8.ValidString(resp.Excerpt) || strings.Contains(resp.Excerpt, "\x00") || len(resp.Excerpt) != 1022 {
		t.Fatalf("excerpt of %d bytes, valid %v", len(resp.Excerpt), utf8.ValidString(resp.Excerpt))
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 21, 17, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"1":                             time.Second,
		" 120 ":                         2 * time.Minute,
		"0":                             0,
		"-5":                            0,
		"soon":                          0,
		"Sat, 21 Nov 2026 17:00:30 GMT": 30 * time.Second,
		"Sat, 21 Nov 2026 16:59:00 GMT": 0,
		"99999999999":                   7 * 24 * time.Hour,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}

func TestCleanExcerpt(t *testing.T) {
	cut := []byte("ab\xc3") // a rune cut in half at the limit
	if got := cleanExcerpt(cut); got != "ab" {
		t.Errorf("cleanExcerpt(%q) = %q", cut, got)
	}
	if got := cleanExcerpt([]byte("a\x00b")); got != "ab" {
		t.Errorf("NUL kept: %q", got)
	}
}
