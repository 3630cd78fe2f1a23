package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/pkg/apiclient"
)

// Link is a magic link taken apart.
type Link struct {
	// Base is the server's base URL (what comes before /p/).
	Base string
	// Token is the link's token.
	Token string
	// Fragment is what follows '#' (an end-to-end encryption key), "" when none.
	Fragment string
}

// ParseLink reads a magic link, {base}/p/{token}[#fragment].
func ParseLink(raw string) (Link, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Link{}, fmt.Errorf("%q is not a link (https://host/p/TOKEN)", raw)
	}
	i := strings.LastIndex(u.Path, "/p/")
	if i < 0 {
		return Link{}, fmt.Errorf("%q is not a shipfile link: its path has no /p/TOKEN", raw)
	}
	token := strings.TrimSuffix(u.Path[i+len("/p/"):], "/")
	if token == "" || strings.Contains(token, "/") {
		return Link{}, fmt.Errorf("%q is not a shipfile link: its path has no /p/TOKEN", raw)
	}
	return Link{Base: u.Scheme + "://" + u.Host + u.Path[:i], Token: token, Fragment: u.Fragment}, nil
}

// Downloaded is the outcome of one file's download.
type Downloaded struct {
	// Path is where the file is now.
	Path string
	// SHA256 is the lowercase hex SHA-256 of its bytes, equal to the server's.
	SHA256 string
	// ResumedFrom is how many bytes an earlier run had already stored.
	ResumedFrom int64
	// Received is how many bytes this run received.
	Received int64
	// Skipped says the file was there already, whole and with the server's SHA-256.
	Skipped bool
}

// Downloader fetches a link's files.
type Downloader struct {
	Client   *api.Client
	Progress Progress
	Retry    Retry
	// Grant is the link's grant for a password-protected link, "" otherwise.
	Grant string
	// Package, when set, fetches the files as their package's owner
	// (GET /api/v1/packages/{id}/files/{file_id}/content with the token) instead of
	// through a link.
	Package uuid.UUID
}

// SafeName is the name a file of the server gets in the download directory: its last
// path element, never empty, "." or "..".
func SafeName(name string) (string, error) {
	name = strings.ReplaceAll(name, "\\", "/")
	name = name[strings.LastIndexByte(name, '/')+1:]
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("the server named a file %q, which cannot be saved as it is", name)
	}
	return name, nil
}

// Download fetches file of the link with token into dir: into NAME.part first, going on
// from that file's length with a Range request, then renamed to NAME once its SHA-256
// equals the server's.
func (d *Downloader) Download(ctx context.Context, token string, file apiclient.LinkFile, dir string) (Downloaded, error) {
	name, err := SafeName(file.Filename)
	if err != nil {
		return Downloaded{}, err
	}
	out := Downloaded{Path: filepath.Join(dir, name)}
	if fi, err := os.Stat(out.Path); err == nil {
		sum, herr := fileSHA256(out.Path)
		if herr != nil {
			return out, &localError{herr}
		}
		if fi.Size() == file.Size && sum == file.Sha256 {
			out.SHA256, out.Skipped, out.ResumedFrom = sum, true, file.Size
			return out, nil
		}
		return out, &localError{fmt.Errorf("%s exists and is not the file of the link: move it away or choose another directory (-o)", out.Path)}
	}
	got, err := d.Fetch(ctx, token, file, out.Path+".part", name, nil)
	out.SHA256, out.ResumedFrom, out.Received = got.SHA256, got.ResumedFrom, got.Received
	if err != nil {
		if fi, serr := os.Stat(out.Path + ".part"); serr == nil && fi.Size() == 0 {
			_ = os.Remove(out.Path + ".part") // refused before a byte came: nothing to go on from
		}
		return out, err
	}
	if err := os.Rename(out.Path+".part", out.Path); err != nil {
		return out, &localError{err}
	}
	return out, nil
}

// ChecksumError says the bytes received differ from the server's record of the file.
type ChecksumError struct {
	Name      string
	Got, Want string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("%s: SHA-256 %s differs from the server's %s; the partial file was removed, run again", e.Name, e.Got, e.Want)
}

// Tee receives the bytes of a download in order, from the file's first byte, as they are
// written: e.g. to decrypt while downloading. Broken says it missed some (the download
// went on from an earlier run's part, or started over); N counts what it received.
type Tee struct {
	W      io.Writer
	N      int64
	Broken bool
}

func (t *Tee) write(p []byte) {
	if t == nil || t.Broken {
		return
	}
	if _, err := t.W.Write(p); err != nil {
		t.Broken = true
		return
	}
	t.N += int64(len(p))
}

