package browser

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// cliUser is a terminal with the real `shipfile` command line, signed in to the
// system with a token: its config and cache directories are the test's.
type cliUser struct {
	t   *testing.T
	bin string
	env []string
}

// newCLIUser builds the command line (cli/cmd/shipfile) and signs it in to base with
// token (`shipfile login`, the token on standard input).
func newCLIUser(t *testing.T, base, token string) *cliUser {
	t.Helper()
	built, err := servicetest.BuildBinaries(t.TempDir(), map[string]string{"shipfile": "../../../../cli/cmd/shipfile"})
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	u := &cliUser{t: t, bin: built["shipfile"], env: []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"XDG_CACHE_HOME=" + filepath.Join(home, "cache"),
		"SHIPFILE_TOKEN=", "SHIPFILE_URL=", "SHIPFILE_CONFIG=",
	}}
	u.json(token+"\n", nil, "login", "--url", base)
	return u
}

// json runs shipfile with args and --json, stdin as its standard input; it fails the
// test unless the command exits 0, and decodes the one JSON document it prints into v
// (when not nil).
func (u *cliUser) json(stdin string, v any, args ...string) {
	u.t.Helper()
	cmd := exec.Command(u.bin, append(args, "--json")...)
	cmd.Env = append(os.Environ(), u.env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		u.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		u.t.Fatalf("shipfile %s ran over a minute; stderr:\n%s", args[0], errb.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		u.t.Fatalf("shipfile %s: exit %d\n%s", args[0], ee.ExitCode(), errb.String())
	} else if err != nil {
		u.t.Fatal(err)
	}
	if v != nil {
		if err := json.Unmarshal(out.Bytes(), v); err != nil {
			u.t.Fatalf("shipfile %s --json: %v\n%s", args[0], err, out.String())
		}
	}
}

// cliSent is what `shipfile send --json` prints (docs/CLI.md), as far as this test
// reads it.
type cliSent struct {
	Links []struct {
		MagicLink string `json:"magic_link"`
		FullLink  string `json:"full_link"`
	} `json:"links"`
	Encryption *struct {
		Mode string `json:"mode"`
	} `json:"encryption"`
	Files []struct {
		Path     string `json:"path"`
		FileID   string `json:"file_id"`
		Filename string `json:"filename"`
	} `json:"files"`
}

// send runs `shipfile send` of files to bob with flags and returns its document,
// each file's id filled in from it.
func (u *cliUser) send(stdin string, files []*sentFile, flags ...string) cliSent {
	u.t.Helper()
	dir := u.t.TempDir()
	args := []string{"send", "--to", "bob@example.com"}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			u.t.Fatal(err)
		}
		args = append(args, p)
	}
	var sent cliSent
	u.json(stdin, &sent, append(args, flags...)...)
	if len(sent.Files) != len(files) || len(sent.Links) != 1 || sent.Encryption == nil {
		u.t.Fatalf("shipfile send --json: %+v", sent)
	}
	for i, f := range sent.Files {
		if f.Filename != files[i].name || f.FileID == "" {
			u.t.Fatalf("shipfile send --json: file %d = %+v, want %s", i, f, files[i].name)
		}
		files[i].id = f.FileID
	}
	return sent
}

