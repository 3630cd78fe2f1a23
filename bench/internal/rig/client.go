package rig

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"strings"
	"time"
)

// Client calls the gateway's REST API with a bearer token, over a connection pool big
// enough for the benchmarks' concurrency.
type Client struct {
	Base  string
	Token string
	HTTP  *http.Client
}

// NewClient returns a client of the API at base (http://host:port).
func NewClient(base, token string) *Client {
	return &Client{Base: base, Token: token, HTTP: &http.Client{
		Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute},
	}}
}

// Answer is a response: its status, raw body and the body decoded as a JSON object
// (nil when it is not one).
type Answer struct {
	Status int
	Body   []byte
	JSON   map[string]any
}

// String shows the answer in failure messages.
func (a Answer) String() string { return fmt.Sprintf("%d %.300s", a.Status, a.Body) }

// Detail is the {"detail": "..."} of an error answer ("" when there is none).
func (a Answer) Detail() string {
	d, _ := a.JSON["detail"].(string)
	return d
}

// IsDetailError reports whether the answer is exactly {"detail": "<non-empty>"}.
func (a Answer) IsDetailError() bool {
	return len(a.JSON) == 1 && a.Detail() != ""
}

// Str returns a string field of the JSON answer.
func (a Answer) Str(field string) string {
	s, _ := a.JSON[field].(string)
	return s
}

// Do sends a request with an optional JSON body and reads the whole answer.
func (c *Client) Do(ctx context.Context, method, path string, body any) (Answer, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return Answer{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return Answer{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.send(req)
}

func (c *Client) send(req *http.Request) (Answer, error) {
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Answer{Status: resp.StatusCode}, err
	}
	a := Answer{Status: resp.StatusCode, Body: raw}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(raw, &a.JSON)
	}
	return a, nil
}

// Must sends a request and fails the test unless it is answered with want.
func (c *Client) Must(t interface {
	Helper()
	Fatalf(string, ...any)
}, method, path string, body any, want int) Answer {
	t.Helper()
	a, err := c.Do(context.Background(), method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if a.Status != want {
		t.Fatalf("%s %s: %s, want %d", method, path, a, want)
	}
	return a
}

// NewPackage is the body of POST /api/v1/packages the benchmarks send.
func NewPackage(title string) map[string]any {
	return map[string]any{"title": title, "recipient_email": "recipient@example.com", "recipient_name": "Recipient"}
}

// Upload streams r as the multipart "file" part of POST /api/v1/packages/{id}/files,
// without buffering it.
func (c *Client) Upload(ctx context.Context, packageID, filename string, r io.Reader) (Answer, error) {
	pr, contentType := MultipartFile(filename, r)
	req, err := http.NewRequestWithContext(ctx, "POST", c.Base+"/api/v1/packages/"+packageID+"/files", pr)
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Content-Type", contentType)
	a, err := c.send(req)
	pr.CloseWithError(io.ErrClosedPipe) // unblock the writer when the server answered early
	return a, err
}

// MultipartFile streams r as the multipart "file" part named filename, without
// buffering it: the body and its Content-Type. The caller closes the body
// (CloseWithError) once the server answered, which stops the writer if it answered
// early.
func MultipartFile(filename string, r io.Reader) (*io.PipeReader, string) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", filename)
		if err == nil {
			_, err = io.Copy(part, r)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr, mw.FormDataContentType()
}

// Payload is size deterministic pseudo-random bytes: incompressible, and cheap to make
// (ChaCha8 runs at several GB/s), so the client is not what limits a benchmark.
func Payload(size int64, seed uint64) io.Reader {
	return io.LimitReader(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), 1, 2, 3}), size)
}

// LinkToken returns the token of a magic link (the last path segment).
func LinkToken(link string) string { return link[strings.LastIndex(link, "/")+1:] }

// Throttle returns a reader of r that yields at most bytesPerSecond, so that an upload
// is still under way when a scenario kills something.
func Throttle(r io.Reader, bytesPerSecond int64) io.Reader {
	return &throttled{r: r, rate: bytesPerSecond, start: time.Now()}
}

type throttled struct {
	r     io.Reader
	rate  int64
	start time.Time
	n     int64
}

func (t *throttled) Read(p []byte) (int, error) {
	if len(p) > 64<<10 {
		p = p[:64<<10]
	}
	if due := t.start.Add(time.Duration(float64(t.n) / float64(t.rate) * float64(time.Second))); time.Now().Before(due) {
		time.Sleep(time.Until(due))
	}
	n, err := t.r.Read(p)
	t.n += int64(n)
	return n, err
}
