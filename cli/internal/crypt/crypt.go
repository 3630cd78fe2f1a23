// Package crypt is the command line's end-to-end encryption (docs/ENCRYPTION.md): every
// file of an encrypted package is an age v1 file (filippo.io/age), made
// for a fresh X25519 identity of the package or with a passphrase (age's scrypt); the
// names, types and sizes travel in an encrypted manifest. The server only ever sees
// ciphertext, and `age -d` decrypts any stored object.
package crypt

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"filippo.io/age"
	"filippo.io/age/armor"
)

// Magic is how every binary age v1 file begins.
const Magic = "age-encryption.org/v1\n"

// MaxManifest is the most a package's encrypted manifest may weigh (the server's limit).
const MaxManifest = 1 << 20

// MinPassphrase is the shortest passphrase `send --passphrase-stdin` takes.
const MinPassphrase = 8

// NewIdentity makes a fresh X25519 identity: its string (AGE-SECRET-KEY-1…) is the key
// that goes into the link's fragment.
func NewIdentity() (string, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// Recipient is what files are encrypted to: the identity's recipient when identity is
// set, else the passphrase's scrypt recipient.
func Recipient(identity, passphrase string) (age.Recipient, error) {
	if identity != "" {
		id, err := age.ParseX25519Identity(identity)
		if err != nil {
			return nil, errors.New("the stored key is not an age identity")
		}
		return id.Recipient(), nil
	}
	return age.NewScryptRecipient(passphrase)
}

// IdentityOf parses a link's fragment as an age X25519 identity.
func IdentityOf(fragment string) (age.Identity, error) {
	id, err := age.ParseX25519Identity(strings.TrimSpace(fragment))
	if err != nil {
		return nil, errors.New("the link's #... is not an age key (AGE-SECRET-KEY-1...)")
	}
	return id, nil
}

// PassphraseIdentity decrypts what a passphrase encrypted.
func PassphraseIdentity(passphrase string) (age.Identity, error) {
	return age.NewScryptIdentity(passphrase)
}

// Encrypt returns b encrypted to r.
func Encrypt(b []byte, r age.Recipient) ([]byte, error) {
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, r)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Decrypt returns the plaintext of the age file b (see Classify for its errors).
func Decrypt(b []byte, ids ...age.Identity) ([]byte, error) {
	r, err := age.Decrypt(bytes.NewReader(b), ids...)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// Encrypted is one file encrypted by EncryptFile.
type Encrypted struct {
	// SHA256 and Size are the plaintext's.
	SHA256 string
	Size   int64
	// CipherSize is the age file's size.
	CipherSize int64
}

// EncryptFile encrypts the file src to r into dst, streaming (memory stays bounded),
// through a temporary file beside dst and a rename, so that dst is either whole or
// absent. It stops when ctx ends; read (may be nil) counts the plaintext bytes read.
func EncryptFile(ctx context.Context, src, dst string, r age.Recipient, read func(int)) (Encrypted, error) {
	var out Encrypted
	in, err := os.Open(src)
	if err != nil {
		return out, err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return out, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".spool-*")
	if err != nil {
		return out, err
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing
	bw := bufio.NewWriterSize(tmp, 1<<20)
	cw := &countWriter{w: bw}
	w, err := age.Encrypt(cw, r)
	if err != nil {
		tmp.Close()
		return out, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), &ctxReader{ctx: ctx, r: in, read: read})
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return out, err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return out, err
	}
	return Encrypted{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n, CipherSize: cw.n}, nil
}

// Decrypted is the plaintext DecryptFile wrote.
type Decrypted struct {
	SHA256 string
	Size   int64
}

// DecryptFile decrypts the age file src into w (streaming, each 64 KiB chunk
// authenticated before it is written). It stops when ctx ends; read (may be nil) counts
// the ciphertext bytes read.
func DecryptFile(ctx context.Context, src string, w io.Writer, read func(int), ids ...age.Identity) (Decrypted, error) {
	f, err := os.Open(src)
	if err != nil {
		return Decrypted{}, err
	}
	defer f.Close()
	return DecryptReader(bufio.NewReaderSize(&ctxReader{ctx: ctx, r: f, read: read}, 1<<20), w, ids...)
}

// DecryptReader decrypts the age file that src reads into w (streaming, each 64 KiB
// chunk authenticated before it is written).
func DecryptReader(src io.Reader, w io.Writer, ids ...age.Identity) (Decrypted, error) {
	r, err := age.Decrypt(src, ids...)
	if err != nil {
		return Decrypted{}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), r)
	if err != nil {
		return Decrypted{}, err
	}
	return Decrypted{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// StanzaTypes are the recipient stanza types of the age file that r begins with
// ("X25519", "scrypt", …).
func StanzaTypes(r io.Reader) ([]string, error) {
	hdr, err := age.ExtractHeader(r)
	if err != nil {
		return nil, err
	}
	var types []string
	for line := range strings.Lines(string(hdr)) {
		if rest, ok := strings.CutPrefix(line, "-> "); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				types = append(types, f[0])
			}
		}
	}
	return types, nil
}

