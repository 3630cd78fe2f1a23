package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/apiclient"
)

// TestEncrypted drives `send --encrypt` / `--passphrase-stdin` and `get` of encrypted
// links (docs/ENCRYPTION.md) through one system.
func TestEncrypted(t *testing.T) {
	sys := startSystem(t)
	u := newUser(t)
	u.ok(sys.token+"\n", "login", "--url", sys.url)

	t.Run("three files to two recipients, each link with its key gives them back", func(t *testing.T) {
		u.t = t
		dir := t.TempDir()
		sums := map[string]string{}
		plain := map[string][]byte{}
		var paths []string
		for name, size := range map[string]int64{"a.bin": 1, "b report.pdf": 3<<20 + 17, "c.txt": 1 << 20} {
			p, sum := randomFile(t, dir, name, size)
			sums[name] = sum
			plain[name], _ = os.ReadFile(p)
			paths = append(paths, p)
		}
		args := append([]string{"send", "--encrypt", "--title", "Encrypted three"}, paths...)
		args = append(args, "--to", "ivan@example.com", "--to", "judy@example.com", "--json")
		sent := decode[jsonSend](t, u.ok("", args...))
		enc := sent.Encryption
		if enc == nil || enc.Mode != "key" || !strings.HasPrefix(enc.Key, "AGE-SECRET-KEY-1") {
			t.Fatalf("send --encrypt --json: encryption %+v", enc)
		}
		if len(sent.Links) != 2 || sent.Package.FileCount != 3 {
			t.Fatalf("send --encrypt --json: %+v", sent)
		}
		for _, l := range sent.Links {
			if l.FullLink != l.MagicLink+"#"+enc.Key || strings.Contains(l.MagicLink, "#") {
				t.Fatalf("link %+v: the full link is not magic_link#key", l)
			}
		}
		id, err := age.ParseX25519Identity(enc.Key)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range sent.Files {
			c := f.Ciphertext
			if f.SHA256 != sums[f.Filename] || c == nil || !strings.HasPrefix(c.Filename, "file-") || !strings.HasSuffix(c.Filename, ".age") ||
				c.Size <= f.Size || c.SHA256 == f.SHA256 || f.Sent != c.Size {
				t.Fatalf("sent file %+v (ciphertext %+v); want the plaintext's SHA-256 %s", f, c, sums[f.Filename])
			}
			// The stored object: an age file, not the plaintext, that age opens with
			// the link's key to the original bytes.
			obj, dbSHA := storedObject(t, sys, f.FileID)
			if !bytes.HasPrefix(obj, []byte("age-encryption.org/v1\n")) || bytes.Contains(obj, plain[f.Filename][:min(len(plain[f.Filename]), 64)]) && len(plain[f.Filename]) > 16 {
				t.Fatalf("%s: the stored object is not an age file, or holds the plaintext", f.Filename)
			}
			if dbSHA != c.SHA256 || int64(len(obj)) != c.Size {
				t.Fatalf("%s: the server has %s (%d bytes), the command says %+v", f.Filename, dbSHA, len(obj), c)
			}
			r, err := age.Decrypt(bytes.NewReader(obj), id)
			if err != nil {
				t.Fatalf("%s: age does not open the stored object with the link's key: %v", f.Filename, err)
			}
			got, _ := io.ReadAll(r)
			if !bytes.Equal(got, plain[f.Filename]) {
				t.Fatalf("%s: the stored object decrypts to other bytes", f.Filename)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(u.home, "cache", "shipfile", "sends", "*")); len(left) != 0 {
			t.Fatalf("a finished encrypted send left its state or spool: %v", left)
		}

		for _, l := range sent.Links {
			out := t.TempDir()
			got := decode[jsonGet](t, u.ok("", "get", l.FullLink, "-o", out, "--json"))
			if len(got.Files) != 3 {
				t.Fatalf("get --json through %s's link: %+v", l.Email, got)
			}
			for _, f := range got.Files {
				if f.SHA256 != sums[f.Filename] || f.Ciphertext == nil || f.Received != f.Ciphertext.Size || f.Skipped {
					t.Errorf("got %+v", f)
				}
			}
			for name, sum := range sums {
				if s := sha256File(t, filepath.Join(out, name)); s != sum {
					t.Errorf("%s came back through %s's link with SHA-256 %s, sent %s", name, l.Email, s, sum)
				}
			}
			if entries, _ := os.ReadDir(out); len(entries) != 3 {
				t.Errorf("get left more than the three files: %v", entries)
			}
		}

		// Run again into the same directory: each file there is compared, and skipped.
		{
			out := t.TempDir()
			u.ok("", "get", sent.Links[0].FullLink, "-o", out)
			again := decode[jsonGet](t, u.ok("", "get", sent.Links[0].FullLink, "-o", out, "--json"))
			for _, f := range again.Files {
				if !f.Skipped || f.SHA256 != sums[f.Filename] {
					t.Errorf("second get: %+v, want skipped", f)
				}
			}
		}

		// An earlier run's part (the first half of the ciphertext, as a killed get leaves
		// it): the rest is asked for with Range, then the part is decrypted.
		{
			var big jsonSentFile
			for _, f := range sent.Files {
				if f.Filename == "b report.pdf" {
					big = f
				}
			}
			obj, _ := storedObject(t, sys, big.FileID)
			out := t.TempDir()
			half := int64(len(obj) / 2)
			if err := os.WriteFile(filepath.Join(out, "b report.pdf.part"), obj[:half], 0o644); err != nil {
				t.Fatal(err)
			}
			got := decode[jsonGet](t, u.ok("", "get", sent.Links[1].FullLink, "-o", out, "--json"))
			for _, f := range got.Files {
				if f.Filename == "b report.pdf" && (f.ResumedFrom != half || f.Received != int64(len(obj))-half) {
					t.Errorf("get after an earlier run's part of %d bytes: %+v", half, f)
				}
			}
			if sha256File(t, filepath.Join(out, "b report.pdf")) != sums["b report.pdf"] {
				t.Error("the resumed get came back with other bytes")
			}
			if entries, _ := os.ReadDir(out); len(entries) != 3 {
				t.Errorf("the resumed get left more than the three files: %v", entries)
			}
		}

		// The e-mailed link alone lacks the key; another key does not open the files.
		out := t.TempDir()
		r := u.run("", nil, "get", sent.Links[0].MagicLink, "-o", out)
		if r.code != 1 || !strings.Contains(r.stderr, "needs its key") || !strings.Contains(r.stderr, "stdin") {
			t.Fatalf("get without the key: exit %d, %q", r.code, r.stderr)
		}
		// The key passed on separately: the bare link with the key, or the full link, on stdin.
		for i, in := range []string{sent.Encryption.Key, " " + sent.Links[0].FullLink + " "} {
			kout := t.TempDir()
			got := decode[jsonGet](t, u.ok(in+"\n", "get", sent.Links[0].MagicLink, "-o", kout, "--json"))
			if len(got.Files) != len(sums) {
				t.Fatalf("get with the key on stdin (%d): %+v", i, got.Files)
			}
			for name, sum := range sums {
				if s := sha256File(t, filepath.Join(kout, name)); s != sum {
					t.Errorf("%s came back with the key on stdin (%d) with SHA-256 %s, sent %s", name, i, s, sum)
				}
			}
		}
		stranger, _ := age.GenerateX25519Identity()
		r = u.run(stranger.String()+"\n", nil, "get", sent.Links[0].MagicLink, "-o", out)
		if r.code != 1 || !strings.Contains(r.stderr, "key read on stdin does not open") {
			t.Fatalf("get with a wrong key on stdin: exit %d, %q", r.code, r.stderr)
		}
		r = u.run("not a key\n", nil, "get", sent.Links[0].MagicLink, "-o", out)
		if r.code != 1 || !strings.Contains(r.stderr, "not an age key") {
			t.Fatalf("get with junk on stdin: exit %d, %q", r.code, r.stderr)
		}
		other, _ := age.GenerateX25519Identity()
		r = u.run("", nil, "get", sent.Links[0].MagicLink+"#"+other.String(), "-o", out)
		if r.code != 1 || !strings.Contains(r.stderr, "does not open") {
			t.Fatalf("get with a wrong key: exit %d, %q", r.code, r.stderr)
		}
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Fatalf("a get that failed left files: %v", entries)
		}

		// Plain output: the full links, and a word that the e-mailed ones lack the key.
		r = u.ok("", "send", "--encrypt", paths[0], "--to", "ivan@example.com", "--to", "judy@example.com")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], "#AGE-SECRET-KEY-1") || !strings.Contains(lines[1], "#AGE-SECRET-KEY-1") ||
			!strings.Contains(r.stderr, "lacks the key") {
			t.Fatalf("send --encrypt printed %q, %q", r.stdout, r.stderr)
		}
	})

	t.Run("a passphrase instead of a key", func(t *testing.T) {
		u.t = t
		dir := t.TempDir()
		pa, suma := randomFile(t, dir, "x.bin", 100<<10)
		pb, sumb := randomFile(t, dir, "y.bin", 70<<10)
		const pass = "correct horse battery staple"
		// The link's password first, then the passphrase.
		sent := decode[jsonSend](t, u.ok("link password\n"+pass+"\n", "send", pa, pb, "--to", "kim@example.com", "--password-stdin", "--passphrase-stdin", "--json"))
		if sent.Encryption == nil || sent.Encryption.Mode != "passphrase" || sent.Encryption.Key != "" || sent.Links[0].FullLink != "" || !sent.Package.PasswordProtected {
			t.Fatalf("send --passphrase-stdin --json: %+v %+v", sent.Encryption, sent.Links)
		}
		obj, _ := storedObject(t, sys, sent.Files[0].FileID)
		if !bytes.Contains(obj[:200], []byte("\n-> scrypt ")) {
			t.Fatalf("the stored object has no scrypt stanza: %.120q", obj)
		}
		sid, _ := age.NewScryptIdentity(pass)
		if r, err := age.Decrypt(bytes.NewReader(obj), sid); err != nil {
			t.Fatalf("age does not open the stored object with the passphrase: %v", err)
		} else if b, _ := io.ReadAll(r); hexSHA(b) != suma {
			t.Fatal("the stored object decrypts to other bytes")
		}

		link := sent.Links[0].MagicLink
		out := t.TempDir()
		r := u.run("link password\n", nil, "get", link, "-o", out)
		if r.code != 1 || !strings.Contains(r.stderr, "this link needs its passphrase: pipe it on stdin") {
			t.Fatalf("get without the passphrase: exit %d, %q", r.code, r.stderr)
		}
		r = u.run("link password\nwrong horse battery staple\n", nil, "get", link, "-o", out)
		if r.code != 1 || !strings.Contains(r.stderr, "passphrase does not open") {
			t.Fatalf("get with a wrong passphrase: exit %d, %q", r.code, r.stderr)
		}
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Fatalf("a get that failed left files: %v", entries)
		}
		got := decode[jsonGet](t, u.ok("link password\n"+pass+"\n", "get", link, "-o", out, "--json"))
		if len(got.Files) != 2 || sha256File(t, filepath.Join(out, "x.bin")) != suma || sha256File(t, filepath.Join(out, "y.bin")) != sumb {
			t.Fatalf("get with the passphrase: %+v", got)
		}
	})

	t.Run("a package without a manifest: neutral names", func(t *testing.T) {
		u.t = t
		// An API client that encrypts but sends no manifest.
		id, _ := age.GenerateX25519Identity()
		plain := bytes.Repeat([]byte("no names "), 5000)
		var cipher bytes.Buffer
		w, _ := age.Encrypt(&cipher, id.Recipient())
		w.Write(plain)
		w.Close()
		var pkg struct {
			ID string `json:"id"`
		}
		apiCall(t, sys, http.MethodPost, "/api/v1/packages", `{"title":"No names","recipient_email":"olga@example.com","encryption":"age"}`, http.StatusCreated, &pkg)
		hreq, _ := http.NewRequest(http.MethodPost, sys.url+"/api/v1/packages/"+pkg.ID+"/uploads", bytes.NewReader(cipher.Bytes()))
		hreq.Header.Set("Authorization", "Bearer "+sys.token)
		hreq.Header.Set("Tus-Resumable", "1.0.0")
		hreq.Header.Set("Content-Type", "application/offset+octet-stream")
		hreq.Header.Set("Upload-Length", strconv64(int64(cipher.Len())))
		hreq.Header.Set("Upload-Metadata", "filename "+base64.StdEncoding.EncodeToString([]byte("secret-name.txt")))
		resp, err := httpClient.Do(hreq)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("tus upload: %d", resp.StatusCode)
		}
		var fin struct {
			MagicLink string `json:"magic_link"`
		}
		apiCall(t, sys, http.MethodPost, "/api/v1/packages/"+pkg.ID+"/finalize", "", http.StatusOK, &fin)
		out := t.TempDir()
		got := decode[jsonGet](t, u.ok("", "get", fin.MagicLink+"#"+id.String(), "-o", out, "--json"))
		if len(got.Files) != 1 || got.Files[0].Filename != "file-1" || got.Files[0].SHA256 != hexSHA(plain) ||
			sha256File(t, filepath.Join(out, "file-1")) != hexSHA(plain) {
			t.Fatalf("get of a package without a manifest: %+v", got)
		}
	})

	t.Run("an altered object fails and leaves nothing", func(t *testing.T) {
		u.t = t
		p, _ := randomFile(t, t.TempDir(), "victim.bin", 300<<10)
		sent := decode[jsonSend](t, u.ok("", "send", "--encrypt", p, "--to", "lou@example.com", "--json"))
		// The title is not encrypted: without --title it must not carry the file's name.
		if sent.Package.Title != "1 end-to-end encrypted file(s)" {
			t.Fatalf("default title of an encrypted send = %q", sent.Package.Title)
		}
		link := sent.Links[0].FullLink
		key := objectKey(t, sys, sent.Files[0].FileID)
		obj, _ := storedObject(t, sys, sent.Files[0].FileID)
		obj[len(obj)-1000] ^= 0x01
		putObject(t, sys, key, obj)

		// The bucket alone altered: the ciphertext's SHA-256 differs from the server's.
		out := t.TempDir()
		r := u.run("", nil, "get", link, "-o", out)
		if r.code != 1 || !strings.Contains(r.stderr, "victim.bin was altered") {
			t.Fatalf("get of an altered object: exit %d, %q", r.code, r.stderr)
		}
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Fatalf("get of an altered object left %v", entries)
		}

		// The bucket and the database altered together: age's authentication fails.
		setSHA256(t, sys, sent.Files[0].FileID, hexSHA(obj))
		r = u.run("", nil, "get", link, "-o", out)
		if r.code != 1 || !strings.Contains(r.stderr, "victim.bin was altered") || !strings.Contains(r.stderr, "authentication") {
			t.Fatalf("get of an altered object with its SHA-256: exit %d, %q", r.code, r.stderr)
		}
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Fatalf("get of an altered object left %v", entries)
		}
	})

	t.Run("a killed encrypted send goes on with the same ciphertext", func(t *testing.T) {
		u.t = t
		const size = 40 << 20
		p, sum := randomFile(t, t.TempDir(), "enc-big.bin", size)
		args := []string{"send", "--encrypt", p, "--to", "mia@example.com"}
		sys.proxy.rate.Store(20 << 20)
		sys.proxy.uploaded.Store(0)
		cmd, _, stderr := u.command("", nil, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "16 MiB uploaded", func() bool { return sys.proxy.uploaded.Load() >= 16<<20 })
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		waitFor(t, 30*time.Second, "the killed PATCH to end", func() bool { return sys.uploadsInFlight(t) == 0 })
		first := sys.proxy.uploaded.Load()
		offset := storedOffset(t, sys, u)
		if offset <= 0 || offset > first {
			t.Fatalf("the gateway kept %d of the %d bytes sent before the kill; stderr %q", offset, first, stderr)
		}

		// The state file (mode 600) keeps the key; the spool beside it the ciphertext.
		states, _ := filepath.Glob(filepath.Join(u.home, "cache", "shipfile", "sends", "*.json"))
		if len(states) != 1 {
			t.Fatalf("state files %v", states)
		}
		fi, err := os.Stat(states[0])
		b, _ := os.ReadFile(states[0])
		if err != nil || fi.Mode().Perm() != 0o600 || !bytes.Contains(b, []byte(`"identity":"AGE-SECRET-KEY-1`)) {
			t.Fatalf("state file %s: mode %v, %v, holds the key: %v", states[0], fi.Mode(), err, bytes.Contains(b, []byte("AGE-SECRET-KEY-1")))
		}
		spool, _ := filepath.Glob(strings.TrimSuffix(states[0], ".json") + ".spool/*.age")
		if len(spool) != 1 {
			t.Fatalf("spool %v", spool)
		}

		sys.proxy.rate.Store(0)
		sys.proxy.uploaded.Store(0)
		sent := decode[jsonSend](t, u.ok("", append(args, "--json")...))
		second := sys.proxy.uploaded.Load()
		f := sent.Files[0]
		if f.Ciphertext == nil || f.ResumedFrom != offset || f.Sent != f.Ciphertext.Size-offset || second != f.Ciphertext.Size-offset || f.SHA256 != sum {
			t.Fatalf("send again after the kill: %+v %+v; the gateway had %d, %d bytes went up", f, f.Ciphertext, offset, second)
		}
		if left, _ := filepath.Glob(filepath.Join(u.home, "cache", "shipfile", "sends", "*")); len(left) != 0 {
			t.Fatalf("the finished send left its state or spool: %v", left)
		}
		out := t.TempDir()
		u.ok("", "get", sent.Links[0].FullLink, "-o", out)
		if sha256File(t, filepath.Join(out, "enc-big.bin")) != sum {
			t.Fatal("the resumed encrypted send came back with other bytes")
		}
	})
}

