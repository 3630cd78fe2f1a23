// Package transfer moves file bytes between this machine and a shipfile server: uploads
// through tus that go on from the server's offset (Upload), and downloads through a
// magic link that go on with Range (Download). Both hash what they move and retry, after
// a pause, what fails on the way (a dropped connection, a busy or restarting server).
package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/pkg/apiclient"
)

// tusChunkType is the content type of a tus PATCH body.
const tusChunkType = "application/offset+octet-stream"

// headerFileID names the file a completed tus upload became.
const headerFileID = "Shipfile-File-Id"

// Bar shows how far one file's transfer is.
type Bar interface {
	// Add counts n more bytes moved.
	Add(n int)
	// Set says that done bytes are moved (after a resume went back).
	Set(done int64)
	// Finish ends the bar after success, Abort after failure.
	Finish()
	Abort()
}

// Progress makes a Bar per file.
type Progress interface {
	// Start begins a bar for name of total bytes, done of which are moved already.
	Start(name string, total, done int64) Bar
}

// Retry says how often and how long to wait when a request fails on the way.
type Retry struct {
	// Attempts is how many failures in a row are retried before giving up.
	Attempts int
	// Min and Max bound the pause between attempts (doubling, with jitter).
	Min, Max time.Duration
}

// DefaultRetry is what the command line uses.
var DefaultRetry = Retry{Attempts: 8, Min: 500 * time.Millisecond, Max: 30 * time.Second}

