package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/cli/internal/crypt"
	"github.com/shipfile/shipfile/cli/internal/printable"
	"github.com/shipfile/shipfile/cli/internal/progress"
	"github.com/shipfile/shipfile/cli/internal/safename"
	"github.com/shipfile/shipfile/cli/internal/transfer"
	"github.com/shipfile/shipfile/pkg/apiclient"
)

// gotFile is one file in `shipfile get --json`.
type gotFile struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	Path        string `json:"path"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	ResumedFrom int64  `json:"resumed_from"`
	Received    int64  `json:"received"`
	Skipped     bool   `json:"skipped"`
	// Ciphertext is what the server stores of an encrypted file.
	Ciphertext *cipherInfo `json:"ciphertext,omitempty"`
}

// getResult is `shipfile get --json`.
type getResult struct {
	// Package is the API's LinkPackage (get LINK) or PackageDetail (get ID).
	Package any       `json:"package"`
	Dir     string    `json:"dir"`
	Files   []gotFile `json:"files"`
}

func (a *app) getCmd() *cobra.Command {
	var (
		dir  string
		wait time.Duration
	)
	cmd := &cobra.Command{
		Use:   "get LINK|ID [-o DIR]",
		Short: "Download every file of a link (resumable, SHA-256 checked)",
		Long: `Download every file of a magic link into DIR (default: the current directory).
Each file is written to NAME.part first and renamed once its SHA-256 equals the
server's; run again after an interruption, it goes on from there with a Range request.
A file already there with the server's SHA-256 is skipped. A password-protected link
asks for its password on standard input (without echo on a terminal).

