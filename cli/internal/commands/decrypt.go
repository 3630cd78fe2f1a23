package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"filippo.io/age"
	"github.com/google/uuid"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/cli/internal/crypt"
	"github.com/shipfile/shipfile/cli/internal/safename"
	"github.com/shipfile/shipfile/cli/internal/transfer"
	"github.com/shipfile/shipfile/pkg/apiclient"
)

// decryptor fetches and decrypts the files of an end-to-end encrypted link.
type decryptor struct {
	a        *app
	c        *api.Client
	token    string
	grant    string
	fragment string
	// ownerKey says ids is the owner's key (a file request's uploads).
	ownerKey bool
	// owned is the package fetched as its owner (get ID), uuid.Nil through a link.
	owned uuid.UUID
	// progress shows the decryption of each file.
	progress transfer.Progress
	// ids open the package's age files, once known (the fragment's key, or the
	// passphrase read when the first age file asks for one).
	ids []age.Identity
	// manifest is the decrypted manifest, nil when the package has none.
	manifest *crypt.Manifest
	// stdinKey says ids is a key read from standard input (a link without its #...).
	stdinKey bool
}

// loadManifest fetches and decrypts the package's manifest: the files' names. A package
// without one (404) gets neutral names.
func (d *decryptor) loadManifest(ctx context.Context) error {
	var body []byte
	var err error
	if d.owned != uuid.Nil {
		r, rerr := d.c.API.GetPackageManifestWithResponse(ctx, d.owned)
		err = api.Expect(r, rerr, http.StatusOK)
		if rerr == nil {
			body = r.Body
		}
	} else {
		params := &apiclient.GetLinkManifestParams{}
		if d.grant != "" {
			params.LinkGrantHeader = &d.grant
		}
		r, rerr := d.c.API.GetLinkManifestWithResponse(ctx, d.token, params)
		err = api.Expect(r, rerr, http.StatusOK)
		if rerr == nil {
			body = r.Body
		}
	}
	if api.StatusOf(err) == http.StatusNotFound {
		d.a.note("This package has no list of names: its files get neutral names (file-1, ...)")
		return nil
	}
	if err != nil {
		return err
	}
	types, err := crypt.StanzaTypes(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("the package's list of names was altered: %w", err)
	}
	ids, err := d.identities(types)
	if err != nil {
		return err
	}
	plain, err := crypt.Decrypt(body, ids...)
	if err != nil {
		return d.openError("the package's list of names", err)
	}
	m, err := crypt.ParseManifest(plain)
	if err != nil {
		return err
	}
	d.manifest = &m
	return nil
}

// identities are what opens an age file with these stanza types: the link's key, or
// the passphrase from standard input.
func (d *decryptor) identities(types []string) ([]age.Identity, error) {
	if d.ids != nil {
		return d.ids, nil
	}
	if d.fragment != "" {
		id, err := crypt.IdentityOf(d.fragment)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		d.ids = []age.Identity{id}
		return d.ids, nil
	}
	if !slices.Contains(types, "scrypt") {
		if d.owned != uuid.Nil {
			return nil, errors.New("this package's key was only in its links: get it through the full link (...#AGE-SECRET-KEY-1...)")
		}
		return d.keyFromStdin()
	}
	pass, err := d.a.readSecret("Passphrase for the files: ")
	if err != nil || pass == "" {
		return nil, errors.New("this link needs its passphrase: pipe it on stdin (or run the command on a terminal to be asked for it)")
	}
	id, err := crypt.PassphraseIdentity(pass)
	if err != nil {
		return nil, err
	}
	d.ids = []age.Identity{id}
	return d.ids, nil
}

// keyFromStdin reads the key of a link given without its fragment from standard input:
// a line AGE-SECRET-KEY-1..., or the whole full link (...#AGE-SECRET-KEY-1...).
func (d *decryptor) keyFromStdin() ([]age.Identity, error) {
	line, err := d.a.readSecret("Key for the files (AGE-SECRET-KEY-1... or the full link): ")
	line = strings.TrimSpace(line)
	if err != nil || line == "" {
		return nil, errors.New("this link needs its key: pipe it on stdin (a line AGE-SECRET-KEY-1..., or the full link ending with #AGE-SECRET-KEY-1...), or give the full link, quoted in the shell (the e-mailed link lacks the key; the sender passes it on)")
	}
	key := line
	if i := strings.LastIndexByte(line, '#'); i >= 0 {
		if l, perr := transfer.ParseLink(line); perr == nil && l.Token != d.token {
			return nil, errors.New("the link read on stdin is another package's: give this link's key")
		}
		key = line[i+1:]
	}
	id, err := age.ParseX25519Identity(strings.ToUpper(strings.TrimSpace(key)))
	if err != nil {
		return nil, errors.New("what was read on stdin is not an age key (AGE-SECRET-KEY-1...) or a full link ending with one")
	}
	d.stdinKey = true
	d.ids = []age.Identity{id}
	return d.ids, nil
}

