package httpapi_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// TestTusJSClient runs tus-js-client (npm, pinned in services/gateway/web) under Node as
// an outside client: a whole file in 5 MiB chunks, a file whose upload is aborted
// between chunks and resumed by a new client from the same upload URL, a file whose
// one PATCH is broken midway (its connection closed under its body) and resumed at
// once, without a 423 or a 409 and long before the lease (30 s) could lapse, for the
// owner and for a recipient. It needs Node.js and `make assets` (npm ci); without
// them it fails.
func TestTusJSClient(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (Node.js 20; make test needs it for the web assets too)")
	}
	script, err := filepath.Abs("../../../web/tus-upload.cjs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(script), "node_modules", "tus-js-client")); err != nil {
		t.Fatal("tus-js-client is not installed: run make assets (npm ci in services/gateway/web)")
	}
	a := newTestAPI(t, tusConfig(), withTusLease(30*time.Second, 5*time.Second))
	_, token := a.user("owner@example.com", app.RoleRegular)

	upload := func(endpoint, token string, content []byte, args ...string) map[string]any {
		t.Helper()
		file := filepath.Join(t.TempDir(), "data.bin")
		if err := os.WriteFile(file, content, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(node, append([]string{script, a.url + endpoint, file}, args...)...)
		cmd.Env = append(os.Environ(), "TUS_TOKEN="+token)
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("tus-js-client: %v\n%s", err, stderr)
		}
		var res map[string]any
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("tus-js-client printed %q: %v", out, err)
		}
		return res
	}
	fileOf := func(pkg, fileID string) map[string]any {
		t.Helper()
		d := a.do("GET", "/api/v1/packages/"+pkg, token, nil).json(t)
		for _, f := range d["files"].([]any) {
			if f := f.(map[string]any); f["id"] == fileID {
				return f
			}
		}
		t.Fatalf("file %s not in the package: %v", fileID, d)
		return nil
	}

	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	pkg := p["id"].(string)
	content := randomBytes(t, 11<<20+5)
	res := upload("/api/v1/packages/"+pkg+"/uploads", token, content, strconv.Itoa(5<<20))
	if f := fileOf(pkg, res["fileId"].(string)); f["sha256"] != sha(content) {
		t.Fatalf("chunked upload: %v", f)
	}

	content = randomBytes(t, 9<<20)
	res = upload("/api/v1/packages/"+pkg+"/uploads", token, content, "0", strconv.Itoa(6<<20))
	if from, _ := res["resumedFrom"].(float64); res["firstUrl"] != res["url"] || from < 6<<20 {
		t.Fatalf("the upload did not go on from where it broke: %v", res)
	}
	if f := fileOf(pkg, res["fileId"].(string)); f["sha256"] != sha(content) {
		t.Fatalf("resumed upload: %v", f)
	}

	// One PATCH broken midway, resumed at once: its connection closed under its body
	// ("midway"), or its body stopped with the connection left open, as when the
	// network goes and the gateway does not notice ("stalled"). The HEAD gets the
	// upload handed over by the broken PATCH, so the PATCH from its offset is neither
	// 423 nor 409, and nothing waits for the lease (30 s) to lapse.
	for _, mode := range []string{"midway", "stalled"} {
		content = randomBytes(t, 20<<20)
		res = upload("/api/v1/packages/"+pkg+"/uploads", token, content, "0", strconv.Itoa(11<<20), mode)
		t.Logf("%s: broken at 11 MiB sent, resumed: %v", mode, res)
		if from, _ := res["resumedFrom"].(float64); res["firstUrl"] != res["url"] || from <= 0 {
			t.Fatalf("%s: the upload did not go on from where it broke: %v", mode, res)
		}
		for _, st := range res["statuses"].([]any) {
			if st.(float64) == http.StatusLocked || st.(float64) == http.StatusConflict {
				t.Fatalf("%s: the resumed upload got %v: %v", mode, st, res)
			}
		}
		if ms, _ := res["resumeMs"].(float64); ms > 10000 {
			t.Fatalf("%s: resuming took %v ms: %v", mode, ms, res)
		}
		if f := fileOf(pkg, res["fileId"].(string)); f["sha256"] != sha(content) {
			t.Fatalf("%s: upload resumed after a break: %v", mode, f)
		}
	}

	in := a.createPackage(token, map[string]any{"title": "In", "recipient_email": "r@example.com", "direction": "inbound"})
	r := a.do("POST", "/api/v1/packages/"+in["id"].(string)+"/finalize", token, nil)
	expect(t, r, http.StatusOK)
	link := linkToken(t, r.json(t)["magic_link"])
	content = randomBytes(t, 1<<20)
	res = upload("/api/v1/links/"+link+"/uploads", "", content)
	if f := fileOf(in["id"].(string), res["fileId"].(string)); f["sha256"] != sha(content) || f["uploaded_by"] != "recipient" {
		t.Fatalf("recipient's upload: %v", f)
	}
}
