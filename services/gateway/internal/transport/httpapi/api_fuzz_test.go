package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// The fuzz targets send what a client could send to the gateway's router (on a real
// database and bucket) and require an answer below 500 — a panic is answered 500 by
// the recovery middleware, so it fails too — and, for API errors, exactly
// {"detail": "..."}. Their seed corpora run with every `go test`; `make test-faults`
// fuzzes each for a while (go test -fuzz).

// fuzzAPI is a test gateway without rate limit, with a user and its token.
func fuzzAPI(f *testing.F) (*testAPI, string) {
	cfg := defaultConfig()
	cfg.RatePerSecond = 0
	a := newTestAPI(f, cfg)
	_, token := a.user("fuzz@example.com", app.RoleAdmin)
	return a, token
}

// serve sends req to the router and checks the answer.
func (a *testAPI) serve(t *testing.T, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	a.engine.ServeHTTP(w, req)
	if w.Code >= 500 {
		t.Fatalf("%s %s answered %d: %s", req.Method, req.URL, w.Code, w.Body.Bytes())
	}
	if w.Code >= 400 && strings.HasPrefix(req.URL.Path, "/api/") {
		var m map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || len(m) != 1 || m["detail"] == "" || m["detail"] == nil {
			t.Fatalf("%s %s answered %d with %q, want {\"detail\": \"...\"}", req.Method, req.URL, w.Code, w.Body.Bytes())
		}
	}
	return w
}

func jsonRequest(method, path, token string, body []byte) *http.Request {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	return req
}

// jsonSeeds are bodies that are nearly right, wrong in one way, or not JSON at all.
var jsonSeeds = []string{
	`{"title":"Q3 report","recipient_email":"bob@example.com","recipient_name":"Bob","ttl_days":7,"note":"hi"}`,
	`{"title":"in","recipient_email":"a@b.c","direction":"inbound"}`,
	`{"title":"","recipient_email":"not an address"}`,
	`{"title":1,"recipient_email":true,"ttl_days":"7"}`,
	`{"title":"x","recipient_email":"a@b.c","ttl_days":1e400}`,
	`{"title":"x","recipient_email":"a@b.c","ttl_days":-2147483649}`,
	`{"title":"x","recipient_email":"a@b.c","direction":"sideways"}`,
	`{"title":"x\u0000y","recipient_email":"a@b.c","note":"\ud800"}`,
	`{"name":"cli","expires_at":"2999-01-01T00:00:00Z"}`,
	`{"name":"cli","expires_at":"yesterday"}`,
	`{"name":"","expires_at":"1970-01-01T00:00:00Z"}`,
	`{"name":["a"],"expires_at":{}}`,
	`{"title":"x","recipient_email":"a@b.c"} {"again":1}`,
	`[]`, `null`, `"string"`, `12`, ``, `{`, `{"title":`, `{"a":{"b":{"c":{"d":[[[[[]]]]]}}}}`,
}

func FuzzCreatePackageBody(f *testing.F) {
	a, token := fuzzAPI(f)
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w := a.serve(t, jsonRequest("POST", "/api/v1/packages", token, body))
		if w.Code != http.StatusCreated && (w.Code < 400 || w.Code == http.StatusNotFound) {
			t.Fatalf("create package answered %d: %s", w.Code, w.Body.Bytes())
		}
	})
}

func FuzzCreateTokenBody(f *testing.F) {
	a, token := fuzzAPI(f)
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w := a.serve(t, jsonRequest("POST", "/api/v1/me/tokens", token, body))
		if w.Code != http.StatusCreated && w.Code < 400 {
			t.Fatalf("create token answered %d: %s", w.Code, w.Body.Bytes())
		}
	})
}

