package httpapi

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	api "github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// The package domain's answers are proto/openapi.yaml's schemas, generated into
// pkg/apiclient (api): Package, File, Recipient, and the compositions below of a
// generated schema with the generated schema of what an answer adds to it.

// packageDetail is a PackageDetail: the package and its files (always listed, [] for none).
type packageDetail struct {
	api.Package
	api.PackageFiles
}

// finalizedPackage is a FinalizedPackage: the package and its recipients' links.
type finalizedPackage struct {
	api.Package
	api.PackageLinks
}

// toAPIFiles is files as the API lists them: [] for none.
func toAPIFiles(files []app.File) []api.File {
	out := make([]api.File, len(files))
	for i, f := range files {
		out[i] = toAPIFile(f)
	}
	return out
}

// toAPIFile is a file as the API shows it; timestamps are UTC.
func toAPIFile(f app.File) api.File {
	return api.File{
		Id: f.ID, Filename: f.Filename, Size: f.Size, ContentType: f.ContentType, Sha256: f.SHA256,
		UploadedBy: api.FileUploadedBy(f.UploadedBy), RecipientId: f.RecipientID, CreatedAt: f.CreatedAt.UTC(), DownloadCount: f.DownloadCount,
		Scan: api.FileScan(f.Scan), ScanSignature: scanSignature(f), ScannedAt: utcPtr(f.ScannedAt),
		ScanReleasedBy: f.ScanReleasedBy, ScanReleasedAt: utcPtr(f.ScanReleasedAt),
		Encrypted: f.Encrypted, Manifest: fileManifest(f), Preview: f.PreviewKey != "",
	}
}

// scanSignature is what clamd found in an infected or unscannable file, null otherwise.
func scanSignature(f app.File) *string {
	if (f.Scan != app.ScanInfected && f.Scan != app.ScanUnscannable) || f.ScanSignature == "" {
		return nil
	}
	return &f.ScanSignature
}

// client is the caller for the audit log, with the link grant it presents (header
// Shipfile-Link-Grant, else the shipfile_link cookie).
func client(c *gin.Context) app.Client {
	grant := c.GetHeader(LinkGrantHeader)
	if grant == "" {
		grant, _ = c.Cookie(LinkCookie)
	}
	cl := app.NewClient(c.ClientIP(), c.Request.UserAgent())
	cl.Grant = grant
	return cl
}

// pathUUID parses a UUID path parameter; anything else cannot name a resource.
func pathUUID(c *gin.Context, name, what string) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param(name))
	if err != nil {
		return uuid.UUID{}, app.NotFound(what)
	}
	return id, nil
}

// fileParams parses the package and file ids of a file route.
func fileParams(c *gin.Context) (id, fileID uuid.UUID, err error) {
	if id, err = pathUUID(c, "id", "package"); err != nil {
		return id, fileID, err
	}
	fileID, err = pathUUID(c, "file_id", "file")
	return id, fileID, err
}

func (h *handlers) createPackage(c *gin.Context) {
	var req createPackageRequest
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	lang := senderLanguage(c)
	if req.RecipientLanguage == nil {
		req.RecipientLanguage = &lang
	}
	if req.Recipients != nil {
		defaultLanguages(*req.Recipients, lang)
	}
	p, err := h.packages.Create(c.Request.Context(), currentUser(c), client(c), packages.NewPackage(req))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusCreated, toAPIPackage(p))
}

// updatePackage is PATCH /api/v1/packages/{id}.
func (h *handlers) updatePackage(c *gin.Context) {
	id, err := pathUUID(c, "id", "package")
	if err != nil {
		_ = c.Error(err)
		return
	}
	req := newUpdatePackageRequest()
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	if req.Encryption != nil {
		_ = c.Error(app.Invalid("encryption is fixed when the package is created"))
		return
	}
	expires, err := parseTime("expires_at", req.ExpiresAt)
	if err != nil {
		_ = c.Error(err)
		return
	}
	p, err := h.packages.Update(c.Request.Context(), currentUser(c), client(c), id, req.patch(expires))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toAPIPackage(p))
}

