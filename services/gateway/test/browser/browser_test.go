// Package browser drives the web UI in headless Chromium (chromedp) against the real
// gateway and webhook dispatcher binaries, on real PostgreSQL, MinIO and a private
// NATS server: setup, sign-in, an API token, a package sent with two files, the
// recipient's download, revoke and the 410 page; an inbound request filled through
// the recipient's page; a webhook created and tested from the admin pages. It writes
// screenshots of the main pages to test-output/screenshots (SHIPFILE_SCREENSHOT_DIR).
package browser

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// bins are the binaries built once for the package's tests.
var bins map[string]string

func TestMain(m *testing.M) {
	servicetest.RunWithBinaries(m, &bins, map[string]string{
		"gateway":  "../../cmd/gateway",
		"webhooks": "../../../webhooks/cmd/webhooks",
	})
}

// hook is one request the webhook receiver got.
type hook struct {
	event, delivery, signature string
	body                       []byte
}

type receiver struct {
	mu  sync.Mutex
	got []hook
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.got = append(r.got, hook{event: req.Header.Get("X-Service-Event"), delivery: req.Header.Get("X-Service-Delivery"),
		signature: req.Header.Get("X-Service-Signature"), body: body})
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) events(name string) []hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []hook
	for _, h := range r.got {
		if h.event == name {
			out = append(out, h)
		}
	}
	return out
}

// system is a running gateway and dispatcher.
type system struct {
	base string
	rcv  *receiver
	hook string // the receiver's URL
}

func startSystem(t *testing.T) *system {
	t.Helper()
	_, natsURL := servicetest.StartNATS(t)
	dbURL := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	bucket := "browser-" + strings.ToLower(rand.Text()[:12])
	common := []string{
		"SHIPFILE_DATABASE_URL=" + dbURL, "SHIPFILE_NATS_URL=" + natsURL, "SHIPFILE_S3_BUCKET=" + bucket,
		"SHIPFILE_WEBHOOK_ALLOW_PRIVATE=true", "SHIPFILE_LOG_LEVEL=warn", servicetest.SecretKeyEnv,
	}
	gw, gwOps := servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["gateway"], append(common, "SHIPFILE_HTTP_ADDR="+gw, "SHIPFILE_OPS_ADDR="+gwOps, "SHIPFILE_PUBLIC_URL=http://"+gw))
	servicetest.WaitReady(t, gwOps)
	wh := servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["webhooks"], append(common, "SHIPFILE_WEBHOOKS_ADDR="+wh, "SHIPFILE_WEBHOOK_RETRY_SCHEDULE=200ms,200ms,200ms,200ms,200ms,200ms,200ms"))
	servicetest.WaitReady(t, wh)
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	return &system{base: "http://" + gw, rcv: rcv, hook: srv.URL + "/hook"}
}

// writeFile makes a file of n random bytes and returns its path and SHA-256.
func writeFile(t *testing.T, name string, n int) (string, string) {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return p, hex.EncodeToString(sum[:])
}
