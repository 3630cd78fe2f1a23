package httpapi

import (
	"archive/zip"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	api "github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// linkPackage is a LinkPackage, what a recipient sees of a package through its link:
// the generated LinkPackage with its files as LinkFiles.
type linkPackage struct {
	api.LinkPackage
	// Files is LinkPackage.files: its items are linkFiles, so that a LinkFile is composed
	// of the generated File and LinkFileAccess rather than a second mapping of File.
	Files []linkFile `json:"files"`
}

// linkFile is a LinkFile: a file and how to download it through the link.
type linkFile struct {
	api.File
	api.LinkFileAccess
}

func toAPILinkPackage(token string, p app.Package, files []app.File) linkPackage {
	out := linkPackage{
		LinkPackage: api.LinkPackage{
			Id: p.ID, Title: p.Title, Note: p.Note, Direction: api.LinkPackageDirection(p.Direction), State: api.LinkPackageState(p.State),
			ExpiresAt: p.ExpiresAt.UTC(), FileCount: p.FileCount, TotalSize: p.TotalSize,
			PasswordProtected: p.PasswordProtected(), MaxDownloads: p.MaxDownloads,
			Encryption: api.Encryption(encryptionOf(p)), PublicKey: nullIfEmpty(p.OwnerPublicKey),
		},
		Files: make([]linkFile, len(files)),
	}
	for i, f := range files {
		// DownloadsLeft: the file's budget left through the link in whole copies
		// (docs/API.md, "Download limit"); null: no limit.
		out.Files[i] = linkFile{toAPIFile(f), api.LinkFileAccess{
			DownloadUrl:   "/api/v1/links/" + token + "/files/" + f.ID.String(),
			DownloadsLeft: f.DownloadsLeft(p.MaxDownloads),
		}}
	}
	return out
}

func (h *handlers) viewLink(c *gin.Context) {
	token := c.Param("token")
	p, files, err := h.links.ViewLink(c.Request.Context(), token, client(c))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Header("Cache-Control", "private, no-store")
	c.JSON(http.StatusOK, toAPILinkPackage(token, p, files))
}

func (h *handlers) downloadViaLink(c *gin.Context) {
	fileID, err := pathUUID(c, "file_id", "file")
	if err != nil {
		_ = c.Error(err)
		return
	}
	plan := func(f app.File) (app.Span, error) { return linkSpan(c.Request, f) }
	f, span, obj, finish, err := h.links.DownloadViaLink(c.Request.Context(), c.Param("token"), client(c), fileID, plan)
	if err != nil {
		_ = c.Error(err)
		return
	}
	defer obj.Close()
	settleSpan(c, serveSpan(c, f, span, obj), finish)
}

// archiveViaLink streams every file of the package as one zip, stored without
// compression (files are streamed straight from storage, nothing is buffered). Where
// each entry's bytes lie in the stream is noted, so a stream cut midway keeps the
// entries the client got whole taken from their budgets and gives back the rest.
func (h *handlers) archiveViaLink(c *gin.Context) {
	p, files, open, finish, err := h.links.ArchiveViaLink(c.Request.Context(), c.Param("token"), client(c))
	if err != nil {
		_ = c.Error(err)
		return
	}
	out := &countingWriter{w: c.Writer}
	entries := make([]zipEntry, 0, len(files))
	complete := false
	var meter deliveryMeter
	// Deferred, so a stream cut by the panic below settles its budgets too.
	defer func() {
		settleDelivery(meter, out.n, !complete, func(delivered int64, all bool) {
			finish(archiveSent(entries, all, delivered))
		})
	}()
	w := c.Writer
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Disposition", attachment(app.ArchiveName(p)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "private, no-store")
	omitted := h.scanOmitted(c, p.ID)
	w.WriteHeader(http.StatusOK)
	// The headers out first, so the meter counts the zip's bytes alone.
	w.Flush()
	meter = startDeliveryMeter(c.Request)
	zw := zip.NewWriter(out)
	if omitted != "" {
		_ = zw.SetComment(omitted)
	}
	names := map[string]int{}
	for _, f := range files {
		e, err := addToZip(zw, out, f, uniqueName(names, f.Filename), open)
		entries = append(entries, e)
		if err != nil {
			// The status is sent; all we can do is cut the stream so the client sees a
			// broken zip rather than a short one that looks whole.
			h.log.Error("zip stream failed", "package_id", p.ID, "file_id", f.ID, "err", err)
			panic(http.ErrAbortHandler)
		}
	}
	if err := zw.Close(); err != nil {
		h.log.Warn("zip stream close failed", "package_id", p.ID, "err", err)
		return
	}
	complete = true
}

// zipEntry is where a file's bytes lie in an archive's stream: written of them from
// start on.
type zipEntry struct {
	id             uuid.UUID
	size           int64
	start, written int64
}

// archiveSent is what an archive sent of each entry: all of each when the client got
// all of the stream (complete); else what lies within the delivered bytes of it.
func archiveSent(entries []zipEntry, complete bool, delivered int64) map[uuid.UUID]app.Sent {
	sent := make(map[uuid.UUID]app.Sent, len(entries))
	for _, e := range entries {
		if complete {
			sent[e.id] = app.Sent{Bytes: e.written, Whole: true}
			continue
		}
		n := min(max(delivered-e.start, 0), e.written)
		sent[e.id] = app.Sent{Bytes: n, Whole: n == e.size && delivered >= e.start}
	}
	return sent
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// addToZip writes f as an entry of zw, whose stream goes through out, and says where
// its bytes went.
func addToZip(zw *zip.Writer, out *countingWriter, f app.File, name string, open func(app.File) (app.Object, error)) (zipEntry, error) {
	e := zipEntry{id: f.ID, size: f.Size}
	obj, err := open(f)
	if err != nil {
		return e, err
	}
	defer obj.Close()
	hdr := &zip.FileHeader{Name: name, Method: zip.Store, Modified: f.CreatedAt}
	hdr.SetMode(0o644)
	dst, err := zw.CreateHeader(hdr)
	if err != nil {
		return e, err
	}
	// The header out of zw's buffer, so the stream's count is where the data starts.
	if err := zw.Flush(); err != nil {
		return e, err
	}
	e.start = out.n
	e.written, err = io.Copy(dst, obj)
	return e, err
}

// uniqueName keeps names within one zip distinct: "a.txt", "a (2).txt", ...
func uniqueName(seen map[string]int, name string) string {
	seen[name]++
	n := seen[name]
	if n == 1 {
		return name
	}
	ext := ""
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		name, ext = name[:i], name[i:]
	}
	candidate := fmt.Sprintf("%s (%d)%s", name, n, ext)
	return uniqueName(seen, candidate)
}

func (h *handlers) uploadViaLink(c *gin.Context) {
	token := c.Param("token")
	f, err := h.withUpload(c, func(up app.Upload) (app.File, error) {
		return h.links.UploadViaLink(c.Request.Context(), token, client(c), up)
	})
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusCreated, toAPIFile(f))
}

