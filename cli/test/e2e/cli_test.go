package e2e

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/apiclient"
)

// The --json documents of docs/CLI.md, field for field (decode refuses unknown fields).
type (
	jsonLink struct {
		Email     string `json:"email"`
		MagicLink string `json:"magic_link"`
		FullLink  string `json:"full_link"`
	}
	jsonCipher struct {
		Filename string `json:"filename"`
		Size     int64  `json:"size"`
		SHA256   string `json:"sha256"`
	}
	jsonEncryption struct {
		Mode string `json:"mode"`
		Key  string `json:"key"`
	}
	jsonSentFile struct {
		Path        string      `json:"path"`
		FileID      string      `json:"file_id"`
		Filename    string      `json:"filename"`
		Size        int64       `json:"size"`
		SHA256      string      `json:"sha256"`
		ResumedFrom int64       `json:"resumed_from"`
		Sent        int64       `json:"sent"`
		Ciphertext  *jsonCipher `json:"ciphertext"`
	}
	jsonSend struct {
		Package    apiclient.FinalizedPackage `json:"package"`
		Links      []jsonLink                 `json:"links"`
		Files      []jsonSentFile             `json:"files"`
		Encryption *jsonEncryption            `json:"encryption"`
	}
	jsonGotFile struct {
		ID          string      `json:"id"`
		Filename    string      `json:"filename"`
		Path        string      `json:"path"`
		Size        int64       `json:"size"`
		SHA256      string      `json:"sha256"`
		ResumedFrom int64       `json:"resumed_from"`
		Received    int64       `json:"received"`
		Skipped     bool        `json:"skipped"`
		Ciphertext  *jsonCipher `json:"ciphertext"`
	}
	jsonGet struct {
		Package apiclient.LinkPackage `json:"package"`
		Dir     string                `json:"dir"`
		Files   []jsonGotFile         `json:"files"`
	}
	jsonLogin struct {
		URL       string       `json:"url"`
		TokenFile string       `json:"token_file"`
		User      apiclient.Me `json:"user"`
	}
	jsonWhoami struct {
		URL string `json:"url"`
		apiclient.Me
	}
	jsonError struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
		Status   int    `json:"status"`
	}
)