// get runs `shipfile get` of what (a link or a package id) into a new folder and
// checks that it wrote exactly the files, under their real names, with the originals'
// bytes.
func (u *cliUser) get(stdin, what string, files []*sentFile) {
	u.t.Helper()
	dir := u.t.TempDir()
	var got struct {
		Files []struct {
			Filename string `json:"filename"`
			Path     string `json:"path"`
			SHA256   string `json:"sha256"`
		} `json:"files"`
	}
	u.json(stdin, &got, "get", what, "-o", dir)
	if len(got.Files) != len(files) {
		u.t.Fatalf("shipfile get wrote %d files, want %d: %+v", len(got.Files), len(files), got.Files)
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if sum := fileSHA(u.t, p); sum != sum256(f.data) {
			u.t.Fatalf("shipfile get: %s has SHA-256 %s, want %s", f.name, sum, sum256(f.data))
		}
	}
	for _, g := range got.Files {
		if g.Path != filepath.Join(dir, g.Filename) || g.SHA256 != fileSHA(u.t, g.Path) {
			u.t.Fatalf("shipfile get --json: %+v", g)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != len(files) {
		u.t.Fatalf("shipfile get left %d entries in its folder, want %d", len(ents), len(files))
	}
}

// TestEndToEndCLI checks that the command line and the browser open each other's encrypted
// packages (docs/ENCRYPTION.md, docs/CLI.md), against the real gateway, with the real
// command line (cli/cmd/shipfile) and Chromium. Packages the CLI encrypts
// (`send --encrypt`, and `send --passphrase-stdin`) open on the recipient's page, which shows the
// manifest's names and saves the originals; a package the page encrypts comes back whole
// through `shipfile get` of its full link; the uploads to an encrypted file request made in
// the browser, encrypted by the request page to the key the owner made on the account page,
// come back through `shipfile get ID` with the owner's passphrase.
func TestEndToEndCLI(t *testing.T) {
	sys, bctx, owner, api := outSession(t, 3*time.Minute)
	cli := newCLIUser(t, sys.base, api.Token)
	bob := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	dl := bob.downloadsTo(t)

	// CLI → browser, with the key in the link: two files, one across age's 64 KiB
	// chunks.
	keyFiles := []*sentFile{
		{name: "Q4 plan.pdf", data: randomBytes(300_001)},
		{name: "naïve notes.txt", data: []byte("written by the command line\n")},
	}
	sent := cli.send("", keyFiles, "--encrypt")
	link := sent.Links[0].FullLink
	if sent.Encryption.Mode != "key" || !strings.HasPrefix(link, sent.Links[0].MagicLink+"#AGE-SECRET-KEY-1") {
		t.Fatalf("shipfile send --encrypt: mode %q, full link %q", sent.Encryption.Mode, link)
	}
	bob.openEncrypted(link, "")
	dl.saveDecrypted(keyFiles)

	// CLI → browser, with a passphrase: the e-mailed link, the passphrase typed.
	const pass = "correct horse battery staple"
	passFiles := []*sentFile{{name: "contract.txt", data: randomBytes(70_000)}}
	sent = cli.send(pass+"\n", passFiles, "--passphrase-stdin")
	if sent.Encryption.Mode != "passphrase" || strings.Contains(sent.Links[0].MagicLink, "#") {
		t.Fatalf("shipfile send --passphrase-stdin: mode %q, link %q", sent.Encryption.Mode, sent.Links[0].MagicLink)
	}
	bob.openEncrypted(sent.Links[0].MagicLink, pass)
	dl.saveDecrypted(passFiles)

	// Browser → CLI: the page encrypts, `shipfile get` of the full link decrypts.
	pageFiles := []*sentFile{
		{name: "slides.bin", data: randomBytes(200_003)},
		{name: "read me.txt", data: []byte("written by the browser\n")},
	}
	_, link, _, _ = sendEncrypted(t, sys, owner, api, "From the browser", "", pageFiles)
	if !strings.Contains(link, "#AGE-SECRET-KEY-1") {
		t.Fatalf("the link shown after sending has no key: %q", link)
	}
	cli.get("", link, pageFiles)

	// An encrypted file request made in the browser: the request page encrypts to the
	// owner's key, `shipfile get ID` opens it with the owner's passphrase.
	const ownerPass = "the owner's own passphrase"
	owner.createE2EKey(ownerPass)
	reqLink, pkgID := owner.encryptedRequest("rita@example.com", "Scans, please")
	reqFiles := []*sentFile{
		{name: "scan 1.pdf", data: randomBytes(150_000)},
		{name: "scan 2.pdf", data: randomBytes(1_000)},
	}
	dir := t.TempDir()
	var paths []string
	for _, f := range reqFiles {
		paths = append(paths, filepath.Join(dir, f.name))
		if err := os.WriteFile(paths[len(paths)-1], f.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rita := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	rita.open(reqLink)
	rita.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`),
		setFiles("#files-input", paths))
	rita.waitJS("both encrypted uploads", `document.querySelectorAll('.uploads li[data-state=done][data-encrypted]').length === 2 || document.querySelector('.uploads li[data-state=error]')`)
	if n := run(rita, chromedp.Evaluate[int](`document.querySelectorAll('.uploads li[data-state=done][data-encrypted]').length`)); n != 2 {
		t.Fatalf("%d encrypted uploads done, want 2", n)
	}
	cli.get(ownerPass+"\n", pkgID, reqFiles)
}