func (h *handlers) listPackages(c *gin.Context) {
	f := app.PackageFilter{}
	var err error
	if f.Limit, err = pageLimit(c); err != nil {
		_ = c.Error(err)
		return
	}
	if s, ok := c.GetQuery("state"); ok {
		st := app.State(s)
		if st != app.StateDraft && st != app.StateActive && st != app.StateRevoked && st != app.StateExpired {
			_ = c.Error(app.Invalid("state must be draft, active, revoked or expired"))
			return
		}
		f.State = &st
	}
	if d, ok := c.GetQuery("direction"); ok {
		dir := app.Direction(d)
		if dir != app.Outbound && dir != app.Inbound {
			_ = c.Error(app.Invalid("direction must be outbound or inbound"))
			return
		}
		f.Direction = &dir
	}
	if cur := c.Query("cursor"); cur != "" {
		if f.After, err = decodeCursor(cur); err != nil {
			_ = c.Error(err)
			return
		}
	}
	limit := f.Limit
	f.Limit++ // one more than the page tells whether another page follows
	pkgs, err := h.packages.List(c.Request.Context(), currentUser(c), f)
	if err != nil {
		_ = c.Error(err)
		return
	}
	pkgs, next := page(pkgs, limit, func(last app.Package) string {
		return encodeCursor(app.PackageCursor{CreatedAt: last.CreatedAt, ID: last.ID})
	})
	items := make([]api.Package, len(pkgs))
	for i, p := range pkgs {
		items[i] = toAPIPackage(p)
	}
	c.JSON(http.StatusOK, api.PackageList{Items: items, NextCursor: next})
}

func encodeCursor(cur app.PackageCursor) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%s", cur.CreatedAt.UnixMicro(), cur.ID))
}

func decodeCursor(s string) (*app.PackageCursor, error) {
	bad := app.Invalid("cursor is not one this API handed out")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	micros, id, ok := strings.Cut(string(b), ".")
	if !ok {
		return nil, bad
	}
	us, err := strconv.ParseInt(micros, 10, 64)
	if err != nil {
		return nil, bad
	}
	uid, err := uuid.Parse(id)
	if err != nil {
		return nil, bad
	}
	return &app.PackageCursor{CreatedAt: time.UnixMicro(us).UTC(), ID: uid}, nil
}

func (h *handlers) getPackage(c *gin.Context) {
	id, err := pathUUID(c, "id", "package")
	if err != nil {
		_ = c.Error(err)
		return
	}
	p, files, err := h.packages.Get(c.Request.Context(), currentUser(c), id)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, packageDetail{toAPIPackage(p), api.PackageFiles{Files: toAPIFiles(files)}})
}

func (h *handlers) deletePackage(c *gin.Context) {
	id, err := pathUUID(c, "id", "package")
	if err != nil {
		_ = c.Error(err)
		return
	}
	if err := h.packages.Delete(c.Request.Context(), currentUser(c), client(c), id); err != nil {
		_ = c.Error(err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *handlers) finalizePackage(c *gin.Context) {
	id, err := pathUUID(c, "id", "package")
	if err != nil {
		_ = c.Error(err)
		return
	}
	p, links, err := h.packages.Finalize(c.Request.Context(), currentUser(c), client(c), id)
	if err != nil {
		_ = c.Error(err)
		return
	}
	resp := finalizedPackage{toAPIPackage(p), api.PackageLinks{Links: toAPIRecipientLinks(links)}}
	if len(links) > 0 {
		resp.MagicLink = links[0].MagicLink
	}
	c.JSON(http.StatusOK, resp)
}

func (h *handlers) revokePackage(c *gin.Context) {
	id, err := pathUUID(c, "id", "package")
	if err != nil {
		_ = c.Error(err)
		return
	}
	p, err := h.packages.Revoke(c.Request.Context(), currentUser(c), client(c), id)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toAPIPackage(p))
}

func (h *handlers) uploadFile(c *gin.Context) {
	id, err := pathUUID(c, "id", "package")
	if err != nil {
		_ = c.Error(err)
		return
	}
	f, err := h.withUpload(c, func(up app.Upload) (app.File, error) {
		return h.packages.UploadAsOwner(c.Request.Context(), currentUser(c), client(c), id, up)
	})
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusCreated, toAPIFile(f))
}

// bodyBufferSize is how much of an upload's body one read of the socket may take.
const bodyBufferSize = 64 << 10

// bodyBuffers are the read buffers under the multipart readers of uploads.
var bodyBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bodyBufferSize) }}

