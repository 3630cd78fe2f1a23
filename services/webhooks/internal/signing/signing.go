// Package signing computes and checks the signatures of webhook requests:
// X-Service-Signature (sha256=<hex HMAC-SHA256 of the raw body>, keyed by the whole
// secret string) and the Standard Webhooks webhook-signature (v1,<base64 HMAC-SHA256 of
// "{id}.{timestamp}.{body}">, keyed by the base64-decoded part of the secret after
// "whsec_").
package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"
)

// Prefixes of secrets and signature values.
const (
	// SecretPrefix starts every subscription secret: whsec_ + base64 of 32 random bytes.
	SecretPrefix = "whsec_"
	// ServicePrefix starts the X-Service-Signature value.
	ServicePrefix = "sha256="
	// StandardVersion starts each signature of webhook-signature.
	StandardVersion = "v1,"
)

// Service returns the X-Service-Signature value of body: "sha256=" and the lowercase hex
// HMAC-SHA256 of the exact body bytes, keyed by the bytes of the whole secret string.
func Service(secret string, body []byte) string {
	return ServicePrefix + hex.EncodeToString(mac([]byte(secret), body))
}

// VerifyService reports whether header is a valid X-Service-Signature of body under
// secret, comparing in constant time. A header that does not start with "sha256=" is
// invalid.
func VerifyService(secret string, body []byte, header string) bool {
	digest, ok := strings.CutPrefix(header, ServicePrefix)
	if !ok {
		return false
	}
	got, err := hex.DecodeString(digest)
	if err != nil {
		return false
	}
	return hmac.Equal(got, mac([]byte(secret), body))
}

// StandardKey returns the HMAC key of the Standard Webhooks signature: the base64
// decoding of what follows "whsec_". A secret that is not of that form (the gateway
// never makes one) is used as it is, so its receivers can still verify with its bytes.
func StandardKey(secret string) []byte {
	raw := strings.TrimPrefix(secret, SecretPrefix)
	if key, err := base64.StdEncoding.DecodeString(raw); err == nil && len(key) > 0 {
		return key
	}
	return []byte(raw)
}

// Standard returns one Standard Webhooks signature, "v1," and the base64 (standard
// alphabet, padded) HMAC-SHA256 of "{id}.{timestamp}.{body}" keyed by StandardKey(secret).
func Standard(secret, id string, timestamp int64, body []byte) string {
	return StandardVersion + base64.StdEncoding.EncodeToString(mac(StandardKey(secret), standardContent(id, timestamp, body)))
}

// StandardHeader returns the webhook-signature value: the signature of each non-empty
// secret, in order, separated by single spaces (the current secret first, then the
// previous one while a rotation is in its grace period).
func StandardHeader(id string, timestamp int64, body []byte, secrets ...string) string {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		if s != "" {
			sigs = append(sigs, Standard(s, id, timestamp, body))
		}
	}
	return strings.Join(sigs, " ")
}

// VerifyStandard reports whether any v1 signature in header (space separated) is the
// signature of id, timestamp and body under secret, comparing in constant time. It does
// not judge the timestamp's age; a receiver should also refuse stale timestamps.
func VerifyStandard(secret, id string, timestamp int64, body []byte, header string) bool {
	want := mac(StandardKey(secret), standardContent(id, timestamp, body))
	ok := false
	for sig := range strings.FieldsSeq(header) {
		b64, found := strings.CutPrefix(sig, StandardVersion)
		if !found {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			ok = true
		}
	}
	return ok
}

// Signer makes the signatures of one secret. Made once per secret (a subscription's),
// it keeps the secret's two keyed HMAC-SHA256 states, so each signature clones a state
// instead of decoding the key and hashing its pads again, and writes its parts into the
// HMAC instead of joining them into one buffer. Its signatures are those of Service and
// Standard. Safe for concurrent use.
type Signer struct {
	secret            string
	service, standard hash.Cloner // nil when the HMAC cannot be cloned: made anew each time
}

// NewSigner returns the Signer of secret.
func NewSigner(secret string) *Signer {
	return &Signer{secret: secret, service: keyed([]byte(secret)), standard: keyed(StandardKey(secret))}
}

// keyed returns an HMAC-SHA256 keyed by key, to be cloned; nil if it cannot be.
func keyed(key []byte) hash.Cloner {
	h := hmac.New(sha256.New, key)
	// Reset saves the keyed states, so each clone's Sum restores them instead of
	// hashing the pads. The template itself is never written to.
	h.Reset()
	c, ok := h.(hash.Cloner)
	if !ok {
		return nil
	}
	if _, err := c.Clone(); err != nil {
		return nil
	}
	return c
}

// hmacOf returns a fresh HMAC keyed like template (key when template is nil).
func hmacOf(template hash.Cloner, key func() []byte) hash.Hash {
	if template != nil {
		if c, err := template.Clone(); err == nil {
			if h, ok := c.(hash.Hash); ok {
				return h
			}
		}
	}
	return hmac.New(sha256.New, key())
}

// Service returns the X-Service-Signature value of body (see the function Service).
func (s *Signer) Service(body []byte) string {
	h := hmacOf(s.service, func() []byte { return []byte(s.secret) })
	h.Write(body)
	var sum [sha256.Size]byte
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], h.Sum(sum[:0]))
	var b strings.Builder
	b.Grow(len(ServicePrefix) + len(hx))
	b.WriteString(ServicePrefix)
	b.Write(hx[:])
	return b.String()
}

// Standard returns the Standard Webhooks signature of id, timestamp and body (see the
// function Standard).
func (s *Signer) Standard(id string, timestamp int64, body []byte) string {
	h := hmacOf(s.standard, func() []byte { return StandardKey(s.secret) })
	var pre [96]byte
	p := append(pre[:0], id...)
	p = append(p, '.')
	p = strconv.AppendInt(p, timestamp, 10)
	h.Write(append(p, '.'))
	h.Write(body)
	var sum [sha256.Size]byte
	var b64 [44]byte // base64 of 32 bytes, padded
	base64.StdEncoding.Encode(b64[:], h.Sum(sum[:0]))
	var b strings.Builder
	b.Grow(len(StandardVersion) + len(b64))
	b.WriteString(StandardVersion)
	b.Write(b64[:])
	return b.String()
}

func standardContent(id string, timestamp int64, body []byte) []byte {
	ts := strconv.FormatInt(timestamp, 10)
	b := make([]byte, 0, len(id)+len(ts)+len(body)+2)
	b = append(b, id...)
	b = append(b, '.')
	b = append(b, ts...)
	b = append(b, '.')
	return append(b, body...)
}

func mac(key, msg []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	return h.Sum(nil)
}