// TestEncryptedRequest: the owner's key pair (shipfile key), a request encrypted to it, an
// upload through the request link as the page makes it (the file and its manifest entry
// encrypted to the owner's public key), and the owner's get of the package by its id.
func TestEncryptedRequest(t *testing.T) {
	sys := startSystem(t)
	u := newUser(t)
	u.ok(sys.token+"\n", "login", "--url", sys.url)
	const pass = "owner passphrase 1"

	r := u.run("", nil, "key")
	if r.code != 1 || !strings.Contains(r.stderr, "shipfile key create") {
		t.Fatalf("key before there is one: exit %d, %q", r.code, r.stderr)
	}
	r = u.run("", nil, "request", "--from", "nina@example.com", "--encrypt")
	if r.code != 1 || !strings.Contains(r.stderr, "shipfile key create") {
		t.Fatalf("request --encrypt without a key: exit %d, %q", r.code, r.stderr)
	}
	key := decode[jsonKey](t, u.ok(pass+"\n", "key", "create", "--json"))
	if !strings.HasPrefix(key.PublicKey, "age1") || !strings.HasPrefix(key.SealedIdentity, "-----BEGIN AGE ENCRYPTED FILE-----") {
		t.Fatalf("key create --json: %+v", key)
	}
	if r := u.run(pass+"\n", nil, "key", "create"); r.code != 1 || !strings.Contains(r.stderr, "--replace") {
		t.Fatalf("key create twice: exit %d, %q", r.code, r.stderr)
	}
	if r := u.ok("", "key"); strings.TrimSpace(r.stdout) != key.PublicKey {
		t.Fatalf("key printed %q", r.stdout)
	}
	exp := u.ok(pass+"\n", "key", "export")
	ids, err := age.ParseIdentities(strings.NewReader(exp.stdout))
	if err != nil || len(ids) != 1 || ids[0].(*age.X25519Identity).Recipient().String() != key.PublicKey {
		t.Fatalf("key export printed a key that is not the public key's: %v", err)
	}
	if r := u.run("wrong passphrase\n", nil, "key", "export"); r.code != 1 || !strings.Contains(r.stderr, "does not open") || strings.Contains(r.stdout, "AGE-SECRET-KEY") {
		t.Fatalf("key export with a wrong passphrase: exit %d, %q", r.code, r.stderr)
	}

	req := decode[jsonSend](t, u.ok("", "request", "--from", "nina@example.com", "--encrypt", "--json"))
	link := req.Links[0].MagicLink
	token := link[strings.LastIndex(link, "/p/")+3:]

	// Nina's upload, as the request page makes it (tus-js-client's metadata: the manifest
	// entry's base64, base64-encoded again by tus).
	recipient, _ := age.ParseX25519Recipient(key.PublicKey)
	plain := bytes.Repeat([]byte("signed contract "), 20000)
	var cipher, entry bytes.Buffer
	w, _ := age.Encrypt(&cipher, recipient)
	w.Write(plain)
	w.Close()
	w, _ = age.Encrypt(&entry, recipient)
	fmt.Fprintf(w, `{"name":"contract.pdf","type":"application/pdf","size":%d}`, len(plain))
	w.Close()
	hreq, _ := http.NewRequest(http.MethodPost, sys.url+"/api/v1/links/"+token+"/uploads", bytes.NewReader(cipher.Bytes()))
	hreq.Header.Set("Tus-Resumable", "1.0.0")
	hreq.Header.Set("Content-Type", "application/offset+octet-stream")
	hreq.Header.Set("Upload-Length", strconv64(int64(cipher.Len())))
	hreq.Header.Set("Upload-Metadata", "filename "+base64.StdEncoding.EncodeToString([]byte("contract.pdf"))+
		",manifest "+base64.StdEncoding.EncodeToString([]byte(base64.StdEncoding.EncodeToString(entry.Bytes()))))
	resp, err := httpClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Shipfile-File-Id") == "" {
		t.Fatalf("the upload through the request link: %d %s", resp.StatusCode, body)
	}
	fileID := resp.Header.Get("Shipfile-File-Id")
	if obj, _ := storedObject(t, sys, fileID); !bytes.Equal(obj, cipher.Bytes()) {
		t.Fatal("the stored object is not the uploaded ciphertext")
	}

	pkgID := req.Package.Id.String()
	out := t.TempDir()
	if r := u.run("wrong passphrase\n", nil, "get", pkgID, "-o", out); r.code != 1 || !strings.Contains(r.stderr, "does not open your key") {
		t.Fatalf("get ID with a wrong passphrase: exit %d, %q", r.code, r.stderr)
	}
	got := decode[jsonGetOwned](t, u.ok(pass+"\n", "get", pkgID, "-o", out, "--json"))
	if len(got.Files) != 1 || got.Files[0].Filename != "contract.pdf" || got.Files[0].SHA256 != hexSHA(plain) ||
		sha256File(t, filepath.Join(out, "contract.pdf")) != hexSHA(plain) {
		t.Fatalf("get ID of the encrypted request: %+v", got)
	}
}