// TestCLI drives the command line through one system (one gateway, one user), scenario
// after scenario.
func TestCLI(t *testing.T) {
	sys := startSystem(t)
	u := newUser(t)
	files := t.TempDir()
	// Logged in before any scenario, so that each also runs alone (-run 'TestCLI/…').
	u.ok(sys.token+"\n", "login", "--url", sys.url)

	t.Run("login stores the token at mode 600", func(t *testing.T) {
		u.t = t
		r := u.ok(sys.token+"\n", "login", "--url", sys.url, "--json")
		doc := decode[jsonLogin](t, r)
		if doc.User.Email != "cli@example.com" || doc.URL != sys.url {
			t.Fatalf("login answered %+v", doc)
		}
		fi, err := os.Stat(doc.TokenFile)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("token file %s has mode %o, want 600", doc.TokenFile, fi.Mode().Perm())
		}
		if !strings.HasPrefix(doc.TokenFile, filepath.Join(u.home, "config")) {
			t.Fatalf("token file %s is not in the user's config directory", doc.TokenFile)
		}
		if strings.Contains(r.stdout+r.stderr, sys.token) {
			t.Fatal("login printed the token")
		}
		w := decode[jsonWhoami](t, u.ok("", "whoami", "--json"))
		if w.Email != "cli@example.com" || w.Name != "CLI User" || w.URL != sys.url {
			t.Fatalf("whoami --json: %+v", w)
		}
		if r := u.ok("", "whoami"); !strings.Contains(r.stdout, "cli@example.com") {
			t.Fatalf("whoami: %q", r.stdout)
		}
	})

	t.Run("a wrong token exits 1 with the server's detail", func(t *testing.T) {
		u.t = t
		bad := "sf_" + strings.Repeat("A", 43)
		status, detail := detailOf(t, "http://"+sys.gw, "/api/v1/me", bad)
		if status != 401 || detail == "" {
			t.Fatalf("the gateway answered %d %q to a wrong token", status, detail)
		}
		r := u.run("", []string{"SHIPFILE_TOKEN=" + bad}, "whoami")
		if r.code != 1 || !strings.Contains(r.stderr, detail) || r.stdout != "" {
			t.Fatalf("whoami with a wrong token: exit %d, stdout %q, stderr %q (want 1 and %q)", r.code, r.stdout, r.stderr, detail)
		}
		r = u.run("", []string{"SHIPFILE_TOKEN=" + bad}, "ls", "--json")
		var e jsonError
		if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || r.code != 1 || e.Status != 401 || e.ExitCode != 1 || !strings.Contains(e.Error, detail) {
			t.Fatalf("ls --json with a wrong token: exit %d, stderr %q", r.code, r.stderr)
		}
		r = u.run(bad+"\n", nil, "login", "--url", sys.url)
		if r.code != 1 || !strings.Contains(r.stderr, detail) {
			t.Fatalf("login with a wrong token: exit %d, stderr %q", r.code, r.stderr)
		}
		// The stored token still works: the failed login stored nothing.
		u.ok("", "whoami")
	})

	t.Run("usage errors exit 2", func(t *testing.T) {
		u.t = t
		one, _ := randomFile(t, files, "usage.bin", 10)
		for name, args := range map[string][]string{
			"no files":           {"send", "--to", "bob@example.com"},
			"no recipient":       {"send", one},
			"unknown command":    {"frobnicate"},
			"unknown flag":       {"ls", "--colour"},
			"bad package id":     {"show", "not-a-uuid"},
			"limit out of range": {"ls", "--limit", "0"},
			"not a link":         {"get", "https://example.com/nothing"},
			"short passphrase":   {"send", one, "--to", "bob@example.com", "--passphrase-stdin"},
			"not an age key":     {"get", sys.url + "/p/abc#not-a-key"},
		} {
			r := u.run("short\n", nil, args...)
			if r.code != 2 || r.stderr == "" {
				t.Errorf("%s (%v): exit %d, stderr %q; want 2 and a message", name, args, r.code, r.stderr)
			}
		}
	})

	t.Run("three files sent to two addresses and fetched back through each link", func(t *testing.T) {
		u.t = t
		dir := t.TempDir()
		sums := map[string]string{}
		var paths []string
		for name, size := range map[string]int64{"a.bin": 1, "b report.pdf": 3<<20 + 17, "c.txt": 1 << 20} {
			p, sum := randomFile(t, dir, name, size)
			sums[name] = sum
			paths = append(paths, p)
		}
		// Flags after the arguments, and before them.
		args := append([]string{"send", "--title", "Three files", "--to", "bob@example.com"}, paths...)
		args = append(args, "--to", "olivia@example.com", "--note", "hello", "--days", "3", "--json")
		r := u.ok("", args...)
		sent := decode[jsonSend](t, r)
		if len(sent.Files) != 3 || len(sent.Links) != 2 || sent.Links[0].Email != "bob@example.com" || sent.Links[1].Email != "olivia@example.com" ||
			sent.Links[0].MagicLink == sent.Links[1].MagicLink ||
			sent.Package.State != "active" || sent.Package.FileCount != 3 || sent.Package.TtlDays != 3 {
			t.Fatalf("send --json: %+v", sent)
		}
		for _, f := range sent.Files {
			if f.SHA256 != sums[f.Filename] || f.Sent != f.Size || f.ResumedFrom != 0 {
				t.Errorf("sent file %+v; want sha256 %s", f, sums[f.Filename])
			}
		}
		// The state of the finished send is gone.
		if left, _ := filepath.Glob(filepath.Join(u.home, "cache", "shipfile", "sends", "*.json")); len(left) != 0 {
			t.Fatalf("a finished send left its state: %v", left)
		}

		// Each recipient's link gives back the three files, SHA-256 equal.
		var out string
		for _, l := range sent.Links {
			if !strings.HasPrefix(l.MagicLink, sys.url+"/p/") {
				t.Fatalf("magic link %q", l.MagicLink)
			}
			out = t.TempDir()
			got := decode[jsonGet](t, u.ok("", "get", l.MagicLink, "-o", out, "--json"))
			if len(got.Files) != 3 {
				t.Fatalf("get --json through %s's link: %+v", l.Email, got)
			}
			for _, f := range got.Files {
				if f.SHA256 != sums[f.Filename] || f.Received != f.Size || f.Skipped {
					t.Errorf("got through %s's link: %+v; want sha256 %s", l.Email, f, sums[f.Filename])
				}
			}
			for name, sum := range sums {
				if s := sha256File(t, filepath.Join(out, name)); s != sum {
					t.Errorf("%s came back through %s's link with SHA-256 %s, sent %s", name, l.Email, s, sum)
				}
			}
		}
		// Run again: every file is there already and is skipped.
		again := decode[jsonGet](t, u.ok("", "get", sent.Links[len(sent.Links)-1].MagicLink, "-o", out, "--json"))
		for _, f := range again.Files {
			if !f.Skipped || f.Received != 0 {
				t.Errorf("second get: %+v, want skipped", f)
			}
		}
		// Plain output: one path per line.
		out2 := t.TempDir()
		r = u.ok("", "get", "-o", out2, sent.Links[0].MagicLink)
		if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 3 {
			t.Fatalf("get printed %q", r.stdout)
		}

		// ls, show, revoke, rm.
		list := decode[apiclient.PackageList](t, u.ok("", "ls", "--json", "--state", "active"))
		found := false
		for _, p := range list.Items {
			found = found || p.Id == sent.Package.Id
		}
		if !found {
			t.Fatalf("ls --json does not list %s: %+v", sent.Package.Id, list)
		}
		show := decode[apiclient.PackageDetail](t, u.ok("", "show", sent.Package.Id.String(), "--json"))
		if len(show.Files) != 3 || show.Title != "Three files" || show.Note != "hello" {
			t.Fatalf("show --json: %+v", show)
		}
		rev := decode[apiclient.Package](t, u.ok("", "revoke", sent.Package.Id.String(), "--json"))
		if rev.State != "revoked" {
			t.Fatalf("revoke --json: %+v", rev)
		}
		for _, l := range sent.Links {
			r = u.run("", nil, "get", l.MagicLink, "-o", t.TempDir())
			if r.code != 1 || !strings.Contains(r.stderr, "HTTP 410") {
				t.Fatalf("get of a revoked link (%s's): exit %d, %q", l.Email, r.code, r.stderr)
			}
		}
		rm := u.ok("", "rm", sent.Package.Id.String(), "--json")
		var rmDoc struct {
			ID      string `json:"id"`
			Deleted bool   `json:"deleted"`
		}
		if err := json.Unmarshal([]byte(rm.stdout), &rmDoc); err != nil || !rmDoc.Deleted || rmDoc.ID != sent.Package.Id.String() {
			t.Fatalf("rm --json: %q", rm.stdout)
		}
		if r := u.run("", nil, "show", sent.Package.Id.String()); r.code != 1 || !strings.Contains(r.stderr, "HTTP 404") {
			t.Fatalf("show of a deleted package: exit %d, %q", r.code, r.stderr)
		}
	})

	t.Run("several recipients each get a link of their own", func(t *testing.T) {
		u.t = t
		p, sum := randomFile(t, files, "two.bin", 1000)
		sent := decode[jsonSend](t, u.ok("", "send", p, "--to", "ivan@example.com", "--to", "judy@example.com", "--title", "For two", "--json"))
		if len(sent.Links) != 2 || sent.Links[0].Email != "ivan@example.com" || sent.Links[1].Email != "judy@example.com" ||
			sent.Links[0].MagicLink == sent.Links[1].MagicLink || sent.Package.MagicLink != sent.Links[0].MagicLink {
			t.Fatalf("send to two: %+v", sent.Links)
		}
		for _, l := range sent.Links {
			out := t.TempDir()
			got := decode[jsonGet](t, u.ok("", "get", l.MagicLink, "-o", out, "--json"))
			if len(got.Files) != 1 || sha256File(t, filepath.Join(out, "two.bin")) != sum {
				t.Fatalf("get through %s's link: %+v", l.Email, got)
			}
		}
		// Plain output: one link per line, each recipient's.
		r := u.ok("", "send", p, "--to", "ivan@example.com", "--to", "judy@example.com", "--title", "For two again")
		if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 2 || lines[0] == lines[1] || strings.Count(r.stdout, sys.url+"/p/") != 2 {
			t.Fatalf("send to two printed %q", r.stdout)
		}
	})

	t.Run("a protected link asks for its password", func(t *testing.T) {
		u.t = t
		p, sum := randomFile(t, files, "secret.bin", 64<<10)
		sent := decode[jsonSend](t, u.ok("correct horse battery\n", "send", p, "--to", "carol@example.com", "--password-stdin", "--max-downloads", "3", "--json"))
		if !sent.Package.PasswordProtected || sent.Package.MaxDownloads == nil || *sent.Package.MaxDownloads != 3 {
			t.Fatalf("send --password-stdin: %+v", sent.Package)
		}
		link := sent.Links[0].MagicLink
		r := u.run("wrong password\n", nil, "get", link, "-o", t.TempDir())
		if r.code != 1 || !strings.Contains(r.stderr, "HTTP 401") {
			t.Fatalf("get with a wrong password: exit %d, %q", r.code, r.stderr)
		}
		r = u.run("", nil, "get", link, "-o", t.TempDir())
		if r.code != 1 || !strings.Contains(r.stderr, "password") {
			t.Fatalf("get with no password on stdin: exit %d, %q", r.code, r.stderr)
		}
		out := t.TempDir()
		got := decode[jsonGet](t, u.ok("correct horse battery\n", "get", link, "-o", out, "--json"))
		if len(got.Files) != 1 || sha256File(t, filepath.Join(out, "secret.bin")) != sum || !got.Package.PasswordProtected {
			t.Fatalf("get with the password: %+v", got)
		}
	})

	t.Run("an infected file is left out, the others are fetched, and get exits 1", func(t *testing.T) {
		u.t = t
		bad, _ := randomFile(t, files, "invoice.exe", 4<<10)
		good, sum := randomFile(t, files, "notes.txt", 8<<10)
		sent := decode[jsonSend](t, u.ok("", "send", bad, good, "--to", "erin@example.com", "--json"))
		// What the scanner records when clamd finds malware (services/scanner's own tests
		// run the real clamd); the gateway never serves such a file through the link.
		ctx, conn := dbConn(t, sys)
		if _, err := conn.Exec(ctx, "UPDATE files SET scan = 'infected', scan_signature = 'Eicar-Test-Signature', scanned_at = now() WHERE package_id = $1 AND filename = 'invoice.exe'", sent.Package.Id); err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		r := u.run("", nil, "get", sent.Links[0].MagicLink, "-o", out)
		if r.code != 1 || !strings.Contains(r.stderr, "invoice.exe (malware found: Eicar-Test-Signature)") {
			t.Fatalf("get of a link with an infected file: exit %d, stderr %q", r.code, r.stderr)
		}
		if s := sha256File(t, filepath.Join(out, "notes.txt")); s != sum {
			t.Errorf("the clean file came back with SHA-256 %s, sent %s", s, sum)
		}
		if left, _ := filepath.Glob(filepath.Join(out, "invoice.exe*")); len(left) != 0 {
			t.Errorf("the infected file left %v", left)
		}
	})

	t.Run("request prints an upload link", func(t *testing.T) {
		u.t = t
		r := u.ok("", "request", "--from", "dave@example.com", "--title", "Your tax papers", "--json")
		doc := decode[jsonSend](t, r)
		if doc.Package.Direction != "inbound" || doc.Package.State != "active" || len(doc.Links) != 1 ||
			!strings.HasPrefix(doc.Links[0].MagicLink, sys.url+"/p/") || doc.Files != nil {
			t.Fatalf("request --json: %+v", doc)
		}
		r = u.ok("", "request", "--from", "erin@example.com")
		if !strings.HasPrefix(strings.TrimSpace(r.stdout), sys.url+"/p/") {
			t.Fatalf("request printed %q", r.stdout)
		}
	})

	t.Run("tokens", func(t *testing.T) {
		u.t = t
		created := decode[apiclient.CreatedToken](t, u.ok("", "tokens", "create", "script", "--expires-in", "48h", "--json"))
		if !strings.HasPrefix(created.Token, "sf_") || created.ExpiresAt == nil {
			t.Fatalf("tokens create --json: %+v", created)
		}
		list := decode[apiclient.TokenList](t, u.ok("", "tokens", "--json"))
		if len(list.Items) != 2 {
			t.Fatalf("tokens --json: %+v", list)
		}
		r := u.ok("", "tokens", "create", "plain")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if !strings.HasPrefix(lines[len(lines)-1], "sf_") {
			t.Fatalf("tokens create: the last line is not the token: %q", r.stdout)
		}
		u.ok("", "tokens", "revoke", strconv64(created.Id))
		if list := decode[apiclient.TokenList](t, u.ok("", "tokens", "--json")); len(list.Items) != 2 {
			t.Fatalf("after revoke: %+v", list)
		}
		if r := u.run("", []string{"SHIPFILE_TOKEN=" + created.Token}, "whoami"); r.code != 1 {
			t.Fatalf("a revoked token still works: %+v", r)
		}
	})

	t.Run("a network drop midway is retried within the run", func(t *testing.T) {
		u.t = t
		const size = 40 << 20
		p, sum := randomFile(t, files, "dropped.bin", size)
		sys.proxy.uploaded.Store(0)
		sys.proxy.dropAt.Store(15 << 20)
		sent := decode[jsonSend](t, u.ok("", "send", p, "--to", "grace@example.com", "--json"))
		if sys.proxy.dropAt.Load() != 0 {
			t.Fatal("the upload was not cut")
		}
		if f := sent.Files[0]; f.SHA256 != sum || sent.Package.TotalSize != size {
			t.Fatalf("send after a drop: %+v", sent)
		}
		if up := sys.proxy.uploaded.Load(); up > size+partSize+(4<<20) {
			t.Fatalf("%d bytes went up for a file of %d with one drop", up, size)
		}

		out := t.TempDir()
		sys.proxy.downloaded.Store(0)
		sys.proxy.dropAt.Store(15 << 20)
		got := decode[jsonGet](t, u.ok("", "get", sent.Links[0].MagicLink, "-o", out, "--json"))
		if sys.proxy.dropAt.Load() != 0 {
			t.Fatal("the download was not cut")
		}
		if got.Files[0].SHA256 != sum || sha256File(t, filepath.Join(out, "dropped.bin")) != sum {
			t.Fatalf("get after a drop: %+v", got)
		}
		if down := sys.proxy.downloaded.Load(); down > size+(1<<20) {
			t.Fatalf("%d bytes came down for a file of %d with one drop: the rest was not asked for with Range", down, size)
		}
	})

	t.Run("bytes changed on the way fail the SHA-256 check, and the same command sends again", func(t *testing.T) {
		u.t = t
		const size = 5 << 20
		p, sum := randomFile(t, files, "flipped.bin", size)
		args := []string{"send", p, "--to", "mallory@example.com"}
		sys.proxy.uploaded.Store(0)
		sys.proxy.corruptAt.Store(3 << 20)
		r := u.run("", nil, args...)
		if sys.proxy.corruptAt.Load() != 0 {
			t.Fatal("no byte of the upload was changed")
		}
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "differs from the local file's "+sum) ||
			!strings.Contains(r.stderr, "run the same command again") {
			t.Fatalf("send with a byte changed on the way: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		// Not finalized, and the server's wrong copy is gone.
		pkgID := sendState(t, u).PackageID
		var draft apiclient.PackageDetail
		apiCall(t, sys, http.MethodGet, "/api/v1/packages/"+pkgID, "", http.StatusOK, &draft)
		if draft.State != "draft" || len(draft.Files) != 0 {
			t.Fatalf("after the failed check the package is %s with %d file(s), want a draft without files", draft.State, len(draft.Files))
		}
		sent := decode[jsonSend](t, u.ok("", append(args, "--json")...))
		if f := sent.Files[0]; sent.Package.Id.String() != pkgID || f.SHA256 != sum || f.ResumedFrom != 0 || f.Sent != size {
			t.Fatalf("send again after the failed check: %+v (package %s)", sent, pkgID)
		}

		// The same on the way down: nothing is kept, and get run again fetches it whole.
		out := t.TempDir()
		sys.proxy.corruptAt.Store(sys.proxy.downloaded.Load() + 2<<20)
		r = u.run("", nil, "get", sent.Links[0].MagicLink, "-o", out)
		if sys.proxy.corruptAt.Load() != 0 {
			t.Fatal("no byte of the download was changed")
		}
		if r.code != 1 || !strings.Contains(r.stderr, "differs from the server's "+sum) {
			t.Fatalf("get with a byte changed on the way: exit %d, stderr %q", r.code, r.stderr)
		}
		if left, _ := os.ReadDir(out); len(left) != 0 {
			t.Fatalf("a download that failed its SHA-256 check left %v", left)
		}
		got := decode[jsonGet](t, u.ok("", "get", sent.Links[0].MagicLink, "-o", out, "--json"))
		if f := got.Files[0]; f.SHA256 != sum || f.ResumedFrom != 0 || sha256File(t, filepath.Join(out, "flipped.bin")) != sum {
			t.Fatalf("get again after the failed check: %+v", got)
		}
	})

	t.Run("Ctrl-C stops a send, and the same command goes on", func(t *testing.T) {
		u.t = t
		const size = 40 << 20
		p, sum := randomFile(t, files, "interrupted.bin", size)
		args := []string{"send", p, "--to", "heidi@example.com"}
		sys.proxy.rate.Store(20 << 20)
		sys.proxy.uploaded.Store(0)
		cmd, _, stderr := u.command("", nil, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "10 MiB uploaded", func() bool { return sys.proxy.uploaded.Load() >= 10<<20 })
		_ = cmd.Process.Signal(os.Interrupt)
		err := cmd.Wait()
		sys.proxy.rate.Store(0)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "run the same command again") {
			t.Fatalf("after Ctrl-C: %v, stderr %q", err, stderr)
		}
		waitFor(t, 30*time.Second, "the stopped PATCH to end", func() bool { return sys.uploadsInFlight(t) == 0 })
		offset := storedOffset(t, sys, u)
		sent := decode[jsonSend](t, u.ok("", append(args, "--json")...))
		if f := sent.Files[0]; f.ResumedFrom != offset || offset == 0 || f.SHA256 != sum {
			t.Fatalf("send after Ctrl-C: %+v; the gateway had %d", f, offset)
		}
	})

	t.Run("a draft deleted during a send: the send fails, and the same command starts over", func(t *testing.T) {
		u.t = t
		const size = 20 << 20
		p, sum := randomFile(t, files, "deleted.bin", size)
		args := []string{"send", p, "--to", "ken@example.com"}
		sys.proxy.rate.Store(10 << 20)
		sys.proxy.uploaded.Store(0)
		cmd, _, stderr := u.command("", nil, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "5 MiB uploaded", func() bool { return sys.proxy.uploaded.Load() >= 5<<20 })
		pkgID := sendState(t, u).PackageID
		req, _ := http.NewRequest(http.MethodDelete, sys.url+"/api/v1/packages/"+pkgID, nil)
		req.Header.Set("Authorization", "Bearer "+sys.token)
		resp, err := httpClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE the draft: %v %v", resp, err)
		}
		resp.Body.Close()
		err = cmd.Wait()
		sys.proxy.rate.Store(0)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("send whose draft was deleted: %v, stderr %q", err, stderr)
		}
		sent := decode[jsonSend](t, u.ok("", append(args, "--json")...))
		if sent.Package.Id.String() == pkgID || sent.Files[0].ResumedFrom != 0 || sent.Files[0].SHA256 != sum {
			t.Fatalf("send again after the draft was deleted: %+v (old package %s)", sent, pkgID)
		}
	})

	t.Run("a send and a download killed midway go on where they stopped", func(t *testing.T) {
		u.t = t
		const size = 200 << 20
		p, sum := randomFile(t, files, "big.bin", size)
		args := []string{"send", p, "--to", "frank@example.com", "--title", "Big one"}

		// First run, slowed down, killed (SIGKILL) once a good part went through.
		sys.proxy.rate.Store(50 << 20)
		sys.proxy.uploaded.Store(0)
		cmd, _, stderr := u.command("", nil, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "80 MiB uploaded", func() bool { return sys.proxy.uploaded.Load() >= 80<<20 })
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()

		// Where the gateway stands once the killed PATCH has stored what it had (the
		// proxy lets go of it when it sees the client gone): the state file names the
		// upload.
		waitFor(t, 30*time.Second, "the killed PATCH to end", func() bool { return sys.uploadsInFlight(t) == 0 })
		first := sys.proxy.uploaded.Load()
		offset := storedOffset(t, sys, u)
		t.Logf("killed after %d bytes went through; the gateway kept %d", first, offset)
		if offset <= 0 || offset > first || first-offset > partSize+(4<<20) {
			t.Fatalf("the gateway kept %d of the %d bytes sent before the kill (part size %d)", offset, first, partSize)
		}

		// The same command again, at full speed.
		sys.proxy.rate.Store(0)
		sys.proxy.uploaded.Store(0)
		r := u.ok("", append(args, "--json")...)
		sent := decode[jsonSend](t, r)
		second := sys.proxy.uploaded.Load()
		if second != size-offset {
			t.Fatalf("the second run sent %d bytes; the gateway had %d of %d, so %d were left", second, offset, size, size-offset)
		}
		if f := sent.Files[0]; f.ResumedFrom != offset || f.Sent != size-offset || f.SHA256 != sum {
			t.Fatalf("send --json after a resume: %+v (offset %d, sha256 %s)", f, offset, sum)
		}
		if first+second-size > partSize+(4<<20) {
			t.Fatalf("%d bytes were sent for a file of %d: more than one part sent twice", first+second, size)
		}
		_ = stderr

		// The download, slowed down and killed midway, then again.
		out := t.TempDir()
		link := sent.Links[0].MagicLink
		sys.proxy.rate.Store(50 << 20)
		sys.proxy.downloaded.Store(0)
		cmd, _, _ = u.command("", nil, "get", link, "-o", out)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		part := filepath.Join(out, "big.bin.part")
		waitFor(t, 60*time.Second, "80 MiB downloaded", func() bool {
			fi, err := os.Stat(part)
			return err == nil && fi.Size() >= 80<<20
		})
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		fi, err := os.Stat(part)
		if err != nil {
			t.Fatal(err)
		}
		have := fi.Size()
		sys.proxy.rate.Store(0)
		// The killed run's answer may still pass a chunk through the proxy until its write
		// fails: count from when it is over.
		waitFor(t, 30*time.Second, "the killed download's answer to end", func() bool { return sys.proxy.downloads.Load() == 0 })
		sys.proxy.downloaded.Store(0)
		got := decode[jsonGet](t, u.ok("", "get", link, "-o", out, "--json"))
		received := sys.proxy.downloaded.Load()
		if f := got.Files[0]; f.ResumedFrom != have || f.Received != size-have || received != size-have {
			t.Fatalf("get after a kill at %d bytes: %+v, %d bytes through the proxy", have, f, received)
		}
		if sha256File(t, filepath.Join(out, "big.bin")) != sum {
			t.Fatal("the resumed download differs from the file sent")
		}
		if _, err := os.Stat(part); !os.IsNotExist(err) {
			t.Fatalf("the partial file is still there: %v", err)
		}
	})
}