func (r Retry) wait(ctx context.Context, attempt int, err error) error {
	d := r.Min << min(attempt, 16)
	if d > r.Max || d <= 0 {
		d = r.Max
	}
	d = d/2 + rand.N(d/2+1)
	var ae *api.Error
	if errors.As(err, &ae) && ae.RetryAfter > d {
		d = ae.RetryAfter
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// again decides on err, the failure that follows failures others in a row: it returns
// err when that is for good (not retryable, or the Attempts are spent), else it waits
// before the next try and returns nil (or ctx's error when cancelled meanwhile).
func (r Retry) again(ctx context.Context, failures int, err error) error {
	if !api.Retryable(err) || failures >= r.Attempts {
		return err
	}
	return r.wait(ctx, failures, err)
}

// do calls fn until it succeeds, fails for good, or has failed Attempts+1 times in a row.
func (r Retry) do(ctx context.Context, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		if err := r.again(ctx, attempt, err); err != nil {
			return err
		}
	}
}

// UploadState is what a later run needs to go on with one file's upload.
type UploadState struct {
	// UploadID is the tus upload's id (its URL is the package's uploads URL + /id).
	UploadID string `json:"upload_id,omitempty"`
	// FileID is the file the upload became, once complete.
	FileID string `json:"file_id,omitempty"`
}

// Uploaded is the outcome of one file's upload.
type Uploaded struct {
	FileID uuid.UUID
	// SHA256 is the lowercase hex SHA-256 of the local file's bytes.
	SHA256 string
	// ResumedFrom is the offset the server had when this run began (0 for a new upload).
	ResumedFrom int64
	// Sent is how many bytes this run sent.
	Sent int64
}

// Uploader sends files to a package through tus.
type Uploader struct {
	Client   *api.Client
	Progress Progress
	Retry    Retry
}

// localError is a failure on this machine (reading the file): never retried.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// Source is a file to upload.
type Source struct {
	// Path is the file whose bytes are sent, Size its length.
	Path string
	Size int64
	// Name is shown in the progress (default: Path's last element).
	Name string
	// RemoteName is the tus `filename` sent to the server, with the `filetype` of its
	// extension (default: Name). An encrypted file's is neutral: the server must not
	// learn the real name.
	RemoteName string
}

// Upload sends the file src to package pkg. st carries what an earlier run stored of it
// (and is updated); save is called whenever st changes, so that a run killed at any
// moment can be taken up again.
func (u *Uploader) Upload(ctx context.Context, pkg uuid.UUID, src Source, st *UploadState, save func() error) (Uploaded, error) {
	file, size := src.Path, src.Size
	name := src.Name
	if name == "" {
		name = filepath.Base(file)
	}
	remote := src.RemoteName
	if remote == "" {
		remote = name
	}
	var out Uploaded
	h := sha256.New()
	var hashed int64 // h covers the file's bytes [0, hashed)

	var offset int64
	if st.FileID != "" {
		id, err := uuid.Parse(st.FileID)
		if err == nil {
			out.FileID, out.ResumedFrom = id, size
		}
	}
	if out.FileID == uuid.Nil && st.UploadID != "" {
		id, err := uuid.Parse(st.UploadID)
		if err == nil {
			var fileID uuid.UUID
			err = u.Retry.do(ctx, func() error {
				var err error
				offset, fileID, err = u.status(ctx, pkg, id, size)
				return err
			})
			switch {
			case err == nil:
				out.FileID, out.ResumedFrom = fileID, offset
			case isGone(err):
				st.UploadID, offset = "", 0 // expired, ended or not ours: start over
			default:
				return out, err
			}
		} else {
			st.UploadID = ""
		}
	}
	if out.FileID == uuid.Nil && st.UploadID == "" {
		var id, fileID uuid.UUID
		err := u.Retry.do(ctx, func() error {
			var err error
			id, fileID, err = u.create(ctx, pkg, remote, size)
			return err
		})
		if err != nil {
			return out, err
		}
		st.UploadID, offset = id.String(), 0
		out.FileID = fileID
		if err := save(); err != nil {
			return out, &localError{err}
		}
	}

	if out.FileID == uuid.Nil {
		f, err := os.Open(file)
		if err != nil {
			return out, &localError{err}
		}
		defer f.Close()
		bar := u.Progress.Start(name, size, offset)
		uploadID := uuid.MustParse(st.UploadID)
		failures := 0
		for out.FileID == uuid.Nil {
			if offset < hashed { // the server kept less than was read: hash again
				h.Reset()
				hashed = 0
			}
			if err := hashRange(h, f, hashed, offset); err != nil {
				bar.Abort()
				return out, &localError{err}
			}
			hashed = offset
			bar.Set(offset)
			body := &countingReader{r: io.NewSectionReader(f, offset, size-offset), h: h, bar: bar}
			newOffset, fileID, err := u.write(ctx, pkg, uploadID, offset, size-offset, body)
			hashed += body.n
			out.Sent += body.n
			if err == nil {
				failures = 0
				offset, out.FileID = newOffset, fileID
				if out.FileID == uuid.Nil && offset >= size {
					err = errors.New("the server stored every byte but named no file")
					bar.Abort()
					return out, err
				}
				continue
			}
			if body.err != nil {
				bar.Abort()
				return out, &localError{body.err}
			}
			var conflict error
			if api.StatusOf(err) == http.StatusConflict {
				// Another offset than the server's (ask it where to go on), or the
				// package's state (the status below shows no progress then).
				conflict, err = err, nil
			}
			if err != nil {
				if err := u.Retry.again(ctx, failures, err); err != nil {
					bar.Abort()
					return out, err
				}
				failures++
			}
			// Where does the server stand now?
			for {
				o, fileID, err := u.status(ctx, pkg, uploadID, size)
				if err == nil && conflict != nil && o == offset && fileID == uuid.Nil {
					// No other offset: the package's state, or an earlier PATCH that
					// the server has not finished storing yet. Try a few times.
					if failures >= 2 {
						bar.Abort()
						return out, conflict
					}
					err = conflict
				}
				if err == nil {
					offset, out.FileID = o, fileID
					break
				}
				if errors.Is(err, conflict) {
					if werr := u.Retry.wait(ctx, failures, err); werr != nil {
						bar.Abort()
						return out, werr
					}
					failures++
					break
				}
				if err := u.Retry.again(ctx, failures, err); err != nil {
					bar.Abort()
					return out, err
				}
				failures++
			}
		}
		bar.Set(size)
		bar.Finish()
	}

	// The hash of the whole file: what was not sent in this run is read from disk.
	f, err := os.Open(file)
	if err != nil {
		return out, &localError{err}
	}
	defer f.Close()
	if hashed > size {
		h.Reset()
		hashed = 0
	}
	if err := hashRange(h, f, hashed, size); err != nil {
		return out, &localError{err}
	}
	out.SHA256 = hex.EncodeToString(h.Sum(nil))
	st.FileID = out.FileID.String()
	if err := save(); err != nil {
		return out, &localError{err}
	}
	return out, nil
}

// IsLocal says whether err is a failure on this machine rather than of the server.
func IsLocal(err error) bool {
	var le *localError
	return errors.As(err, &le)
}

func isGone(err error) bool {
	switch api.StatusOf(err) {
	case http.StatusNotFound, http.StatusGone, http.StatusForbidden:
		return true
	}
	return false
}

// ContentType is the media type of a file named name, by its extension; "" when the
// extension says nothing (the server records application/octet-stream then).
func ContentType(name string) string {
	return mime.TypeByExtension(strings.ToLower(path.Ext(name)))
}

// create starts an upload of size bytes named name; a file of no bytes is complete at
// once and its id is returned.
func (u *Uploader) create(ctx context.Context, pkg uuid.UUID, name string, size int64) (uuid.UUID, uuid.UUID, error) {
	meta := "filename " + base64.StdEncoding.EncodeToString([]byte(name))
	if ct := ContentType(name); ct != "" {
		meta += ",filetype " + base64.StdEncoding.EncodeToString([]byte(ct))
	}
	params := &apiclient.TusCreateOwnerParams{TusResumable: apiclient.TusCreateOwnerParamsTusResumableN100, UploadLength: size, UploadMetadata: meta}
	resp, err := u.Client.Raw.TusCreateOwnerWithBody(ctx, pkg, params, tusChunkType, http.NoBody)
	if err != nil {
		return uuid.Nil, uuid.Nil, err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return uuid.Nil, uuid.Nil, api.ErrorFrom(resp, body)
	}
	loc := resp.Header.Get("Location")
	id, err := uuid.Parse(loc[strings.LastIndexByte(loc, '/')+1:])
	if err != nil {
		return uuid.Nil, uuid.Nil, fmt.Errorf("the server's upload URL %q names no upload", loc)
	}
	fileID, _ := uuid.Parse(resp.Header.Get(headerFileID))
	return id, fileID, nil
}

// status asks the server for the upload's offset and, once complete, its file.
func (u *Uploader) status(ctx context.Context, pkg, upload uuid.UUID, size int64) (int64, uuid.UUID, error) {
	params := &apiclient.TusStatusOwnerParams{TusResumable: apiclient.TusStatusOwnerParamsTusResumableN100}
	resp, err := u.Client.Raw.TusStatusOwner(ctx, pkg, upload, params)
	if err != nil {
		return 0, uuid.Nil, err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		// HEAD answers carry no body: the status says it.
		return 0, uuid.Nil, api.ErrorFrom(resp, nil)
	}
	offset, err := strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
	if err != nil || offset < 0 || offset > size {
		return 0, uuid.Nil, fmt.Errorf("the server's Upload-Offset %q is not within the file", resp.Header.Get("Upload-Offset"))
	}
	if l := resp.Header.Get("Upload-Length"); l != "" && l != strconv.FormatInt(size, 10) {
		return 0, uuid.Nil, &api.Error{Status: http.StatusGone, Detail: "the upload on the server has another length"}
	}
	fileID, _ := uuid.Parse(resp.Header.Get(headerFileID))
	return offset, fileID, nil
}

// write sends n bytes of body from offset in one PATCH.
func (u *Uploader) write(ctx context.Context, pkg, upload uuid.UUID, offset, n int64, body io.Reader) (int64, uuid.UUID, error) {
	params := &apiclient.TusWriteOwnerParams{TusResumable: apiclient.TusWriteOwnerParamsTusResumableN100, UploadOffset: offset}
	resp, err := u.Client.Raw.TusWriteOwnerWithBody(ctx, pkg, upload, params, tusChunkType, body, func(_ context.Context, req *http.Request) error {
		req.ContentLength = n
		if n == 0 {
			req.Body = http.NoBody
		}
		return nil
	})
	if err != nil {
		return 0, uuid.Nil, err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return 0, uuid.Nil, api.ErrorFrom(resp, b)
	}
	got, err := strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
	if err != nil {
		return 0, uuid.Nil, fmt.Errorf("the server's Upload-Offset %q is not a number", resp.Header.Get("Upload-Offset"))
	}
	fileID, _ := uuid.Parse(resp.Header.Get(headerFileID))
	return got, fileID, nil
}

// countingReader feeds what it reads to a hash and a bar, and remembers a read error
// (of the local file, as opposed to the connection's).
type countingReader struct {
	r   io.Reader
	h   hash.Hash
	bar Bar
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.h.Write(p[:n])
		c.n += int64(n)
		c.bar.Add(n)
	}
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

// hashRange feeds the file's bytes [from, to) to h.
func hashRange(h hash.Hash, f *os.File, from, to int64) error {
	if to <= from {
		return nil
	}
	n, err := io.Copy(h, io.NewSectionReader(f, from, to-from))
	if err == nil && n != to-from {
		err = fmt.Errorf("%s changed while it was sent (shorter than before)", f.Name())
	}
	return err
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
