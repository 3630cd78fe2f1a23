package httpapi

import (
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/httpx"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/transfers"
)

// tus 1.0.0 (docs/UPLOADS.md): a focused implementation of the core protocol
// and the creation, creation-with-upload, termination, expiration and checksum
// extensions. The answers are written here and errors go through the one error
// middleware, so they stay {"detail"}; the credential of each route is ours (token or
// session on the owner's side, the magic link on the recipient's).

const (
	tusVersion    = "1.0.0"
	tusExtensions = "creation,creation-with-upload,termination,expiration,checksum"
	tusChunkType  = "application/offset+octet-stream"
	// headerFileID names the file a completed upload became.
	headerFileID = "Shipfile-File-Id"
)

// tusResumable puts Tus-Resumable on every answer of the tus routes.
func tusResumable(c *gin.Context) {
	c.Header("Tus-Resumable", tusVersion)
	c.Next()
}

// tusRequireVersion refuses a request other than OPTIONS that does not speak tus
// 1.0.0 (412 with Tus-Version).
func tusRequireVersion(c *gin.Context) {
	if c.Request.Method != http.MethodOptions && c.GetHeader("Tus-Resumable") != tusVersion {
		c.Header("Tus-Version", tusVersion)
		_ = c.Error(&httpError{status: http.StatusPreconditionFailed, detail: "Tus-Resumable: 1.0.0 is required"})
		c.Abort()
		return
	}
	c.Next()
}

// tusOptions answers OPTIONS with what this server supports.
func (h *handlers) tusOptions(c *gin.Context) {
	c.Header("Tus-Version", tusVersion)
	c.Header("Tus-Extension", tusExtensions)
	c.Header("Tus-Max-Size", strconv.FormatInt(h.maxFileSize, 10))
	c.Header("Tus-Checksum-Algorithm", transfers.TusChecksumAlgorithms)
	c.Status(http.StatusNoContent)
}

// ownerTarget is the target of an owner's upload route.
func ownerTarget(c *gin.Context) (transfers.TusTarget, error) {
	id, err := pathUUID(c, "id", "package")
	if err != nil {
		return transfers.TusTarget{}, err
	}
	u := currentUser(c)
	t := transfers.TusTarget{User: &u, PackageID: id, Client: client(c)}
	if tid, ok := c.Get(ctxTokenID); ok && tid.(int64) > 0 { // a browser session's is -user id
		t.TokenID = tid.(int64)
	}
	return t, nil
}

// linkTarget is the target of a recipient's upload route.
func linkTarget(c *gin.Context) (transfers.TusTarget, error) {
	return transfers.TusTarget{LinkToken: c.Param("token"), Client: client(c)}, nil
}

func (h *handlers) tusCreate(target func(*gin.Context) (transfers.TusTarget, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		t, err := target(c)
		if err != nil {
			_ = c.Error(err)
			return
		}
		if c.GetHeader("Upload-Defer-Length") != "" {
			_ = c.Error(&httpError{status: http.StatusBadRequest, detail: "Upload-Defer-Length is not supported; send Upload-Length"})
			return
		}
		length, err := strconv.ParseInt(c.GetHeader("Upload-Length"), 10, 64)
		if err != nil || length < 0 {
			_ = c.Error(&httpError{status: http.StatusBadRequest, detail: "Upload-Length must be a non-negative integer"})
			return
		}
		meta, err := parseMetadata(c.GetHeader("Upload-Metadata"))
		if err != nil {
			_ = c.Error(err)
			return
		}
		withBody := c.Request.ContentLength > 0 || c.Request.TransferEncoding != nil
		if withBody && !isChunkType(c.GetHeader("Content-Type")) {
			_ = c.Error(&httpError{status: http.StatusUnsupportedMediaType, detail: "a creation request with a body needs Content-Type: " + tusChunkType})
			return
		}
		res, err := h.resumable.Create(c.Request.Context(), t, transfers.NewTusUpload{
			Length: length, Filename: meta["filename"], ContentType: meta["filetype"], Manifest: meta["manifest"],
		})
		if err != nil {
			if withBody {
				refuseBody(c)
			}
			_ = c.Error(err)
			return
		}
		c.Header("Location", strings.TrimSuffix(c.Request.URL.Path, "/")+"/"+res.Upload.ID.String())
		c.Header("Upload-Expires", res.Upload.ExpiresAt.UTC().Format(http.TimeFormat))
		if withBody && res.File == nil {
			res, err = h.resumable.Write(c.Request.Context(), t, res.Upload.ID, chunk(c, 0))
			if err != nil {
				refuseBody(c)
				_ = c.Error(err)
				return
			}
			c.Header("Upload-Offset", strconv.FormatInt(res.Upload.Offset, 10))
		}
		if res.File != nil {
			c.Header(headerFileID, res.File.ID.String())
			c.Header("Upload-Offset", strconv.FormatInt(res.Upload.Offset, 10))
		}
		c.Status(http.StatusCreated)
	}
}