// The link grant's header and cookie (docs/API.md, "Protected links").
const (
	LinkGrantHeader = "Shipfile-Link-Grant"
	LinkCookie      = "shipfile_link"
)

// unlockLink checks a protected link's password and answers a grant, also set as the
// shipfile_link cookie for the link's page and API paths alone.
func (h *handlers) unlockLink(c *gin.Context) {
	var req api.Unlock
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	if req.Password == nil {
		_ = c.Error(app.Invalid("password is required"))
		return
	}
	token := c.Param("token")
	grant, exp, err := h.links.Unlock(c.Request.Context(), token, *req.Password, client(c))
	if err != nil {
		_ = c.Error(err)
		return
	}
	SetLinkCookie(c.Writer, c.Request, token, grant, exp, h.secureCookies)
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, api.LinkGrant{Grant: grant, ExpiresAt: exp.UTC()})
}

// SetLinkCookie sets the shipfile_link cookie holding grant for the link token alone:
// one cookie on the recipient's page path and one on the link's API path (HttpOnly,
// SameSite=Lax, until the grant expires). It is Secure when secure is set
// (SHIPFILE_COOKIE_SECURE: behind a TLS-terminating ingress the request itself is
// plain HTTP) or the request came over TLS.
func SetLinkCookie(w http.ResponseWriter, r *http.Request, token, grant string, exp time.Time, secure bool) {
	for _, path := range []string{"/p/" + token, "/api/v1/links/" + token} {
		http.SetCookie(w, &http.Cookie{
			Name: LinkCookie, Value: grant, Path: path, Expires: exp, MaxAge: int(time.Until(exp).Seconds()),
			HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure || r.TLS != nil,
		})
	}
}