// FuzzUploadMultipart fuzzes the body and the boundary of an upload; a file that is
// stored is deleted again, so the package never fills up.
func FuzzUploadMultipart(f *testing.F) {
	a, token := fuzzAPI(f)
	pkg := a.createPackage(token, map[string]any{"title": "fuzz", "recipient_email": "r@example.com"})["id"].(string)

	good := func(boundary, name, filename, content string) []byte {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		_ = mw.SetBoundary(boundary)
		if w, err := mw.CreateFormFile(name, filename); err == nil {
			_, _ = w.Write([]byte(content))
		}
		_ = mw.Close()
		return b.Bytes()
	}
	f.Add("b0undary", good("b0undary", "file", "a.txt", "hello"))
	f.Add("b0undary", good("b0undary", "other", "a.txt", "no file part"))
	f.Add("b0undary", good("b0undary", "file", "", "no filename"))
	f.Add("b0undary", good("b0undary", "file", "../../etc/passwd", "path in the name"))
	f.Add("b0undary", good("b0undary", "file", "nul\x00.txt", "odd name"))
	f.Add("b0undary", good("b0undary", "file", "a.txt", "cut")[:60])
	f.Add("other", good("b0undary", "file", "a.txt", "boundary mismatch"))
	f.Add("", []byte("--\r\n\r\n--"))
	f.Add("b0undary", []byte("--b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\nno end"))
	f.Add("b0undary", []byte{})

	f.Fuzz(func(t *testing.T, boundary string, body []byte) {
		req := httptest.NewRequest("POST", "/api/v1/packages/"+pkg+"/files", bytes.NewReader(body))
		req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
		req.Header.Set("Authorization", "Bearer "+token)
		w := a.serve(t, req)
		if w.Code == http.StatusCreated {
			var file map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &file); err != nil {
				t.Fatal(err)
			}
			a.serve(t, jsonRequest("DELETE", fmt.Sprintf("/api/v1/packages/%s/files/%v", pkg, file["id"]), token, nil))
		}
	})
}

func FuzzBearerToken(f *testing.F) {
	a, token := fuzzAPI(f)
	for _, s := range []string{
		"Bearer " + token, "bearer " + token, "BEARER  " + token + " ", "Bearer " + token + "x", "Bearer " + token[:len(token)-1],
		"Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Bearer sf_", "Bearer sf_\x00", "Bearer " + strings.Repeat("a", 5000), "",
		"Bearer a b", "Token " + token,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		req := httptest.NewRequest("GET", "/api/v1/me", nil)
		req.Header.Set("Authorization", header)
		w := a.serve(t, req)
		if w.Code != http.StatusOK && w.Code != http.StatusUnauthorized {
			t.Fatalf("GET /me with Authorization %q answered %d", header, w.Code)
		}
		if w.Code == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
			t.Fatal("401 without WWW-Authenticate")
		}
	})
}

// FuzzMagicLinkToken sends any token to the recipient's endpoints: a token that is not
// a live link answers 410 (or 404 for a file id that cannot exist), never 500.
func FuzzMagicLinkToken(f *testing.F) {
	a, token := fuzzAPI(f)
	pkg := a.createPackage(token, map[string]any{"title": "fuzz", "recipient_email": "r@example.com"})["id"].(string)
	file := a.upload("/api/v1/packages/"+pkg+"/files", token, "a.txt", []byte("hello")).json(f)["id"].(string)
	fin := a.do("POST", "/api/v1/packages/"+pkg+"/finalize", token, nil).json(f)
	link := fin["magic_link"].(string)
	live := link[strings.LastIndex(link, "/")+1:]
	for _, s := range []string{live, live[:len(live)-1], live + "A", strings.ToUpper(live), "", "x", "%", "../admin", "a/b",
		strings.Repeat("A", 43), strings.Repeat("-", 43), "\x00", "é"} {
		f.Add(s, file)
	}
	f.Add(live, "not-a-uuid")
	f.Add(live, "00000000-0000-0000-0000-000000000000")
	f.Fuzz(func(t *testing.T, tok, fileID string) {
		esc := url.PathEscape(tok)
		for _, r := range []struct{ method, path string }{
			{"GET", "/api/v1/links/" + esc},
			{"GET", "/api/v1/links/" + esc + "/files/" + url.PathEscape(fileID)},
			{"HEAD", "/api/v1/links/" + esc + "/files/" + url.PathEscape(fileID)},
			{"GET", "/p/" + esc},
		} {
			req, err := http.NewRequest(r.method, "http://shipfile.test"+r.path, nil)
			if err != nil {
				t.Fatalf("%s: %v", r.path, err)
			}
			a.serve(t, req)
		}
	})
}