func uploadID(c *gin.Context) (uuid.UUID, error) {
	return pathUUID(c, "upload_id", "upload")
}

// tusUpload reads the target and the upload id of a request on an upload URL; when
// either is wrong it records the error on c and returns false.
func tusUpload(c *gin.Context, target func(*gin.Context) (transfers.TusTarget, error)) (transfers.TusTarget, uuid.UUID, bool) {
	t, err := target(c)
	if err != nil {
		_ = c.Error(err)
		return t, uuid.Nil, false
	}
	id, err := uploadID(c)
	if err != nil {
		_ = c.Error(err)
		return t, uuid.Nil, false
	}
	return t, id, true
}

func (h *handlers) tusHead(target func(*gin.Context) (transfers.TusTarget, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Header("Cache-Control", "no-store")
		t, id, ok := tusUpload(c, target)
		if !ok {
			return
		}
		u, err := h.resumable.Status(c.Request.Context(), t, id)
		if err != nil {
			_ = c.Error(err)
			return
		}
		c.Header("Upload-Offset", strconv.FormatInt(u.Offset, 10))
		c.Header("Upload-Length", strconv.FormatInt(u.Length, 10))
		if u.Completed {
			c.Header(headerFileID, u.FileID.String())
		} else {
			c.Header("Upload-Expires", u.ExpiresAt.UTC().Format(http.TimeFormat))
		}
		c.Status(http.StatusOK)
	}
}

func (h *handlers) tusPatch(target func(*gin.Context) (transfers.TusTarget, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !isChunkType(c.GetHeader("Content-Type")) {
			refuseBody(c)
			_ = c.Error(&httpError{status: http.StatusUnsupportedMediaType, detail: "Content-Type must be " + tusChunkType})
			return
		}
		offset, err := strconv.ParseInt(c.GetHeader("Upload-Offset"), 10, 64)
		if err != nil || offset < 0 {
			refuseBody(c)
			_ = c.Error(&httpError{status: http.StatusBadRequest, detail: "Upload-Offset must be a non-negative integer"})
			return
		}
		t, id, ok := tusUpload(c, target)
		if !ok {
			refuseBody(c)
			return
		}
		res, err := h.resumable.Write(c.Request.Context(), t, id, chunk(c, offset))
		if err != nil {
			refuseBody(c)
			_ = c.Error(err)
			return
		}
		c.Header("Upload-Offset", strconv.FormatInt(res.Upload.Offset, 10))
		if res.File != nil {
			c.Header(headerFileID, res.File.ID.String())
		} else {
			c.Header("Upload-Expires", res.Upload.ExpiresAt.UTC().Format(http.TimeFormat))
		}
		c.Status(http.StatusNoContent)
	}
}