// jsonKey is `key create --json`: the API's key object.
type jsonKey struct {
	PublicKey      string `json:"public_key"`
	SealedIdentity string `json:"sealed_identity"`
	CreatedAt      string `json:"created_at"`
}

// jsonGetOwned is `get ID --json`: the package is the API's PackageDetail.
type jsonGetOwned struct {
	Package apiclient.PackageDetail `json:"package"`
	Dir     string                  `json:"dir"`
	Files   []jsonGotFile           `json:"files"`
}

// apiCall sends body (JSON, none when empty) to the API with the user's token and
// decodes the answer, which must have status want, into v.
func apiCall(t *testing.T, sys *system, method, path, body string, want int, v any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, sys.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+sys.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

func hexSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// objectKey is the bucket key of a file (the gateway's database says it).
func objectKey(t *testing.T, sys *system, fileID string) string {
	t.Helper()
	var key string
	queryRow(t, sys, "SELECT object_key FROM files WHERE id = $1", []any{fileID}, &key)
	return key
}

// storedObject is a file's object in the bucket and the SHA-256 the database records.
func storedObject(t *testing.T, sys *system, fileID string) ([]byte, string) {
	t.Helper()
	var key, sum string
	queryRow(t, sys, "SELECT object_key, sha256 FROM files WHERE id = $1", []any{fileID}, &key, &sum)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o, err := sys.store.Client.GetObject(ctx, sys.store.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		t.Fatalf("object %s: %v", key, err)
	}
	return b, sum
}

func putObject(t *testing.T, sys *system, key string, b []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := sys.store.Client.PutObject(ctx, sys.store.Bucket, key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

func setSHA256(t *testing.T, sys *system, fileID, sum string) {
	t.Helper()
	ctx, conn := dbConn(t, sys)
	if _, err := conn.Exec(ctx, "UPDATE files SET sha256 = $2 WHERE id = $1", fileID, sum); err != nil {
		t.Fatal(err)
	}
}

func queryRow(t *testing.T, sys *system, q string, args []any, dest ...any) {
	t.Helper()
	ctx, conn := dbConn(t, sys)
	if err := conn.QueryRow(ctx, q, args...).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// dbConn connects to the system's database for the rest of the test (30 s at most).
func dbConn(t *testing.T, sys *system) (context.Context, *pgx.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	conn, err := pgx.Connect(ctx, sys.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return ctx, conn
}
