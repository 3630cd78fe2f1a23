// Package docs serves the API's descriptions: the OpenAPI document as JSON and the
// Swagger UI and ReDoc pages, whose assets are embedded (see assets/README.md), so the
// docs work with no network access.
package docs

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"regexp"

	"gopkg.in/yaml.v3"

	"github.com/shipfile/shipfile/proto"
)

//go:embed assets
var assets embed.FS

// AssetsPath is the URL prefix the embedded assets are served under.
const AssetsPath = "/static/docs"

// Assets returns the embedded asset files.
func Assets() http.FileSystem {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded directory always exists
	}
	return http.FS(sub)
}

// Spec is the parsed OpenAPI document.
type Spec struct {
	JSON  []byte
	Paths map[string]map[string]any
}

// LoadSpec converts the embedded openapi.yaml to JSON.
func LoadSpec() (*Spec, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(proto.OpenAPI, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	var parsed struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(b, &parsed); err != nil {
		return nil, err
	}
	return &Spec{JSON: b, Paths: parsed.Paths}, nil
}

// Page renders the named docs page ("swagger" or "redoc") pointing at specURL, with a
// Content-Security-Policy that allows its own inline script by hash and no other
// (both viewers need inline styles).
func Page(w http.ResponseWriter, name, specURL string) error {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, map[string]string{"Spec": specURL, "Assets": AssetsPath}); err != nil {
		return err
	}
	scripts := "'self'"
	for _, m := range inlineScript.FindAllSubmatch(b.Bytes(), -1) {
		sum := sha256.Sum256(m[1])
		scripts += " 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src "+scripts+
		"; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:"+
		"; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, err := w.Write(b.Bytes())
	return err
}

// inlineScript finds the bodies of a page's inline scripts.
var inlineScript = regexp.MustCompile(`<script>([\s\S]*?)</script>`)

var pages = template.Must(template.New("swagger").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>shipfile API · Swagger UI</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" type="image/png" href="{{.Assets}}/favicon-32x32.png">
<link rel="stylesheet" href="{{.Assets}}/swagger-ui.css">
</head><body><div id="swagger-ui"></div>
<script src="{{.Assets}}/swagger-ui-bundle.js"></script>
<script src="{{.Assets}}/swagger-ui-standalone-preset.js"></script>
<script>
window.ui = SwaggerUIBundle({
  url: {{.Spec}},
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: "StandaloneLayout",
  validatorUrl: null
});
</script></body></html>
{{define "redoc"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>shipfile API · ReDoc</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{margin:0;padding:0}</style>
</head><body><redoc spec-url="{{.Spec}}"></redoc>
<script src="{{.Assets}}/redoc.standalone.js"></script>
</body></html>
{{end}}`))
