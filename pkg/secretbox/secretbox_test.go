package secretbox_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/secretbox"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, secretbox.KeySize) }

func ring(t *testing.T, cur, prev []byte) *secretbox.Keyring {
	t.Helper()
	r, err := secretbox.New(cur, prev)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSealOpen(t *testing.T) {
	r := ring(t, key(1), nil)
	for _, plain := range []string{"", "whsec_abc", strings.Repeat("x", 1000), "ünïcødé"} {
		sealed, err := r.Seal(plain)
		if err != nil {
			t.Fatal(err)
		}
		if !secretbox.IsSealed(sealed) || !r.Current(sealed) {
			t.Fatalf("%q: not recognized as sealed under the current key", sealed)
		}
		if plain != "" && strings.Contains(sealed, plain) {
			t.Fatalf("the plaintext shows in %q", sealed)
		}
		got, err := r.Open(sealed)
		if err != nil || got != plain {
			t.Fatalf("Open(Seal(%q)) = %q, %v", plain, got, err)
		}
	}
	a, _ := r.Seal("same")
	b, _ := r.Seal("same")
	if a == b {
		t.Fatal("two seals of one plaintext are equal: the nonce is not fresh")
	}
}

// TestKeyID pins the key id of a known key: docs/OPERATIONS.md computes it with
// sha256sum, and values sealed under it name it.
func TestKeyID(t *testing.T) {
	if got := secretbox.KeyID(key(1)); got != "4e94a579" {
		t.Fatalf("KeyID = %s, want 4e94a579", got)
	}
	sealed, _ := ring(t, key(1), nil).Seal("x")
	if !strings.HasPrefix(sealed, "sbx1:4e94a579:") {
		t.Fatalf("sealed value %q does not start with sbx1:4e94a579:", sealed)
	}
}

func TestOpenPlaintextPassesThrough(t *testing.T) {
	r := ring(t, key(1), nil)
	got, err := r.Open("whsec_legacy")
	if err != nil || got != "whsec_legacy" {
		t.Fatalf("Open(plaintext) = %q, %v", got, err)
	}
	if secretbox.IsSealed("whsec_legacy") || r.Current("whsec_legacy") {
		t.Fatal("plaintext taken for a sealed value")
	}
}

func TestRotation(t *testing.T) {
	old := ring(t, key(1), nil)
	sealedOld, _ := old.Seal("s3cret")

	// The new key seals; the old one still opens.
	rotated := ring(t, key(2), key(1))
	if got, err := rotated.Open(sealedOld); err != nil || got != "s3cret" {
		t.Fatalf("previous key: %q, %v", got, err)
	}
	resealed, changed, err := rotated.Reseal(sealedOld)
	if err != nil || !changed || !rotated.Current(resealed) {
		t.Fatalf("Reseal(previous) = %q, %v, %v", resealed, changed, err)
	}
	again, changed, err := rotated.Reseal(resealed)
	if err != nil || changed || again != resealed {
		t.Fatalf("Reseal(current) changed the value: %v %v", changed, err)
	}
	plain, changed, err := rotated.Reseal("whsec_plain")
	if err != nil || !changed || !rotated.Current(plain) {
		t.Fatalf("Reseal(plaintext) = %q, %v, %v", plain, changed, err)
	}

	// During a rollout the old instances run with the new key as previous.
	staged := ring(t, key(1), key(2))
	if got, err := staged.Open(resealed); err != nil || got != "s3cret" {
		t.Fatalf("an instance with the new key as previous: %q, %v", got, err)
	}

	// Once the previous key is dropped, its values no longer open.
	if _, err := ring(t, key(2), nil).Open(sealedOld); !errors.Is(err, secretbox.ErrUnknownKey) {
		t.Fatalf("Open under a dropped key: %v, want ErrUnknownKey", err)
	}
	if _, _, err := ring(t, key(3), nil).Reseal(sealedOld); !errors.Is(err, secretbox.ErrUnknownKey) {
		t.Fatalf("Reseal under an unknown key: %v, want ErrUnknownKey", err)
	}
}

func TestOpenRefusesAlteredValues(t *testing.T) {
	r := ring(t, key(1), key(2))
	sealed, _ := r.Seal("s3cret")
	other, _ := ring(t, key(2), nil).Seal("s3cret")
	id := r.CurrentID()
	body := strings.TrimPrefix(sealed, secretbox.Prefix+id+":")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	flipped := append([]byte(nil), raw...)
	flipped[len(flipped)-1] ^= 1
	cases := map[string]string{
		"flipped tag":       secretbox.Prefix + id + ":" + base64.RawURLEncoding.EncodeToString(flipped),
		"truncated":         secretbox.Prefix + id + ":" + body[:10],
		"not base64":        secretbox.Prefix + id + ":!!!!",
		"no key id":         secretbox.Prefix + body,
		"short key id":      secretbox.Prefix + "abc:" + body,
		"moved under a key": secretbox.Prefix + secretbox.KeyID(key(2)) + ":" + body,
		"body of another":   secretbox.Prefix + id + ":" + other[len(secretbox.Prefix)+9:],
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			if got, err := r.Open(v); err == nil {
				t.Fatalf("Open(%q) = %q, want an error", v, got)
			}
		})
	}
}

func TestConfigKeyring(t *testing.T) {
	k1 := base64.StdEncoding.EncodeToString(key(1))
	k2 := base64.RawURLEncoding.EncodeToString(key(2))
	cases := []struct {
		name    string
		cfg     secretbox.Config
		wantErr string
	}{
		{"missing", secretbox.Config{}, "SHIPFILE_SECRET_KEY is not set"},
		{"blank", secretbox.Config{Key: "  "}, "SHIPFILE_SECRET_KEY is not set"},
		{"not base64", secretbox.Config{Key: "not a key!"}, "not base64"},
		{"short", secretbox.Config{Key: base64.StdEncoding.EncodeToString([]byte("short"))}, "must be base64 of exactly 32"},
		{"bad previous", secretbox.Config{Key: k1, KeyPrevious: "xx"}, "SHIPFILE_SECRET_KEY_PREVIOUS"},
		{"current", secretbox.Config{Key: k1}, ""},
		{"both, URL alphabet", secretbox.Config{Key: k1, KeyPrevious: k2}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := c.cfg.Keyring()
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
			}
			if r != nil {
				t.Fatal("a ring came back with the error")
			}
			if c.cfg.Key != "" && strings.TrimSpace(c.cfg.Key) != "" && strings.Contains(err.Error(), c.cfg.Key) {
				t.Fatal("the error shows the key")
			}
		})
	}
}

func TestStringHidesKeys(t *testing.T) {
	k := key(7)
	r := ring(t, k, key(8))
	s := fmt.Sprint(r) + fmt.Sprintf("%v %+v", r, r)
	for _, enc := range []string{base64.StdEncoding.EncodeToString(k), string(k)} {
		if strings.Contains(s, enc) {
			t.Fatalf("%s shows the key", s)
		}
	}
}
