// Package secretbox encrypts small secrets for storage (webhook signing secrets in
// PostgreSQL) with AES-256-GCM under a keyring: the current key seals, the current and
// the previous key open, so a key can be rotated while every row is re-sealed.
//
// A sealed value is text, recognizable by its prefix:
//
//	sbx1:<key id, 8 hex digits>:<base64url, no padding, of nonce (12 bytes) ‖ ciphertext ‖ tag>
//
// The key id is derived from the key (it reveals nothing of it) and says which key of
// the ring opens the value; "sbx1:<key id>:" is the GCM additional data, so a value
// cannot be moved under another header. A value without the prefix is plaintext
// written before encryption was turned on: Open returns it as it is, and Reseal seals it.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Prefix starts every sealed value (the format's version is its "1").
const Prefix = "sbx1:"

// KeySize is the length of a key: 32 random bytes (AES-256).
const KeySize = 32

// Environment variables of the keyring (Config).
const (
	EnvKey         = "SHIPFILE_SECRET_KEY"
	EnvKeyPrevious = "SHIPFILE_SECRET_KEY_PREVIOUS"
)

const (
	idLen    = 8 // hex digits of a key id
	nonceLen = 12
	tagLen   = 16
)

// Errors of Open and Reseal.
var (
	// ErrUnknownKey: the value was sealed under a key that is in neither slot of the ring.
	ErrUnknownKey = errors.New("secretbox: sealed under a key that is neither " + EnvKey + " nor " + EnvKeyPrevious)
	// ErrMalformed: the value has the prefix but is not a sealed value, or was altered.
	ErrMalformed = errors.New("secretbox: malformed or altered sealed value")
)

// Config is the keyring part of a service's configuration; both keys are base64 of
// 32 random bytes (`openssl rand -base64 32`).
type Config struct {
	Key         string `env:"SHIPFILE_SECRET_KEY" secret:"true" help:"base64 of 32 random bytes: the key webhook secrets are stored encrypted under (required; openssl rand -base64 32)"`
	KeyPrevious string `env:"SHIPFILE_SECRET_KEY_PREVIOUS" secret:"true" help:"the key before the last rotation: values sealed under it are still read, and re-sealed under SHIPFILE_SECRET_KEY at start (optional)"`
}

// Keyring builds the ring of c. Without SHIPFILE_SECRET_KEY it fails with an error
// that says how to make one; the error never contains a key.
func (c Config) Keyring() (*Keyring, error) {
	if strings.TrimSpace(c.Key) == "" {
		return nil, fmt.Errorf("%s is not set: webhook secrets are stored encrypted under it; "+
			"set it to base64 of 32 random bytes (openssl rand -base64 32), the same in every gateway and webhook dispatcher", EnvKey)
	}
	cur, err := ParseKey(c.Key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvKey, err)
	}
	var prev []byte
	if strings.TrimSpace(c.KeyPrevious) != "" {
		if prev, err = ParseKey(c.KeyPrevious); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKeyPrevious, err)
		}
	}
	return New(cur, prev)
}

// ParseKey decodes a key written as base64 (standard or URL alphabet, padded or not)
// of exactly KeySize bytes.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("the key is %d bytes; it must be base64 of exactly %d random bytes", len(b), KeySize)
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("the key is not base64; it must be base64 of %d random bytes", KeySize)
}

// key is one slot of a ring.
type key struct {
	id   string
	aead cipher.AEAD
}

func newKey(b []byte) (*key, error) {
	if len(b) != KeySize {
		return nil, fmt.Errorf("secretbox: a key is %d bytes, got %d", KeySize, len(b))
	}
	block, err := aes.NewCipher(b)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &key{id: KeyID(b), aead: aead}, nil
}

// KeyID names a key in sealed values: 8 hex digits of a SHA-256 of a fixed label and
// the key, which say nothing of the key itself.
func KeyID(k []byte) string {
	h := sha256.New()
	h.Write([]byte("shipfile secretbox key id\x00"))
	h.Write(k)
	return hex.EncodeToString(h.Sum(nil))[:idLen]
}

// Keyring seals under its current key and opens what its current or previous key
// sealed. It is safe for concurrent use.
type Keyring struct {
	current  *key
	previous *key // nil when there is none
}

// New returns a ring with the current key and, when previous is not empty, the key of
// the last rotation.
func New(current, previous []byte) (*Keyring, error) {
	cur, err := newKey(current)
	if err != nil {
		return nil, err
	}
	r := &Keyring{current: cur}
	if len(previous) > 0 {
		if r.previous, err = newKey(previous); err != nil {
			return nil, err
		}
		if r.previous.id == cur.id {
			r.previous = nil // the same key twice
		}
	}
	return r, nil
}

// CurrentID is the id of the key that seals.
func (r *Keyring) CurrentID() string { return r.current.id }

// Seal encrypts plaintext under the current key with a fresh random nonce.
func (r *Keyring) Seal(plaintext string) (string, error) {
	header := Prefix + r.current.id + ":"
	nonce := make([]byte, nonceLen, nonceLen+len(plaintext)+tagLen)
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("secretbox: nonce: %w", err)
	}
	sealed := r.current.aead.Seal(nonce, nonce, []byte(plaintext), []byte(header))
	return header + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// IsSealed reports whether value is a sealed value (rather than legacy plaintext).
func IsSealed(value string) bool { return strings.HasPrefix(value, Prefix) }

// Open decrypts a sealed value with the key its id names. A value without Prefix is
// legacy plaintext and is returned as it is.
func (r *Keyring) Open(value string) (string, error) {
	if !IsSealed(value) {
		return value, nil
	}
	id, body, ok := strings.Cut(value[len(Prefix):], ":")
	if !ok || len(id) != idLen {
		return "", ErrMalformed
	}
	k := r.byID(id)
	if k == nil {
		return "", ErrUnknownKey
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(raw) < nonceLen+tagLen {
		return "", ErrMalformed
	}
	plain, err := k.aead.Open(nil, raw[:nonceLen], raw[nonceLen:], []byte(Prefix+id+":"))
	if err != nil {
		return "", ErrMalformed
	}
	return string(plain), nil
}

// Current reports whether value is sealed under the current key.
func (r *Keyring) Current(value string) bool {
	return strings.HasPrefix(value, Prefix+r.current.id+":")
}

// Reseal returns value sealed under the current key, and whether that changed it: a
// value already sealed under the current key comes back as it is; plaintext and
// values of the previous key are sealed anew.
func (r *Keyring) Reseal(value string) (string, bool, error) {
	if r.Current(value) {
		return value, false, nil
	}
	plain, err := r.Open(value)
	if err != nil {
		return "", false, err
	}
	sealed, err := r.Seal(plain)
	if err != nil {
		return "", false, err
	}
	return sealed, true, nil
}

func (r *Keyring) byID(id string) *key {
	switch {
	case id == r.current.id:
		return r.current
	case r.previous != nil && id == r.previous.id:
		return r.previous
	}
	return nil
}

// String never shows a key.
func (r *Keyring) String() string {
	if r.previous != nil {
		return "secretbox.Keyring{current: " + r.current.id + ", previous: " + r.previous.id + "}"
	}
	return "secretbox.Keyring{current: " + r.current.id + "}"
}