func (h *handlers) tusDelete(target func(*gin.Context) (transfers.TusTarget, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		t, id, ok := tusUpload(c, target)
		if !ok {
			return
		}
		if err := h.resumable.Terminate(c.Request.Context(), t, id); err != nil {
			_ = c.Error(err)
			return
		}
		c.Status(http.StatusNoContent)
	}
}

// chunk is the body of a PATCH (or a creation with a body) at offset. Its Stop ends
// the reading of the body at once (the upload guard's httpx.MinRateBody): what a PATCH
// asked to hand its upload over calls.
func chunk(c *gin.Context, offset int64) transfers.Chunk {
	body := c.Request.Body
	return transfers.Chunk{
		Offset: offset, Body: body, Checksum: c.GetHeader("Upload-Checksum"), Size: c.Request.ContentLength,
		Stop: func() { httpx.Stop(body) },
	}
}

// Bounds of reading a refused request's body (refuseBody).
const (
	refusedBodyDrain = 32 << 20
	refusedBodyTime  = 10 * time.Second
)

// refuseBody reads what is left of the body of a request about to be refused, up to
// refusedBodyDrain bytes within refusedBodyTime, so the client, still sending, gets
// the answer instead of a connection reset: a server that answers and closes while
// the client's bytes keep arriving resets the connection, and many clients (browsers,
// Node) then report the reset, not the status. A body past those bounds (or one the
// server stopped reading) is answered with Connection: close.
func refuseBody(c *gin.Context) {
	body := c.Request.Body
	if body == nil || body == http.NoBody {
		return
	}
	if strings.EqualFold(c.GetHeader("Expect"), "100-continue") {
		// The client waits to be asked for the body: reading would ask for it.
		c.Header("Connection", "close")
		return
	}
	done := make(chan error, 1)
	timer := time.AfterFunc(refusedBodyTime, func() { httpx.Stop(body) })
	defer timer.Stop()
	go func() {
		n, err := io.Copy(io.Discard, io.LimitReader(body, refusedBodyDrain))
		if err == nil && n == refusedBodyDrain {
			err = errors.New("too much to read")
		}
		done <- err
	}()
	if err := <-done; err != nil {
		c.Header("Connection", "close")
	}
}

func isChunkType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == tusChunkType
}

// parseMetadata reads Upload-Metadata: comma-separated "key base64value" pairs (a key
// may come alone). filename is required, but for end-to-end encrypted packages
// (transfers.Resumable.Create says so).
func parseMetadata(h string) (map[string]string, error) {
	out := map[string]string{}
	for pair := range strings.SplitSeq(h, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		key, val, _ := strings.Cut(pair, " ")
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(val))
		if err != nil || key == "" {
			return nil, app.Invalid("Upload-Metadata must be comma-separated \"key base64value\" pairs")
		}
		out[key] = string(b)
	}
	return out, nil
}

// mountTus adds the tus routes of one creation URL (relative to group). upload is what
// guards requests that carry file bytes (PATCH, and POST with creation-with-upload):
// the gateway's upload limits, the same as on the multipart upload routes.
func (h *handlers) mountTus(g *gin.RouterGroup, path string, target func(*gin.Context) (transfers.TusTarget, error), upload ...gin.HandlerFunc) {
	g.POST(path, append(upload[:len(upload):len(upload)], h.tusCreate(target))...)
	g.HEAD(path+"/:upload_id", h.tusHead(target))
	g.PATCH(path+"/:upload_id", append(upload[:len(upload):len(upload)], h.tusPatch(target))...)
	g.DELETE(path+"/:upload_id", h.tusDelete(target))
}

// isTusPath says whether path is a tus creation or upload URL:
// /api/v1/{packages|links}/{id}/uploads[/{upload_id}].
func isTusPath(path string) bool {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	return (len(seg) == 5 || len(seg) == 6) && seg[0] == "api" && seg[1] == "v1" &&
		(seg[2] == "packages" || seg[2] == "links") && seg[4] == "uploads"
}