// sendStateDoc is the state file of an unfinished send.
type sendStateDoc struct {
	PackageID string `json:"package_id"`
	Files     map[string]struct {
		UploadID string `json:"upload_id"`
	} `json:"files"`
}

// sendState reads the one unfinished send's state file.
func sendState(t *testing.T, u *user) sendStateDoc {
	t.Helper()
	var states []string
	_ = filepath.WalkDir(filepath.Join(u.home, "cache", "shipfile", "sends"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			states = append(states, p)
		}
		return nil
	})
	if len(states) != 1 {
		t.Fatalf("want one send state file, have %v", states)
	}
	b, err := os.ReadFile(states[0])
	if err != nil {
		t.Fatal(err)
	}
	var st sendStateDoc
	if err := json.Unmarshal(b, &st); err != nil || st.PackageID == "" {
		t.Fatalf("state file %s: %v %s", states[0], err, b)
	}
	return st
}

// storedOffset is the Upload-Offset the gateway reports for the one unfinished send's
// upload (named in the command line's state file).
func storedOffset(t *testing.T, sys *system, u *user) int64 {
	t.Helper()
	st := sendState(t, u)
	if len(st.Files) != 1 {
		t.Fatalf("the send state names %d files, want 1", len(st.Files))
	}
	var uploadID string
	for _, f := range st.Files {
		uploadID = f.UploadID
	}
	req, _ := newHead(sys.url + "/api/v1/packages/" + st.PackageID + "/uploads/" + uploadID)
	req.Header.Set("Authorization", "Bearer "+sys.token)
	req.Header.Set("Tus-Resumable", "1.0.0")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	off, err := parseInt(resp.Header.Get("Upload-Offset"))
	if err != nil || resp.StatusCode != 200 && resp.StatusCode != 204 {
		t.Fatalf("HEAD of the upload: %d, Upload-Offset %q", resp.StatusCode, resp.Header.Get("Upload-Offset"))
	}
	return off
}
