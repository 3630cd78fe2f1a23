package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestDownloadLimitAcrossGateways: two gateway processes on one database serve the
// same protected link with a limit of 5 downloads; 40 concurrent downloads spread over
// both never go past it (exactly 5 answers 200, the rest 410), and a grant from one
// gateway opens the link on the other.
func TestDownloadLimitAcrossGateways(t *testing.T) {
	_, natsURL := servicetest.StartNATS(t)
	e := newEnv(t, natsURL)
	// The link routes' per-IP rate limit, where there is one, must not get in the way.
	vars := append(e.vars, "SHIPFILE_LINK_RATE=10000", "SHIPFILE_LINK_BURST=10000")
	gws := []*gateway{startGateway(t, vars), startGateway(t, vars)}

	status, pkg := postJSON(t, gws[0].url("/api/v1/packages"), e.token, map[string]any{
		"title": "Limited", "recipient_email": "r@example.com", "password": "shared secret", "max_downloads": 5,
	})
	if status != http.StatusCreated || pkg["password_protected"] != true {
		t.Fatalf("create: %d %v", status, pkg)
	}
	id := pkg["id"].(string)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	w, _ := mw.CreateFormFile("file", "data.bin")
	_, _ = w.Write(bytes.Repeat([]byte("x"), 200<<10))
	_ = mw.Close()
	req, _ := http.NewRequest("POST", gws[0].url("/api/v1/packages/"+id+"/files"), &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := servicetest.HTTPClient(t).Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %v %v", resp, err)
	}
	var file struct{ ID string }
	err = json.NewDecoder(resp.Body).Decode(&file)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	status, fin := postJSON(t, gws[0].url("/api/v1/packages/"+id+"/finalize"), e.token, nil)
	if status != http.StatusOK {
		t.Fatalf("finalize: %d %v", status, fin)
	}
	ml := fin["magic_link"].(string)
	token := ml[strings.LastIndex(ml, "/")+1:]
	status, unlock := postJSON(t, gws[1].url("/api/v1/links/"+token+"/unlock"), "", map[string]any{"password": "shared secret"})
	if status != http.StatusOK {
		t.Fatalf("unlock: %d %v", status, unlock)
	}
	grant := unlock["grant"].(string)

	const n = 40
	var wg sync.WaitGroup
	statuses := make(chan int, n)
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", gws[i%2].url("/api/v1/links/"+token+"/files/"+file.ID), nil)
			req.Header.Set("Shipfile-Link-Grant", grant)
			resp, err := servicetest.HTTPClient(t).Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		})
	}
	wg.Wait()
	close(statuses)
	got := map[int]int{}
	for s := range statuses {
		got[s]++
	}
	if got[http.StatusOK] != 5 || got[http.StatusGone] != n-5 {
		t.Fatalf("40 downloads at a limit of 5 over two gateways: %v, want 5×200 and 35×410", got)
	}
	ctx := context.Background()
	db, err := pgx.Connect(ctx, e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var count int
	if err := db.QueryRow(ctx, "SELECT download_count FROM files WHERE id = $1", file.ID).Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 5 {
		t.Fatalf("download_count = %d, want 5", count)
	}
}
