package app

import (
	"crypto/sha1" //nolint:gosec // the tus checksum extension's algorithm
	"crypto/sha256"
	"encoding"
	"encoding/base64"
	"testing"
)

func TestParseChecksum(t *testing.T) {
	chunk := []byte("chunk")
	s1, s256 := sha1.Sum(chunk), sha256.Sum256(chunk) //nolint:gosec // tus checksum
	for _, tc := range []struct {
		name, header string
		ok, matches  bool
	}{
		{"none", "", true, false},
		{"sha1", "sha1 " + base64.StdEncoding.EncodeToString(s1[:]), true, true},
		{"sha256", "sha256 " + base64.StdEncoding.EncodeToString(s256[:]), true, true},
		{"algorithm in capitals", "SHA256 " + base64.StdEncoding.EncodeToString(s256[:]), true, true},
		{"wrong digest", "sha256 " + base64.StdEncoding.EncodeToString(make([]byte, 32)), true, false},
		{"unknown algorithm", "md5 AAAAAAAAAAAAAAAAAAAAAA==", false, false},
		{"no digest", "sha1", false, false},
		{"not base64", "sha1 !!!", false, false},
		{"wrong length", "sha256 " + base64.StdEncoding.EncodeToString(s1[:]), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseChecksum(tc.header)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if err != nil {
				if KindOf(err) != KindBadRequest {
					t.Fatalf("kind = %v, want bad request", KindOf(err))
				}
				return
			}
			if c == nil {
				if tc.header != "" {
					t.Fatal("no checksum parsed")
				}
				return
			}
			c.h.Write(chunk)
			if c.matches() != tc.matches {
				t.Fatalf("matches = %v, want %v", c.matches(), tc.matches)
			}
		})
	}
}

// TestDigestState: the SHA-256 state saved between PATCHes continues to the same sum
// as hashing the whole file at once.
func TestDigestState(t *testing.T) {
	whole := sha256.Sum256([]byte("hello, resumable world"))
	h := sha256.New()
	h.Write([]byte("hello, "))
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r, err := restoreDigest(state)
	if err != nil {
		t.Fatal(err)
	}
	r.Write([]byte("resumable world"))
	if string(r.Sum(nil)) != string(whole[:]) {
		t.Fatal("the restored digest differs")
	}
	if _, err := restoreDigest([]byte("garbage")); err == nil {
		t.Fatal("a garbage state restored")
	}
}