// decrypt decrypts the age file part (size bytes) into w, with a progress bar.
func (d *decryptor) decrypt(ctx context.Context, part, name string, size int64, w io.Writer, ids []age.Identity) (crypt.Decrypted, error) {
	bar := d.progress.Start("decrypting "+name, size, 0)
	dec, err := crypt.DecryptFile(ctx, part, w, bar.Add, ids...)
	if err != nil {
		bar.Abort()
		return dec, err
	}
	bar.Finish()
	return dec, nil
}

// openError says why what could not be decrypted: the key or passphrase, or an
// alteration.
func (d *decryptor) openError(what string, err error) error {
	if crypt.IsWrongKey(err) {
		if d.ownerKey {
			return fmt.Errorf("your key does not open %s: it was sent to another key (one you replaced?)", what)
		}
		if d.fragment != "" {
			return fmt.Errorf("this link's key does not open %s: a wrong or cut key after the #?", what)
		}
		if d.stdinKey {
			return fmt.Errorf("the key read on stdin does not open %s: a wrong or cut key?", what)
		}
		return fmt.Errorf("the passphrase does not open %s: a wrong passphrase?", what)
	}
	return fmt.Errorf("%s was altered: it fails age's authentication (%v)", what, err)
}

// nameOf is the name the file gets: the manifest's, else a neutral one (the server's
// file-N.age without .age), made safe and unique within the package by names.
func (d *decryptor) nameOf(f apiclient.LinkFile, names *safename.Set) (string, *crypt.ManifestFile) {
	var entry *crypt.ManifestFile
	name := strings.TrimSuffix(f.Filename, ".age")
	if d.manifest != nil {
		if e, ok := d.manifest.Files[f.Id.String()]; ok {
			entry = &e
			name = e.Name
		}
	}
	return names.Name(name), entry
}

