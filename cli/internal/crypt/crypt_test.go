package crypt

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"
	"filippo.io/age/armor"
)

func TestEncryptFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "plain.bin")
	plain := make([]byte, 200<<10+7)
	_, _ = rand.Read(plain)
	if err := os.WriteFile(src, plain, 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Recipient(key, "")
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "spool", "1.age")
	enc, err := EncryptFile(context.Background(), src, dst, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(plain)
	cipher, _ := os.ReadFile(dst)
	if enc.SHA256 != hex.EncodeToString(sum[:]) || enc.Size != int64(len(plain)) || enc.CipherSize != int64(len(cipher)) {
		t.Fatalf("EncryptFile: %+v (ciphertext %d bytes)", enc, len(cipher))
	}
	if !bytes.HasPrefix(cipher, []byte(Magic)) || bytes.Contains(cipher, plain[:64]) {
		t.Fatal("the spool is not an age file, or holds plaintext")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "spool", ".spool-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if types, err := StanzaTypes(bytes.NewReader(cipher)); err != nil || !slices.Equal(types, []string{"X25519"}) {
		t.Fatalf("stanzas %v %v", types, err)
	}

	id, err := IdentityOf(key)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	dec, err := DecryptFile(context.Background(), dst, &out, nil, id)
	if err != nil || !bytes.Equal(out.Bytes(), plain) || dec.SHA256 != enc.SHA256 || dec.Size != enc.Size {
		t.Fatalf("DecryptFile: %+v %v", dec, err)
	}

	// Another key: age's "no identity matched".
	other, _ := age.GenerateX25519Identity()
	_, err = DecryptFile(context.Background(), dst, io.Discard, nil, other)
	if !IsWrongKey(err) {
		t.Fatalf("another key: %v", err)
	}

	// One byte of the payload changed: the chunk fails its authentication.
	cipher[len(cipher)-100] ^= 1
	_ = os.WriteFile(dst, cipher, 0o600)
	if _, err := DecryptFile(context.Background(), dst, io.Discard, nil, id); err == nil || IsWrongKey(err) {
		t.Fatalf("a tampered file decrypted: %v", err)
	}
}

func TestEmptyFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "empty")
	_ = os.WriteFile(src, nil, 0o600)
	key, _ := NewIdentity()
	r, _ := Recipient(key, "")
	enc, err := EncryptFile(context.Background(), src, filepath.Join(dir, "e.age"), r, nil)
	if err != nil || enc.Size != 0 || enc.CipherSize == 0 {
		t.Fatalf("EncryptFile of an empty file: %+v %v", enc, err)
	}
	id, _ := IdentityOf(key)
	var out bytes.Buffer
	if dec, err := DecryptFile(context.Background(), filepath.Join(dir, "e.age"), &out, nil, id); err != nil || dec.Size != 0 || out.Len() != 0 {
		t.Fatalf("DecryptFile of an empty file: %+v %v", dec, err)
	}
}

func TestPassphrase(t *testing.T) {
	r, err := Recipient("", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	r.(*age.ScryptRecipient).SetWorkFactor(10)
	b, err := Encrypt([]byte(`{"version":1,"files":{}}`), r)
	if err != nil {
		t.Fatal(err)
	}
	if types, _ := StanzaTypes(bytes.NewReader(b)); !slices.Equal(types, []string{"scrypt"}) {
		t.Fatalf("stanzas %v", types)
	}
	id, _ := PassphraseIdentity("correct horse battery")
	p, err := Decrypt(b, id)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := ParseManifest(p); err != nil || m.Version != 1 {
		t.Fatalf("manifest %+v %v", m, err)
	}
	wrong, _ := PassphraseIdentity("wrong horse battery")
	if _, err := Decrypt(b, wrong); !IsWrongKey(err) {
		t.Fatalf("a wrong passphrase: %v", err)
	}
}

func TestSeal(t *testing.T) {
	key, _ := NewIdentity()
	sealed, err := Seal(key, "owner passphrase")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sealed, "-----BEGIN AGE ENCRYPTED FILE-----") || len(sealed) > 4096 {
		t.Fatalf("sealed: %q", sealed)
	}
	raw, _ := io.ReadAll(armor.NewReader(strings.NewReader(sealed)))
	if !bytes.HasPrefix(raw, []byte(Magic+"-> scrypt ")) {
		t.Fatalf("the sealed key's header: %.60q", raw)
	}
	id, err := Unseal(sealed, "owner passphrase")
	if err != nil || id.String() != key {
		t.Fatalf("Unseal: %v", err)
	}
	if _, err := Unseal(sealed, "another passphrase"); !IsWrongKey(err) {
		t.Fatalf("a wrong passphrase: %v", err)
	}
}
