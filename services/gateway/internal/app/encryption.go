package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"
	"github.com/google/uuid"
)

// End-to-end encryption with age (docs/ENCRYPTION.md): the server
// stores and serves ciphertext only. What it checks is the format (every object, the
// manifests and the sealed identity are age v1 files), never the contents.

// Encryption is how a package's files are stored.
type Encryption string

// The encryptions: none (the server stores the files as sent) or age (every file is
// an age v1 file the client encrypted before sending it).
const (
	EncryptionNone Encryption = "none"
	EncryptionAge  Encryption = "age"
)

// Encrypted reports whether the package is end-to-end encrypted.
func (p Package) Encrypted() bool { return p.Encryption == EncryptionAge }

// AgeMagic is how every binary age v1 file starts.
const AgeMagic = "age-encryption.org/v1\n"

// Size limits of what the server keeps for encrypted packages.
const (
	MaxPackageManifest = 1 << 20 // the package manifest (an age file)
	MaxFileManifest    = 8 << 10 // a request upload's own manifest entry, decoded
	MaxSealedIdentity  = 4 << 10 // the armored, passphrase-sealed private key
)

// ErrNotAge answers an upload to an encrypted package that is not an age file.
var ErrNotAge = Invalid("this package is end-to-end encrypted: the file must be a binary age v1 file (starting with %q), encrypted before it is sent", strings.TrimSuffix(AgeMagic, "\n"))

// ErrEncryptedArchive answers the archive of an encrypted package: the server cannot
// name its files, and the page zips them in the browser.
var ErrEncryptedArchive = Conflict("this package is end-to-end encrypted: the server cannot build its archive; download the files one by one and decrypt them (the recipient's page zips them in the browser)")

// ErrNoKey answers the creation of an encrypted file request by an owner without a key.
var ErrNoKey = Invalid("set up your encryption key first (PUT /api/v1/me/key)")

// EncryptedFileName is the neutral name of the n-th file an encrypted package records.
func EncryptedFileName(n int) string { return fmt.Sprintf("file-%d.age", n) }

// AsRecorded is f as its package p records it, once p has counted it (FileSeq): a file
// of an encrypted package gets a neutral name and type, whatever the client sent, and
// is not scanned (the scanner sees ciphertext only). The package's transaction and the
// store both apply it, so the row, the event and the answer agree.
func AsRecorded(f File, p Package) File {
	if !p.Encrypted() {
		return f
	}
	f.Encrypted = true
	f.Filename = EncryptedFileName(p.FileSeq)
	f.ContentType = "application/octet-stream"
	f.Scan = ScanSkipped
	return f
}

