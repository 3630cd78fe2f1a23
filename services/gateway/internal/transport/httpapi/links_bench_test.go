package httpapi_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// BenchmarkLinkDownload compares a 64 KiB download through a link without a limit or
// password (the baseline), with a download limit (one conditional UPDATE when it
// starts) and with a password as well (a grant checked per request).
func BenchmarkLinkDownload(b *testing.B) {
	a := newTestAPI(b, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	for _, c := range []struct {
		name   string
		fields map[string]any
	}{
		{"baseline", nil},
		{"limit", map[string]any{"max_downloads": 10000}},
		{"limit+password", map[string]any{"max_downloads": 10000, "password": "bench password"}},
	} {
		body := map[string]any{"title": "Bench", "recipient_email": "r@example.com"}
		for k, v := range c.fields {
			body[k] = v
		}
		p := a.createPackage(token, body)
		id := p["id"].(string)
		content := make([]byte, 64<<10)
		if r := a.upload("/api/v1/packages/"+id+"/files", token, "f.bin", content); r.status != http.StatusCreated {
			b.Fatal(r.status)
		}
		fin := a.do("POST", "/api/v1/packages/"+id+"/finalize", token, nil).json(b)
		link := fin["magic_link"].(string)
		link = link[len("http://shipfile.test/p/"):]
		var grant string
		if c.fields["password"] != nil {
			grant = a.unlock(link, "bench password").json(b)["grant"].(string)
		}
		files := a.do("GET", "/api/v1/links/"+link, "", nil, "Shipfile-Link-Grant", grant).json(b)["files"].([]any)
		url := a.url + files[0].(map[string]any)["download_url"].(string)
		client := &http.Client{}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				req, _ := http.NewRequest("GET", url, nil)
				if grant != "" {
					req.Header.Set("Shipfile-Link-Grant", grant)
				}
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatal(resp, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