// ErrWrongKey says no identity given opens the file.
var ErrWrongKey = errors.New("wrong key")

// IsWrongKey says err is age's "no identity matched" (a wrong key or passphrase).
func IsWrongKey(err error) bool {
	var nm *age.NoIdentityMatchError
	return errors.As(err, &nm) || errors.Is(err, ErrWrongKey)
}

// Manifest is the plaintext of a package's encrypted manifest: each file's name, type
// and size, by the file's id.
type Manifest struct {
	Version int                     `json:"version"`
	Files   map[string]ManifestFile `json:"files"`
}

// ManifestFile is one file's entry in the manifest.
type ManifestFile struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
}

// ParseManifest reads a manifest's plaintext.
func ParseManifest(b []byte) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("the package's manifest is not JSON: %w", err)
	}
	if m.Version != 1 {
		return m, fmt.Errorf("the package's manifest has version %d, this command reads version 1", m.Version)
	}
	return m, nil
}

// ctxReader reads r until ctx ends, counting what it reads.
type ctxReader struct {
	ctx  context.Context
	r    io.Reader
	read func(int)
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	if n > 0 && c.read != nil {
		c.read(n)
	}
	return n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Seal makes an owner's sealed identity: the identity (AGE-SECRET-KEY-1…) encrypted with
// the passphrase (age's scrypt), ASCII-armored, as PUT /api/v1/me/key takes it.
func Seal(identity, passphrase string) (string, error) {
	r, err := age.NewScryptRecipient(passphrase)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	aw := armor.NewWriter(&buf)
	w, err := age.Encrypt(aw, r)
	if err != nil {
		return "", err
	}
	if _, err := io.WriteString(w, identity+"\n"); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	if err := aw.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// Unseal opens a sealed identity with the passphrase and returns the X25519 identity
// inside (a wrong passphrase: IsWrongKey).
func Unseal(sealed, passphrase string) (*age.X25519Identity, error) {
	id, err := age.NewScryptIdentity(passphrase)
	if err != nil {
		return nil, err
	}
	r, err := age.Decrypt(armor.NewReader(strings.NewReader(sealed)), id)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(r, 64<<10))
	if err != nil {
		return nil, err
	}
	ids, err := age.ParseIdentities(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("the sealed key holds no age identity: %w", err)
	}
	for _, i := range ids {
		if x, ok := i.(*age.X25519Identity); ok {
			return x, nil
		}
	}
	return nil, errors.New("the sealed key holds no X25519 identity")
}

// RecipientOf is the public key (age1…) of an X25519 identity.
func RecipientOf(id age.Identity) string {
	if x, ok := id.(*age.X25519Identity); ok {
		return x.Recipient().String()
	}
	return ""
}