// CheckAgeChunk checks the bytes of an upload's body that fall within the age magic
// (the body starts at offset of the file) and returns a reader of the whole body. Bytes
// past the magic are not looked at; a body that fails before the magic's end is left
// for the caller to see as it would without the check.
func CheckAgeChunk(offset int64, body io.Reader) (io.Reader, error) {
	if offset >= int64(len(AgeMagic)) {
		return body, nil
	}
	want := AgeMagic[offset:]
	got := make([]byte, len(want))
	n, err := io.ReadFull(body, got)
	got = got[:n]
	if !bytes.Equal(got, []byte(want[:n])) {
		return nil, ErrNotAge
	}
	switch {
	case err == nil:
		return io.MultiReader(bytes.NewReader(got), body), nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return bytes.NewReader(got), nil
	default:
		return io.MultiReader(bytes.NewReader(got), errReader{err}), nil
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// CheckAgeUpload wraps a whole upload's body: the magic is checked before anything is
// stored, and a body that ends before the magic's end is no age file either.
func CheckAgeUpload(body io.Reader) (io.Reader, error) {
	head := make([]byte, len(AgeMagic))
	n, err := io.ReadFull(body, head)
	ended := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	if !bytes.Equal(head[:n], []byte(AgeMagic[:n])) || (n < len(head) && ended) {
		return nil, ErrNotAge
	}
	if err != nil { // the body failed: the upload says so as it would without the check
		return io.MultiReader(bytes.NewReader(head[:n]), errReader{err}), nil
	}
	return io.MultiReader(bytes.NewReader(head), body), nil
}

// ParseFileManifest decodes an upload's own manifest entry (tus metadata `manifest`, or
// the multipart field): the standard base64 of an age file of at most MaxFileManifest
// bytes. The raw age file is taken too (a tus client that put the bytes themselves in
// the metadata, which tus base64-encodes already).
func ParseFileManifest(s string) ([]byte, error) {
	var b []byte
	if strings.HasPrefix(s, AgeMagic) {
		b = []byte(s)
	} else {
		var err error
		if b, err = base64.StdEncoding.DecodeString(strings.TrimSpace(s)); err != nil {
			return nil, Invalid("manifest must be the standard base64 of an age file")
		}
	}
	if len(b) > MaxFileManifest {
		return nil, Invalid("manifest must be at most %d bytes (decoded)", MaxFileManifest)
	}
	if !bytes.HasPrefix(b, []byte(AgeMagic)) {
		return nil, Invalid("manifest must be an age v1 file (encrypted to the owner's public key)")
	}
	return b, nil
}

// CheckFileManifest says whether an upload to p may carry a manifest entry: only the
// uploads of an encrypted file request do (an outbound package's files are named by
// the package manifest).
func CheckFileManifest(p Package, manifest []byte) error {
	if manifest == nil {
		return nil
	}
	if !p.Encrypted() || p.Direction != Inbound {
		return Invalid("manifest is only for uploads to an end-to-end encrypted file request")
	}
	return nil
}

// UserKey is a user's age key pair for file requests: the public key uploads are
// encrypted to, and the private key sealed with the user's passphrase.
type UserKey struct {
	UserID         int64
	PublicKey      string // age1…
	SealedIdentity string // an ASCII-armored age file with one scrypt stanza
	CreatedAt      time.Time
}

// EncryptionStore is the persistence of encrypted packages' manifests and users' keys.
type EncryptionStore interface {
	// PutPackageManifest stores (or replaces) the package's manifest in the package's
	// transaction, after check (the package's state) and with its effects.
	PutPackageManifest(ctx context.Context, id uuid.UUID, data []byte, check func(p *Package) (Effects, error)) error
	// GetPackageManifest returns the package's manifest (ErrNotFound: none).
	GetPackageManifest(ctx context.Context, id uuid.UUID) ([]byte, error)
	// PutUserKey stores (or replaces) the user's key and, in the same transaction,
	// writes audit (its detail says whether the key was set or replaced) and the
	// user's "your encryption key was changed" e-mail.
	PutUserKey(ctx context.Context, k UserKey, audit AuditEntry) (UserKey, error)
	// GetUserKey returns the user's key (ErrNotFound: none).
	GetUserKey(ctx context.Context, userID int64) (UserKey, error)
}

// ValidateEncryption checks a package's encryption as sent on create.
func ValidateEncryption(e string) (Encryption, error) {
	switch Encryption(e) {
	case EncryptionNone, EncryptionAge:
		return Encryption(e), nil
	}
	return "", Invalid("encryption must be none or age")
}

// ValidateUserKey checks a key pair as PUT /api/v1/me/key takes it: an age X25519
// recipient, and an ASCII-armored age file of at most MaxSealedIdentity bytes whose
// header's one stanza is scrypt (the private key sealed with a passphrase).
func ValidateUserKey(publicKey, sealedIdentity string) error {
	if _, err := age.ParseX25519Recipient(publicKey); err != nil {
		return Invalid("public_key must be an age X25519 public key (age1…)")
	}
	if sealedIdentity == "" {
		return Invalid("sealed_identity is required: the private key as an ASCII-armored age file sealed with a passphrase")
	}
	if len(sealedIdentity) > MaxSealedIdentity {
		return Invalid("sealed_identity must be at most %d bytes", MaxSealedIdentity)
	}
	if !strings.HasPrefix(strings.TrimLeft(sealedIdentity, " \t\r\n"), armor.Header) {
		return Invalid("sealed_identity must be an ASCII-armored age file (%s)", armor.Header)
	}
	raw, err := io.ReadAll(io.LimitReader(armor.NewReader(strings.NewReader(sealedIdentity)), MaxSealedIdentity))
	if err != nil {
		return Invalid("sealed_identity is not a valid ASCII-armored age file")
	}
	if !onlyScrypt(raw) {
		return Invalid("sealed_identity must be sealed with a passphrase: its age header's one stanza must be scrypt")
	}
	return nil
}

// onlyScrypt reports whether an age file's header has exactly one stanza, scrypt.
func onlyScrypt(file []byte) bool {
	if !bytes.HasPrefix(file, []byte(AgeMagic+"-> scrypt ")) {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(file))
	stanzas := 0
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "-> "):
			stanzas++
		case strings.HasPrefix(line, "---"):
			return stanzas == 1
		}
	}
	return false
}
