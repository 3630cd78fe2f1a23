package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestPreviewsMadeByTheConsumer: the gateway's consumer of package.file_uploaded makes
// the previews of a PNG and a JPEG, at once with scanning off and after the verdict
// with scanning on; a protected link serves them with its grant only, and counts no
// download.
func TestPreviewsMadeByTheConsumer(t *testing.T) {
	_, natsURL := servicetest.StartNATS(t)
	for _, mode := range []string{"off", "flag"} {
		t.Run("scan "+mode, func(t *testing.T) {
			e := newEnv(t, natsURL)
			gw := startGateway(t, append(e.vars, "SHIPFILE_SCAN="+mode, "SHIPFILE_LINK_RATE=10000", "SHIPFILE_LINK_BURST=10000"))
			status, pkg := postJSON(t, gw.url("/api/v1/packages"), e.token, map[string]any{
				"title": "Photos", "recipient_email": "r@example.com", "password": "shared secret",
			})
			if status != http.StatusCreated {
				t.Fatalf("create: %d %v", status, pkg)
			}
			id := pkg["id"].(string)
			img := image.NewRGBA(image.Rect(0, 0, 1500, 900))
			for y := range 900 {
				for x := range 1500 {
					img.Set(x, y, color.RGBA{uint8(x), uint8(y), 90, 255})
				}
			}
			var pngB, jpgB bytes.Buffer
			_ = png.Encode(&pngB, img)
			_ = jpeg.Encode(&jpgB, img, nil)
			ids := map[string]string{}
			for name, b := range map[string][]byte{"a.png": pngB.Bytes(), "b.jpg": jpgB.Bytes()} {
				ids[name] = upload(t, gw, e.token, id, name, b)
			}
			status, fin := postJSON(t, gw.url("/api/v1/packages/"+id+"/finalize"), e.token, nil)
			if status != http.StatusOK {
				t.Fatalf("finalize: %d %v", status, fin)
			}
			ml := fin["magic_link"].(string)
			token := ml[strings.LastIndex(ml, "/")+1:]
			status, unlock := postJSON(t, gw.url("/api/v1/links/"+token+"/unlock"), "", map[string]any{"password": "shared secret"})
			if status != http.StatusOK {
				t.Fatalf("unlock: %d %v", status, unlock)
			}
			grant := unlock["grant"].(string)
			previews := func() map[string]bool {
				got := map[string]bool{}
				var doc struct {
					Files []struct {
						Filename string `json:"filename"`
						Preview  bool   `json:"preview"`
					} `json:"files"`
				}
				if code, body := get(t, gw.url("/api/v1/links/"+token), grant); code == http.StatusOK {
					_ = json.Unmarshal(body, &doc)
				}
				for _, f := range doc.Files {
					got[f.Filename] = f.Preview
				}
				return got
			}
			if mode != "off" {
				// Pending: no preview while the scan has not judged the files.
				servicetest.WaitFor(t, 10*time.Second, "the link's files", func() bool { return len(previews()) == 2 })
				if p := previews(); p["a.png"] || p["b.jpg"] {
					t.Fatalf("previews before the verdict: %v", p)
				}
				pool, err := database.Open(context.Background(), e.dbURL)
				if err != nil {
					t.Fatal(err)
				}
				defer pool.Close()
				if _, err := pool.Exec(context.Background(), `UPDATE files SET scan = 'clean', scanned_at = now() WHERE package_id = $1`, id); err != nil {
					t.Fatal(err)
				}
			}
			servicetest.WaitFor(t, 45*time.Second, "both previews", func() bool {
				p := previews()
				return p["a.png"] && p["b.jpg"]
			})
			for name, fid := range ids {
				if code, _ := get(t, gw.url("/api/v1/links/"+token+"/files/"+fid+"/preview"), ""); code != http.StatusUnauthorized {
					t.Fatalf("%s preview without the grant: %d", name, code)
				}
				code, body := get(t, gw.url("/api/v1/links/"+token+"/files/"+fid+"/preview"), grant)
				cfg, format, err := image.DecodeConfig(bytes.NewReader(body))
				if code != http.StatusOK || err != nil || format != "jpeg" || cfg.Width != 1024 || cfg.Height != 614 {
					t.Fatalf("%s preview: %d %v %s %dx%d", name, code, err, format, cfg.Width, cfg.Height)
				}
			}
			code, body := get(t, gw.url("/api/v1/packages/"+id), "", "Authorization", "Bearer "+e.token)
			var p struct {
				Files []struct {
					DownloadCount int `json:"download_count"`
				} `json:"files"`
			}
			if err := json.Unmarshal(body, &p); err != nil || code != http.StatusOK || len(p.Files) != 2 || p.Files[0].DownloadCount+p.Files[1].DownloadCount != 0 {
				t.Fatalf("downloads after previews: %d %s", code, body)
			}
		})
	}
}

// upload sends one file as the owner and returns its id.
func upload(t *testing.T, gw *gateway, token, pkgID, name string, b []byte) string {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	w, _ := mw.CreateFormFile("file", name)
	_, _ = w.Write(b)
	_ = mw.Close()
	req, _ := http.NewRequest("POST", gw.url("/api/v1/packages/"+pkgID+"/files"), &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := servicetest.HTTPClient(t).Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload %s: %v %v", name, resp, err)
	}
	defer resp.Body.Close()
	var f struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&f); err != nil {
		t.Fatal(err)
	}
	return f.ID
}

// get answers a GET with a link grant (none when empty) and extra headers, checked
// against proto/openapi.yaml.
func get(t *testing.T, url, grant string, headers ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if grant != "" {
		req.Header.Set("Shipfile-Link-Grant", grant)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := servicetest.HTTPClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
