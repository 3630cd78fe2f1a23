package servicetest

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"testing"
)

// Client calls a JSON API (the gateway's REST API) with a bearer token. A request
// that gets no answer fails the test, and so does an answer from the REST API (a path
// under APIPrefix) that does not match proto/openapi.yaml (see Contract).
type Client struct {
	T testing.TB
	// Base is the server's URL without a trailing slash: http://127.0.0.1:8080.
	Base string
	// Token is sent as "Authorization: Bearer <Token>".
	Token string
}

// Call sends method path with body (when not nil) as JSON and returns the status and
// the answer decoded as a JSON object (nil when it is none).
func (c Client) Call(method, path string, body any) (int, map[string]any) {
	c.T.Helper()
	status, _, m := c.do(method, path, body)
	return status, m
}

// Must is Call that fails the test unless the status is want.
func (c Client) Must(method, path string, body any, want int) map[string]any {
	c.T.Helper()
	status, raw, m := c.do(method, path, body)
	if status != want {
		c.T.Fatalf("%s %s: %d %s, want %d", method, path, status, raw, want)
	}
	return m
}

// Upload posts content as the multipart form file "file" named filename to path and
// returns the answer, failing the test unless it is 201 Created.
func (c Client) Upload(path, filename string, content []byte) map[string]any {
	c.T.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	w, _ := mw.CreateFormFile("file", filename)
	_, _ = w.Write(content)
	_ = mw.Close()
	status, raw, m := c.send("POST", path, mw.FormDataContentType(), &b)
	if status != http.StatusCreated {
		c.T.Fatalf("upload %s to %s: %d %s", filename, path, status, raw)
	}
	return m
}

func (c Client) do(method, path string, body any) (int, []byte, map[string]any) {
	c.T.Helper()
	if body == nil {
		return c.send(method, path, "", nil)
	}
	b, err := json.Marshal(body)
	if err != nil {
		c.T.Fatalf("%s %s: %v", method, path, err)
	}
	return c.send(method, path, "application/json", bytes.NewReader(b))
}

func (c Client) send(method, path, contentType string, body io.Reader) (int, []byte, map[string]any) {
	c.T.Helper()
	req, err := http.NewRequest(method, c.Base+path, body)
	if err != nil {
		c.T.Fatalf("%s %s: %v", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := HTTPClient(c.T).Do(req)
	if err != nil {
		c.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.T.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, raw, m
}
