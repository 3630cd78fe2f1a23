package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"slices"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// reservations returns the reserved object keys.
func (a *testAPI) reservations() []string {
	a.t.Helper()
	rows, err := a.pool.Query(context.Background(), `SELECT object_key FROM object_reservations ORDER BY object_key`)
	if err != nil {
		a.t.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			a.t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}

// streamUpload starts a multipart upload of one file whose bytes the test writes to the
// returned pipe (end sends the closing boundary and closes it); the answer arrives on
// the channel once the request ends.
func (a *testAPI) streamUpload(path, token string) (pw *io.PipeWriter, end func(), answer <-chan response) {
	a.t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	end = func() {
		if err := mw.Close(); err != nil {
			a.t.Fatal(err)
		}
		_ = pw.Close()
	}
	req, err := http.NewRequest("POST", a.url+path, pr)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	done := make(chan response, 1)
	go func() {
		resp, err := a.client(0).Do(req)
		if err != nil {
			done <- response{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- response{status: resp.StatusCode, header: resp.Header, body: b}
	}()
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="file"; filename="big.bin"`)
	h.Set("Content-Type", "application/octet-stream")
	if _, err := mw.CreatePart(h); err != nil {
		a.t.Fatal(err)
	}
	return pw, end, done
}

// TestUploadReservesItsObjectKey: the object key is recorded before any byte is stored
// and the record goes in the transaction that commits the file row; an upload that
// breaks off leaves the record (the expiry service's orphan sweep removes whatever the
// crash of a gateway would have left under that key) but no object.
func TestUploadReservesItsObjectKey(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.MaxFileSize = 16 << 20
	a := newTestAPI(t, cfg)
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "bob@example.com"})
	path := "/api/v1/packages/" + p["id"].(string) + "/files"

	// An upload in progress: its key is reserved while nothing is stored yet.
	pw, end, done := a.streamUpload(path, token)
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	if _, err := pw.Write(chunk); err != nil {
		t.Fatal(err)
	}
	servicetest.WaitFor(t, 10*time.Second, "the upload's reservation", func() bool { return len(a.reservations()) == 1 })
	key := a.reservations()[0]
	if n := a.rowCount("files"); n != 0 || slices.Contains(a.objectKeys(), key) {
		t.Fatalf("before the body ended: %d file rows, objects %v", n, a.objectKeys())
	}
	for range 100 { // 6.4 MiB: over one 5 MiB part, so the object is a multipart upload
		if _, err := pw.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	end()
	r := <-done
	expect(t, r, http.StatusCreated)
	if got := a.reservations(); len(got) != 0 {
		t.Fatalf("after the commit the reservations are %v, want none", got)
	}
	if !slices.Contains(a.objectKeys(), key) || a.rowCount("files") != 1 {
		t.Fatalf("the committed file is not stored under its reserved key %s: %v", key, a.objectKeys())
	}

	// An upload that breaks off after a part was stored.
	pw, _, done = a.streamUpload(path, token)
	for range 100 {
		if _, err := pw.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	pw.CloseWithError(errors.New("client went away"))
	if r := <-done; r.status >= 200 && r.status < 300 {
		t.Fatalf("a broken upload was answered %d", r.status)
	}
	servicetest.WaitFor(t, 10*time.Second, "the broken upload's reservation", func() bool { return len(a.reservations()) == 1 })
	left := a.reservations()[0]
	if left == key || a.rowCount("files") != 1 {
		t.Fatal("the broken upload has no reservation of its own, or a file row")
	}
	servicetest.WaitFor(t, 10*time.Second, "no object of the broken upload", func() bool {
		return !slices.Contains(a.objectKeys(), left)
	})
}
