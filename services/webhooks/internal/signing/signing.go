// Package signing computes and checks the signatures of webhook requests: the seed's
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