// withUpload finds the multipart part named "file" and hands its stream to store,
// never buffering the file: no FormFile, no temporary file.
func (h *handlers) withUpload(c *gin.Context, store func(app.Upload) (app.File, error)) (app.File, error) {
	mt, params, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return app.File{}, &httpError{status: http.StatusUnsupportedMediaType, detail: "Content-Type must be multipart/form-data with the file in a part named \"file\""}
	}
	// The whole body may be the file plus a little multipart framing.
	body := http.MaxBytesReader(c.Writer, c.Request.Body, h.maxFileSize+1<<20)
	// multipart.Reader reads 4 KiB at a time, which the connection would turn into one
	// read(2) each: read the socket in larger pieces underneath.
	br := bodyBuffers.Get().(*bufio.Reader)
	br.Reset(body)
	defer func() {
		br.Reset(nil)
		bodyBuffers.Put(br)
	}()
	mr := multipart.NewReader(br, params["boundary"])
	manifest := ""
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return app.File{}, app.Invalid("the multipart body has no part named \"file\"")
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return app.File{}, &app.Error{Kind: app.KindTooLarge, Detail: "request body too large"}
			}
			return app.File{}, &app.Error{Kind: app.KindBadRequest, Detail: "malformed multipart body"}
		}
		if part.FormName() == "manifest" {
			// An encrypted file request's upload carries its own manifest entry, before
			// the file part (docs/ENCRYPTION.md).
			b, err := io.ReadAll(io.LimitReader(part, maxManifestField+1))
			part.Close()
			if err != nil {
				return app.File{}, &app.Error{Kind: app.KindBadRequest, Detail: "malformed multipart body"}
			}
			if len(b) > maxManifestField {
				return app.File{}, app.Invalid("manifest must be at most %d bytes (decoded)", app.MaxFileManifest)
			}
			manifest = string(b)
			continue
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		// The raw filename: Part.FileName would strip a path and hide "../" from the check.
		_, dp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		defer part.Close()
		return store(app.Upload{Filename: dp["filename"], ContentType: part.Header.Get("Content-Type"), Body: part, Manifest: manifest})
	}
}

func (h *handlers) removeFile(c *gin.Context) {
	id, fileID, err := fileParams(c)
	if err != nil {
		_ = c.Error(err)
		return
	}
	if err := h.packages.RemoveFile(c.Request.Context(), currentUser(c), client(c), id, fileID); err != nil {
		_ = c.Error(err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *handlers) downloadFile(c *gin.Context) {
	id, fileID, err := fileParams(c)
	if err != nil {
		_ = c.Error(err)
		return
	}
	f, obj, err := h.packages.OpenFile(c.Request.Context(), currentUser(c), id, fileID)
	if err != nil {
		_ = c.Error(err)
		return
	}
	defer obj.Close()
	serveFile(c, f, obj)
}

// serveFile answers with a file's bytes as an attachment, with ranges and ETag.
func serveFile(c *gin.Context, f app.File, obj app.Object) {
	w := c.Writer
	w.Header().Set("Content-Type", f.ContentType)
	w.Header().Set("Content-Disposition", attachment(f.Filename))
	w.Header().Set("ETag", `"`+f.SHA256+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "private, no-store")
	http.ServeContent(w, c.Request, "", f.CreatedAt, obj)
}

// attachment builds a Content-Disposition with an ASCII fallback filename and the
// RFC 6266 / RFC 5987 filename* carrying the real UTF-8 name.
func attachment(name string) string {
	fallback := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' || r == '%' {
			return '_'
		}
		return r
	}, name)
	return fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`, fallback, rfc5987(name))
}

// rfc5987 percent-encodes everything but RFC 5987's attr-char.
func rfc5987(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c < 0x80 && (('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || strings.IndexByte("!#$&+-.^_`|~", c) >= 0) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// toAPIAuditEntry is an audit log entry as the API shows it; Hits is at least 1.
func toAPIAuditEntry(e app.AuditEntry) api.AuditEntry {
	return api.AuditEntry{
		Id: e.ID, CreatedAt: e.CreatedAt.UTC(), Actor: api.AuditEntryActor(e.Actor), ActorUserId: e.ActorUserID, Action: e.Action,
		PackageId: e.PackageID, FileId: e.FileID, RecipientId: e.RecipientID, Ip: e.IP, UserAgent: e.UserAgent,
		Detail: e.Detail, Hits: max(e.Hits, 1),
	}
}

func (h *handlers) listAudit(c *gin.Context) {
	f := app.AuditFilter{}
	var err error
	if f.Limit, err = pageLimit(c); err != nil {
		_ = c.Error(err)
		return
	}
	if s := c.Query("package_id"); s != "" {
		id, err := uuid.Parse(s)
		if err != nil {
			_ = c.Error(app.Invalid("package_id must be a UUID"))
			return
		}
		f.PackageID = &id
	}
	if f.BeforeID, err = idCursor(c); err != nil {
		_ = c.Error(err)
		return
	}
	limit := f.Limit
	f.Limit++
	entries, err := h.packages.Audit(c.Request.Context(), f)
	if err != nil {
		_ = c.Error(err)
		return
	}
	entries, next := page(entries, limit, func(last app.AuditEntry) string { return strconv.FormatInt(last.ID, 10) })
	items := make([]api.AuditEntry, len(entries))
	for i, e := range entries {
		items[i] = toAPIAuditEntry(e)
	}
	c.JSON(http.StatusOK, api.AuditList{Items: items, NextCursor: next})
}
