package httpapi

import (
	"html/template"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// home is the web UI's landing page.
func (h *handlers) home(c *gin.Context) {
	setup, err := h.identity.NeedsSetup(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return
	}
	render(c, http.StatusOK, "home", map[string]any{"Setup": setup})
}

// setupForm shows the first-admin form while no user exists, and 404 afterwards.
func (h *handlers) setupForm(c *gin.Context) {
	setup, err := h.identity.NeedsSetup(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return
	}
	if !setup {
		notFound(c)
		return
	}
	render(c, http.StatusOK, "setup", map[string]any{})
}

func (h *handlers) setupSubmit(c *gin.Context) {
	in := app.NewUser{Email: c.PostForm("email"), Name: c.PostForm("name"), Password: c.PostForm("password")}
	u, err := h.identity.SetupFirstAdmin(c.Request.Context(), in)
	if app.KindOf(err) == app.KindInvalid {
		render(c, http.StatusUnprocessableEntity, "setup", map[string]any{"Error": err.Error(), "Email": in.Email, "Name": in.Name})
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	render(c, http.StatusCreated, "done", map[string]any{"Email": u.Email})
}

func render(c *gin.Context, status int, name string, data map[string]any) {
	c.Status(status)
	c.Header("Content-Type", "text/html; charset=utf-8")
	if err := pageTemplates.ExecuteTemplate(c.Writer, name, data); err != nil {
		_ = c.Error(err)
	}
}

var pageTemplates = template.Must(template.New("layout").Parse(`{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>shipfile</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem;color:#222}
label{display:block;margin:.8rem 0}input{display:block;width:100%;padding:.4rem;font:inherit}
button{margin-top:1rem;padding:.5rem 1.2rem;font:inherit}.error{color:#b00020}</style>
</head><body><h1>shipfile</h1>{{end}}
{{define "home"}}{{template "head"}}
<p>Self-hosted file exchange.</p>
{{if .Setup}}<p><a href="/setup">Create the first administrator</a></p>{{end}}
<ul><li><a href="/api/v1/docs">API documentation (Swagger UI)</a></li>
<li><a href="/api/v1/redoc">API reference (ReDoc)</a></li>
<li><a href="/api/v1/openapi.json">OpenAPI document</a></li></ul>
</body></html>{{end}}
{{define "setup"}}{{template "head"}}
<h2>Create the first administrator</h2>
{{with .Error}}<p class="error">{{.}}</p>{{end}}
<form method="post" action="/setup">
<label>E-mail <input type="email" name="email" value="{{.Email}}" required></label>
<label>Name <input name="name" value="{{.Name}}" required maxlength="100"></label>
<label>Password (at least 10 characters) <input type="password" name="password" required minlength="10"></label>
<button type="submit">Create administrator</button>
</form></body></html>{{end}}
{{define "recipient"}}{{template "head"}}
<h2>{{.P.Title}}</h2>
{{with .P.Note}}<p style="white-space:pre-wrap">{{.}}</p>{{end}}
<p>Available until {{.P.ExpiresAt.Format "2006-01-02 15:04 UTC"}}.</p>
{{if eq .P.Direction "outbound"}}
<ul>{{range .P.Files}}<li><a href="{{.DownloadURL}}" download>{{.Filename}}</a> ({{.Size}} bytes)</li>{{end}}</ul>
{{if .P.Files}}<p><a href="/api/v1/links/{{.Token}}/archive">Download all as zip</a></p>{{end}}
{{else}}
<p>Files received so far: {{len .P.Files}}.</p>
<form id="upload" method="post" enctype="multipart/form-data" action="/api/v1/links/{{.Token}}/files">
<label>Choose a file <input type="file" name="file" required></label>
<button type="submit">Upload</button>
</form>
<p id="status"></p>
<script>
document.getElementById("upload").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const status = document.getElementById("status");
  status.textContent = "Uploading…";
  const res = await fetch(ev.target.action, {method: "POST", body: new FormData(ev.target)});
  const body = await res.json().catch(() => ({}));
  status.textContent = res.ok ? "Uploaded " + body.filename + "." : "Upload failed: " + (body.detail || res.status);
  if (res.ok) setTimeout(() => location.reload(), 800);
});
</script>
{{end}}
</body></html>{{end}}
{{define "done"}}{{template "head"}}
<p>Administrator {{.Email}} created. Create an API token with
<code>shipctl token create --email {{.Email}} --name cli</code>.</p>
</body></html>{{end}}
`))
