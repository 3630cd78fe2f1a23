package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/docs"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/httpapi"
)

// TestRoutesMatchSpec fails when a gin route under /api/v1 is missing from
// proto/openapi.yaml or a path operation of the spec has no route.
func TestRoutesMatchSpec(t *testing.T) {
	t.Parallel()
	engine, err := httpapi.New(httpapi.Deps{
		Log: slog.New(slog.DiscardHandler), Identity: identity.NewIdentity(nil), Registry: ops.NewRegistry(),
		Config: defaultConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`:([A-Za-z_]+)`)
	var routes []string
	for _, r := range engine.Routes() {
		if strings.HasPrefix(r.Path, "/api/v1/") {
			routes = append(routes, r.Method+" "+param.ReplaceAllString(r.Path, "{$1}"))
		}
	}
	spec, err := docs.LoadSpec()
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	methods := []string{"get", "post", "put", "patch", "delete", "head", "options"}
	for path, item := range spec.Paths {
		for m := range item {
			if slices.Contains(methods, m) {
				documented = append(documented, strings.ToUpper(m)+" "+path)
			}
		}
	}
	slices.Sort(routes)
	slices.Sort(documented)
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in proto/openapi.yaml", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routes, d) {
			t.Errorf("proto/openapi.yaml documents %s but no route serves it", d)
		}
	}
}

func TestDocsServeOffline(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	r := a.do("GET", "/api/v1/openapi.json", "", nil)
	expect(t, r, http.StatusOK)
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") || doc.Paths["/api/v1/me"] == nil {
		t.Fatalf("openapi.json: %v %.200s", err, r.body)
	}
	src := regexp.MustCompile(`(?:src|href)="([^"]+)"`)
	for _, page := range []string{"/api/v1/docs", "/api/v1/redoc"} {
		r := a.do("GET", page, "", nil)
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			t.Fatalf("%s: %d %s", page, r.status, r.header.Get("Content-Type"))
		}
		refs := src.FindAllStringSubmatch(string(r.body), -1)
		if len(refs) == 0 {
			t.Fatalf("%s loads no assets", page)
		}
		for _, ref := range refs {
			u := ref[1]
			if !strings.HasPrefix(u, "/") || strings.HasPrefix(u, "//") {
				t.Fatalf("%s loads %s from elsewhere; docs must work offline", page, u)
			}
			asset := a.do("GET", u, "", nil)
			if asset.status != http.StatusOK || len(asset.body) < 100 {
				t.Fatalf("%s: asset %s answered %d with %d bytes (run make assets)", page, u, asset.status, len(asset.body))
			}
		}
	}
}