An end-to-end encrypted package is decrypted on this machine: with the key of the
link's #AGE-SECRET-KEY-1... (quote the link in the shell) or, for a link without it,
the key (a line AGE-SECRET-KEY-1..., or the full link) read from standard input; or
with the passphrase read from standard input (after the link's password, when it has
one). Its files are
fetched as NAME.part (the ciphertext, SHA-256 checked against the server's), then
decrypted to NAME; a file that fails age's authentication was altered, and nothing of
it is kept.

With a package ID instead of a link, the owner (the stored token) fetches a package's
files, e.g. what came in through a file request; an encrypted request's files are
decrypted with your key ('shipfile key create'), whose passphrase is read from
standard input.

Names are made safe before anything is written, whatever the server or the uploader
chose: a leading dot, a Windows device name (CON, NUL, COM1... with any extension), a
trailing dot or space, path separators, ':' and the other characters Windows refuses,
control and format characters are each replaced by '_' ('.bashrc' is written as
'_bashrc', 'CON.txt' as '_CON.txt'), and two files whose safe names are the same get
' (2)', ' (3)'... Nothing is written through a symbolic link, and a file already there
is never replaced.

A file still being checked for malware is waited for, up to --wait in all, saying so
on standard error; a file that could not be checked, or whose check failed, is not
downloaded: its package's owner can release it ('shipfile release ID FILE'). A link
with a key (#...) whose package the server says is not end-to-end encrypted is
refused: its files are not written in plaintext.`,
		Args: args(1, 1),
		RunE: run(func(cmd *cobra.Command, argv []string) error {
			if id, err := uuid.Parse(argv[0]); err == nil {
				return a.getOwned(cmd.Context(), id, dir, wait)
			}
			l, err := transfer.ParseLink(argv[0])
			if err != nil {
				return usageErr("%v", err)
			}
			if l.Fragment != "" {
				if _, err := crypt.IdentityOf(l.Fragment); err != nil {
					return usageErr("%v", err)
				}
			}
			return a.get(cmd.Context(), l, dir, wait)
		}),
	}
	cmd.Flags().StringVarP(&dir, "output", "o", ".", "the directory to write the files into (made when missing)")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to wait, in all, for files still being checked for malware (0: not at all)")
	return cmd
}

func (a *app) get(ctx context.Context, l transfer.Link, dir string, wait time.Duration) error {
	// The link is the credential: no bearer token goes to the link's server.
	c, err := api.New(l.Base, "")
	if err != nil {
		return err
	}
	var grant string
	r, err := c.API.GetLinkWithResponse(ctx, l.Token, &apiclient.GetLinkParams{})
	if err == nil && r.StatusCode() == http.StatusUnauthorized {
		pw, perr := a.readSecret("Password for this link: ")
		if perr != nil {
			return perr
		}
		ur, err := c.API.UnlockLinkWithResponse(ctx, l.Token, apiclient.Unlock{Password: &pw})
		if err := api.Expect(ur, err, http.StatusOK); err != nil {
			return err
		}
		grant = ur.JSON200.Grant
		r, err = c.API.GetLinkWithResponse(ctx, l.Token, &apiclient.GetLinkParams{LinkGrantHeader: &grant})
		if err := api.Expect(r, err, http.StatusOK); err != nil {
			return err
		}
	} else if err := api.Expect(r, err, http.StatusOK); err != nil {
		return err
	}
	pkg := r.JSON200
	encrypted := pkg.Encryption == apiclient.EncryptionAge
	if !encrypted && l.Fragment != "" {
		// The key says the sender encrypted the files; a server that serves them as plain
		// files now is not to be believed, and nothing of them is written.
		return errors.New("this link carries an end-to-end encryption key (#...), but the server says its package is not encrypted: refused, nothing was written (the server or the link was altered; ask the sender)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	d := a.downloader(c, wait)
	d.Grant = grant
	var files []apiclient.LinkFile
	for _, f := range pkg.Files {
		if f.UploadedBy != apiclient.LinkFileUploadedByRecipient {
			files = append(files, f) // a request's uploads are the owner's to fetch, never the link's
		}
	}
	files, infected := leaveOutInfected(a, files)
	var dec *decryptor
	if encrypted && len(files) > 0 {
		dec = &decryptor{a: a, c: c, token: l.Token, grant: grant, fragment: l.Fragment, progress: d.Progress}
		if err := dec.loadManifest(ctx); err != nil {
			return err
		}
	}
	out := getResult{Package: pkg, Dir: dir}
	var total int64
	if out.Files, total, err = fetchAll(ctx, d, dec, l.Token, files, dir); err != nil {
		return err
	}
	return a.gotAll(out, pkg.Title, total, dec != nil, infected)
}

// getOwned fetches the files of package id as its owner (the stored token): the
// package's own files of an outbound package, the uploads of a request. An encrypted
// request's files are decrypted with the owner's key, unsealed with the passphrase; an
// encrypted outbound package's with its passphrase (its key was only in its links).
func (a *app) getOwned(ctx context.Context, id uuid.UUID, dir string, wait time.Duration) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	r, err := c.API.GetPackageWithResponse(ctx, id)
	if err := api.Expect(r, err, http.StatusOK); err != nil {
		return err
	}
	pkg := r.JSON200
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	d := a.downloader(c, wait)
	d.Package = id
	var dec *decryptor
	if pkg.Encryption == apiclient.EncryptionAge {
		dec = &decryptor{a: a, c: c, owned: id, progress: d.Progress}
		if pkg.Direction == apiclient.PackageDetailDirectionInbound {
			k, err := a.getKey(ctx)
			if err != nil {
				return err
			}
			owner, err := a.unsealKey(k)
			if err != nil {
				return err
			}
			dec.ids = []age.Identity{owner}
			dec.ownerKey = true
			// Each upload carries its own manifest entry, encrypted to the owner's key.
			m := crypt.Manifest{Version: 1, Files: map[string]crypt.ManifestFile{}}
			for _, f := range pkg.Files {
				if f.Manifest == nil {
					continue
				}
				plain, err := crypt.Decrypt(*f.Manifest, owner)
				if err != nil {
					a.note("The name of %s does not open with your key (sent to another key?): it keeps its neutral name", f.Filename)
					continue
				}
				var e crypt.ManifestFile
				if json.Unmarshal(plain, &e) == nil {
					m.Files[f.Id.String()] = e
				}
			}
			dec.manifest = &m
		} else if err := dec.loadManifest(ctx); err != nil {
			return err
		}
	}
	files := make([]apiclient.LinkFile, 0, len(pkg.Files))
	for _, f := range pkg.Files {
		files = append(files, apiclient.LinkFile{Id: f.Id, Filename: f.Filename, Size: f.Size, Sha256: f.Sha256,
			Scan: apiclient.LinkFileScan(f.Scan), ScanSignature: f.ScanSignature})
	}
	files, infected := leaveOutInfected(a, files)
	out := getResult{Package: pkg, Dir: dir}
	var total int64
	if out.Files, total, err = fetchAll(ctx, d, dec, "", files, dir); err != nil {
		return err
	}
	return a.gotAll(out, pkg.Title, total, dec != nil, infected)
}

// gotAll ends a get (of a link or, as its owner, of a package) that fetched out.Files,
// total bytes of the package titled title: it fails naming the infected files left out
// (notDownloaded), else says what it got and prints the files' paths (or --json).
func (a *app) gotAll(out getResult, title string, total int64, decrypted bool, infected []string) error {
	if err := notDownloaded(out.Files, out.Dir, infected); err != nil {
		return err
	}
	if decrypted {
		a.note("Got and decrypted %d file(s), %s, of %q into %s (end-to-end encrypted; SHA-256 and age's authentication checked)", len(out.Files), progress.Bytes(total), title, out.Dir)
	} else {
		a.note("Got %d file(s), %s, of %q into %s (SHA-256 checked)", len(out.Files), progress.Bytes(total), title, out.Dir)
	}
	return a.output(out, func(w io.Writer) {
		for _, f := range out.Files {
			fmt.Fprintln(w, printable.String(f.Path))
		}
	})
}

// leaveOutInfected takes the files recorded infected out of files (never served:
// docs/SCANNING.md), saying so, and names each with its signature for notDownloaded.
func leaveOutInfected(a *app, files []apiclient.LinkFile) (ok []apiclient.LinkFile, infected []string) {
	for _, f := range files {
		if f.Scan != apiclient.LinkFileScanInfected {
			ok = append(ok, f)
			continue
		}
		sig := ""
		if f.ScanSignature != nil {
			sig = ": " + *f.ScanSignature
		}
		infected = append(infected, fmt.Sprintf("%s (malware found%s)", f.Filename, sig))
		a.note("%s: malware found%s; not downloaded", f.Filename, sig)
	}
	return ok, infected
}

// notDownloaded is the failure of a get that fetched the other files but not the
// infected ones (nil when there were none).
func notDownloaded(got []gotFile, dir string, infected []string) error {
	if len(infected) == 0 {
		return nil
	}
	return fmt.Errorf("got %d file(s) into %s; not downloaded: %s", len(got), dir, strings.Join(infected, ", "))
}

// downloader is the Downloader of a get through c: it waits up to wait for files still
// being checked for malware, saying so on standard error (unless --quiet).
func (a *app) downloader(c *api.Client, wait time.Duration) *transfer.Downloader {
	return &transfer.Downloader{Client: c, Progress: a.progress(), Retry: transfer.DefaultRetry, Wait: wait,
		Waiting: func(name string) {
			if !a.quiet {
				fmt.Fprintf(a.io.Err, "waiting for %s: being checked for malware… (up to %s in all, --wait)\n", printable.String(name), wait)
			}
		}}
}

// fetchAll downloads files into dir through d (token is the link's, "" for the owner),
// decrypted by dec when it is set, and returns what it got and the bytes written. Each
// file gets a safe name (safename), different from the others'.
func fetchAll(ctx context.Context, d *transfer.Downloader, dec *decryptor, token string, files []apiclient.LinkFile, dir string) ([]gotFile, int64, error) {
	got := []gotFile{}
	var total int64
	var names safename.Set
	for _, f := range files {
		if dec != nil {
			g, err := dec.download(ctx, d, f, dir, &names)
			if err != nil {
				return got, total, err
			}
			total += g.Size
			got = append(got, g)
			continue
		}
		res, err := d.Download(ctx, token, f, dir, names.Name(f.Filename))
		if err != nil {
			return got, total, stopped(f.Filename, err)
		}
		total += f.Size
		got = append(got, gotFile{ID: f.Id.String(), Filename: f.Filename, Path: res.Path, Size: f.Size,
			SHA256: res.SHA256, ResumedFrom: res.ResumedFrom, Received: res.Received, Skipped: res.Skipped})
	}
	return got, total, nil
}