// Fetch downloads file of the link with token into part, going on from part's length
// with a Range request, and checks that its SHA-256 equals the server's: the verified
// bytes are left in part (synced, unless tee is given). On a SHA-256 that differs, part is removed and the
// error is a *ChecksumError. name is shown in the progress. tee, when not nil, gets the
// bytes as they come.
func (d *Downloader) Fetch(ctx context.Context, token string, file apiclient.LinkFile, part, name string, tee *Tee) (Downloaded, error) {
	out := Downloaded{Path: part}
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return out, &localError{err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return out, &localError{err}
	}
	have := fi.Size()
	h := sha256.New()
	if have > file.Size {
		have = 0
	}
	if err := hashRange(h, f, 0, have); err != nil {
		return out, &localError{err}
	}
	out.ResumedFrom = have
	if tee != nil && have > 0 {
		tee.Broken = true
	}

	bar := d.Progress.Start(name, file.Size, have)
	failures := 0
	buf := make([]byte, 1<<20)
	for have < file.Size {
		n, restart, err := d.fetch(ctx, token, file, f, have, h, tee, bar, buf)
		if restart {
			have = 0
		}
		have += n
		out.Received += n
		if err == nil {
			failures = 0
			continue
		}
		if IsLocal(err) { // the disk, not the network: trying again changes nothing
			bar.Abort()
			return out, err
		}
		if err := d.Retry.again(ctx, failures, err); err != nil {
			bar.Abort()
			return out, err
		}
		failures++
		bar.Set(have)
	}
	if err := f.Truncate(have); err != nil {
		bar.Abort()
		return out, &localError{err}
	}
	out.SHA256 = hex.EncodeToString(h.Sum(nil))
	if out.SHA256 != file.Sha256 {
		bar.Abort()
		_ = os.Remove(part)
		return out, &ChecksumError{Name: name, Got: out.SHA256, Want: file.Sha256}
	}
	if tee == nil { // with a tee, what the caller makes of the bytes is what must last
		if err := f.Sync(); err != nil {
			bar.Abort()
			return out, &localError{err}
		}
	}
	bar.Finish()
	return out, nil
}

// fetch asks for the file's bytes from have on and writes them at have in f (and to h
// and tee); restart says the server sent the whole file instead (f was emptied and h
// reset first, tee is broken). It returns how many bytes it wrote.
func (d *Downloader) fetch(ctx context.Context, token string, file apiclient.LinkFile, f *os.File, have int64, h hash.Hash, tee *Tee, bar Bar, buf []byte) (int64, bool, error) {
	rangeFrom := func(_ context.Context, req *http.Request) error {
		if have > 0 {
			req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
		}
		return nil
	}
	var resp *http.Response
	var err error
	if d.Package != uuid.Nil {
		resp, err = d.Client.Raw.DownloadPackageFile(ctx, d.Package, file.Id, rangeFrom)
	} else {
		params := &apiclient.DownloadLinkFileParams{}
		if d.Grant != "" {
			params.LinkGrantHeader = &d.Grant
		}
		resp, err = d.Client.Raw.DownloadLinkFile(ctx, token, file.Id, params, rangeFrom)
	}
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	restart := false
	switch resp.StatusCode {
	case http.StatusOK:
		restart = have > 0
		if restart {
			if err := f.Truncate(0); err != nil {
				return 0, false, &localError{err}
			}
			h.Reset()
			if tee != nil {
				tee.Broken = true
			}
			bar.Set(0)
		}
		have = 0
	case http.StatusPartialContent:
		want := "bytes " + strconv.FormatInt(have, 10) + "-"
		if !strings.HasPrefix(resp.Header.Get("Content-Range"), want) {
			return 0, false, fmt.Errorf("the server answered the range %s- with %q", strconv.FormatInt(have, 10), resp.Header.Get("Content-Range"))
		}
	default:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return 0, false, api.ErrorFrom(resp, body)
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return 0, restart, &localError{err}
	}
	var n int64
	for {
		m, rerr := resp.Body.Read(buf)
		if m > 0 {
			if have+n+int64(m) > file.Size {
				return n, restart, fmt.Errorf("the server sent more than the file's %d bytes", file.Size)
			}
			if _, werr := f.Write(buf[:m]); werr != nil {
				return n, restart, &localError{werr}
			}
			h.Write(buf[:m])
			tee.write(buf[:m])
			n += int64(m)
			bar.Add(m)
		}
		if rerr == io.EOF {
			return n, restart, nil
		}
		if rerr != nil {
			return n, restart, rerr
		}
	}
}

// fileSHA256 hashes a whole file.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// FileSHA256 is the lowercase hex SHA-256 of the file at path.
func FileSHA256(path string) (string, error) {
	sum, err := fileSHA256(path)
	if err != nil {
		return "", &localError{err}
	}
	return sum, nil
}
