package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

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
	// Wait is how long files still being checked for malware are waited for, in all,
	// from the first such answer; 0 fails at once.
	Wait time.Duration
	// Waiting, when set, is called with a file's name as its wait for the malware scan
	// begins.
	Waiting func(name string)

	waitUntil time.Time
}

// Download fetches file of the link with token into dir as name (a safe name:
// safename.For): into NAME.part first, going on from that file's length with a Range
// request, then moved to NAME once its SHA-256 equals the server's. Neither is ever
// written through a symbolic link, and an existing NAME is never replaced.
func (d *Downloader) Download(ctx context.Context, token string, file apiclient.LinkFile, dir, name string) (Downloaded, error) {
	out := Downloaded{Path: filepath.Join(dir, name)}
	fi, err := Existing(out.Path)
	if err != nil {
		return out, err
	}
	if fi != nil {
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
		if fi, serr := os.Lstat(out.Path + ".part"); serr == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
			_ = os.Remove(out.Path + ".part") // refused before a byte came: nothing to go on from
		}
		return out, err
	}
	if err := Place(out.Path+".part", out.Path); err != nil {
		return out, err
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
	f, created, err := openPart(part)
	if err != nil {
		return out, err
	}
	defer f.Close()
	if created {
		defer func() {
			if out.Received == 0 && out.SHA256 == "" {
				f.Close()
				_ = os.Remove(part) // refused before a byte came: nothing to go on from
			}
		}()
	}
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

	// The first answer comes before the bar: a file still being checked for malware is
	// waited for (saying so), not shown as a bar that stays at its start.
	var resp *http.Response
	if have < file.Size {
		resp, err = d.request(ctx, token, file, have)
		if scanHeld(err) {
			if resp, err = d.waitScan(ctx, token, file, name, have, err); err != nil {
				var se *ScanError
				if errors.As(err, &se) || errors.Is(err, context.Canceled) {
					return out, err
				}
			}
		} else if se := d.scanRefused(file, err); se != nil {
			return out, se
		}
	}

	bar := d.Progress.Start(name, file.Size, have)
	failures := 0
	buf := make([]byte, 1<<20)
	for have < file.Size {
		if resp == nil && err == nil {
			resp, err = d.request(ctx, token, file, have)
		}
		var n int64
		restart := false
		if err == nil {
			n, restart, err = d.receive(resp, file, f, have, h, tee, bar, buf)
		}
		resp = nil
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
		if se := d.scanRefused(file, err); se != nil {
			bar.Abort()
			return out, se
		}
		if err := d.Retry.again(ctx, failures, err); err != nil {
			bar.Abort()
			return out, err
		}
		err = nil
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

// request asks for the file's bytes from have on. It returns the answer when it is 200
// or 206, else the API's error (or the request's).
func (d *Downloader) request(ctx context.Context, token string, file apiclient.LinkFile, have int64) (*http.Response, error) {
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
		return nil, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, api.ErrorFrom(resp, body)
	}
	return resp, nil
}

// receive writes the answer resp to a request from have on at have in f (and to h and
// tee), and closes it; restart says the server sent the whole file instead (f was
// emptied and h reset first, tee is broken). It returns how many bytes it wrote.
func (d *Downloader) receive(resp *http.Response, file apiclient.LinkFile, f *os.File, have int64, h hash.Hash, tee *Tee, bar Bar, buf []byte) (int64, bool, error) {
	defer resp.Body.Close()
	restart := false
	if resp.StatusCode == http.StatusOK {
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
	} else {
		want := "bytes " + strconv.FormatInt(have, 10) + "-"
		if !strings.HasPrefix(resp.Header.Get("Content-Range"), want) {
			return 0, false, fmt.Errorf("the server answered the range %s- with %q", strconv.FormatInt(have, 10), resp.Header.Get("Content-Range"))
		}
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