// download fetches file f's ciphertext to NAME.part (resumable, SHA-256 checked against
// the server's record), then decrypts it to NAME through a temporary file: a file that
// fails age's authentication leaves nothing behind.
func (d *decryptor) download(ctx context.Context, dl *transfer.Downloader, f apiclient.LinkFile, dir string, names *safename.Set) (gotFile, error) {
	name, entry := d.nameOf(f, names)
	path := filepath.Join(dir, name)
	part := path + ".part"
	out := gotFile{ID: f.Id.String(), Filename: name, Path: path,
		Ciphertext: &cipherInfo{Filename: f.Filename, Size: f.Size, SHA256: f.Sha256}}
	existing, err := transfer.Existing(path)
	if err != nil {
		return out, err
	}
	exists := existing != nil
	if exists && entry != nil && existing.Size() != entry.Size {
		return out, fmt.Errorf("%s exists and is not the file of the link: move it away or choose another directory (-o)", path)
	}

	// When the ciphertext comes whole in this run and the key is known, it is decrypted
	// as it arrives (one pass); else (an earlier run's part, a download that started
	// over) from the part once it is whole.
	var (
		stream *decryptStream
		tee    *transfer.Tee
		tmp    *os.File
	)
	if _, err := os.Lstat(part); !exists && d.ids != nil && errors.Is(err, fs.ErrNotExist) {
		if tmp, err = os.CreateTemp(dir, "."+name+".decrypting-*"); err != nil {
			return out, err
		}
		defer os.Remove(tmp.Name()) // after the rename: nothing
		defer tmp.Close()
		stream = startDecrypt(tmp, d.ids)
		tee = &transfer.Tee{W: stream.pw}
	}
	got, err := dl.Fetch(ctx, d.token, f, part, name, tee)
	var streamed crypt.Decrypted
	var streamErr error
	if stream != nil {
		streamed, streamErr = stream.finish(err)
	}
	out.ResumedFrom, out.Received = got.ResumedFrom, got.Received
	if err != nil {
		var ce *transfer.ChecksumError
		if errors.As(err, &ce) {
			return out, fmt.Errorf("%s was altered: its encrypted bytes differ from what was uploaded (SHA-256 %s, the server recorded %s); nothing of it was kept", name, ce.Got, ce.Want)
		}
		return out, stopped(name, err)
	}
	if stream != nil && !tee.Broken && tee.N == f.Size {
		return d.keep(out, tmp, part, entry, streamed, streamErr)
	}
	if tmp != nil {
		tmp.Close()
		_ = os.Remove(tmp.Name())
	}
	pf, err := os.Open(part)
	if err != nil {
		return out, err
	}
	types, terr := crypt.StanzaTypes(pf)
	pf.Close()
	if terr != nil {
		_ = os.Remove(part)
		return out, fmt.Errorf("%s was altered: it is not an age file (%v); nothing of it was kept", name, terr)
	}
	ids, err := d.identities(types)
	if err != nil {
		return out, err
	}

	fail := func(err error) error { return d.fail(name, part, err) }
	if exists {
		dec, err := d.decrypt(ctx, part, name, f.Size, io.Discard, ids)
		if err != nil {
			return out, fail(err)
		}
		sum, err := transfer.FileSHA256(path)
		if err != nil {
			return out, err
		}
		if sum != dec.SHA256 {
			return out, fmt.Errorf("%s exists and is not the file of the link: move it away or choose another directory (-o)", path)
		}
		_ = os.Remove(part)
		out.Size, out.SHA256, out.Skipped = dec.Size, dec.SHA256, true
		return out, nil
	}

	tmp, err = os.CreateTemp(dir, "."+name+".decrypting-*")
	if err != nil {
		return out, err
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing
	defer tmp.Close()
	dec, err := d.decrypt(ctx, part, name, f.Size, tmp, ids)
	return d.keep(out, tmp, part, entry, dec, err)
}

// keep ends the decryption of a file into tmp (dec, or err): tmp becomes out.Path and
// the ciphertext part is removed; or, on err, tmp is removed (nothing of the plaintext
// stays) and the error says why.
func (d *decryptor) keep(out gotFile, tmp *os.File, part string, entry *crypt.ManifestFile, dec crypt.Decrypted, err error) (gotFile, error) {
	if err == nil && entry != nil && dec.Size != entry.Size {
		err = fmt.Errorf("%d bytes where the list of names says %d", dec.Size, entry.Size)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return out, d.fail(out.Filename, part, err)
	}
	if err := transfer.Place(tmp.Name(), out.Path); err != nil {
		return out, err
	}
	_ = os.Remove(part)
	out.Size, out.SHA256 = dec.Size, dec.SHA256
	return out, nil
}

// fail says why the file name did not decrypt: an interruption or a wrong key keep the
// ciphertext part (a run again, with the right key, decrypts it); anything else is an
// alteration, and the part goes too.
func (d *decryptor) fail(name, part string, err error) error {
	if errors.Is(err, context.Canceled) {
		return stopped(name, err)
	}
	if crypt.IsWrongKey(err) {
		return d.openError(name, err)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return err // the disk, not the file
	}
	_ = os.Remove(part)
	return fmt.Errorf("%s was altered: it fails age's authentication (%v); nothing of it was kept", name, err)
}

// decryptStream decrypts what is written to pw, into a file, as it comes.
type decryptStream struct {
	pw   *io.PipeWriter
	done chan struct{}
	dec  crypt.Decrypted
	err  error
}

func startDecrypt(w io.Writer, ids []age.Identity) *decryptStream {
	pr, pw := io.Pipe()
	s := &decryptStream{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.dec, s.err = crypt.DecryptReader(pr, w, ids...)
		if s.err == nil {
			// age stops at the last chunk: anything after it is not of the file.
			if n, _ := io.Copy(io.Discard, pr); n > 0 {
				s.err = fmt.Errorf("%d bytes after the end of the age file", n)
			}
		}
		_, _ = io.Copy(io.Discard, pr) // the download goes on, whatever happened here
	}()
	return s
}

// finish ends the stream once the download ended (with err) and returns the outcome.
func (s *decryptStream) finish(err error) (crypt.Decrypted, error) {
	if err != nil {
		s.pw.CloseWithError(err)
	} else {
		s.pw.Close()
	}
	<-s.done
	return s.dec, s.err
}
