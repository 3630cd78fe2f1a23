package app

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"

	"filippo.io/age"
	"filippo.io/age/armor"

	"github.com/shipfile/shipfile/services/gateway/internal/agetest"
)

func TestCheckAgeChunk(t *testing.T) {
	file := []byte(AgeMagic + "-> X25519 abc\n")
	for _, c := range []struct {
		name   string
		offset int64
		chunk  []byte
		ok     bool
	}{
		{"whole file", 0, file, true},
		{"first bytes only", 0, file[:5], true},
		{"middle of the magic", 7, file[7:12], true},
		{"rest of the magic and more", 7, file[7:], true},
		{"past the magic: not looked at", int64(len(AgeMagic)), []byte("anything"), true},
		{"plaintext", 0, []byte("hello, world, in plain text"), false},
		{"armored", 0, []byte(armor.Header + "\n"), false},
		{"wrong byte in the middle", 7, []byte("encryption.org/v2\n"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := CheckAgeChunk(c.offset, bytes.NewReader(c.chunk))
			if !c.ok {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("err = %v, want 422", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(r)
			if !bytes.Equal(got, c.chunk) {
				t.Fatalf("the reader gives %q, want the chunk back %q", got, c.chunk)
			}
		})
	}
	// A whole upload must hold the whole magic.
	if _, err := CheckAgeUpload(strings.NewReader(AgeMagic[:10])); !errors.Is(err, ErrInvalid) {
		t.Fatalf("short upload: err = %v, want 422", err)
	}
	r, err := CheckAgeUpload(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(r); !bytes.Equal(got, file) {
		t.Fatalf("upload reads back %q", got)
	}
}

func TestParseFileManifest(t *testing.T) {
	file := []byte(AgeMagic + "-> X25519 abc\n--- mac\nbody")
	for _, in := range []string{base64.StdEncoding.EncodeToString(file), string(file)} {
		got, err := ParseFileManifest(in)
		if err != nil || !bytes.Equal(got, file) {
			t.Fatalf("ParseFileManifest = %q, %v", got, err)
		}
	}
	for name, in := range map[string]string{
		"not base64": "not base64 at all!",
		"not age":    base64.StdEncoding.EncodeToString([]byte(`{"name":"a.pdf"}`)),
		"too large":  base64.StdEncoding.EncodeToString(append([]byte(AgeMagic), make([]byte, MaxFileManifest)...)),
	} {
		if _, err := ParseFileManifest(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want 422", name, err)
		}
	}
}

func TestValidateUserKey(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	good := agetest.SealWithPassphrase(t, id, "a passphrase")
	if err := ValidateUserKey(id.Recipient().String(), good); err != nil {
		t.Fatalf("a valid key pair: %v", err)
	}
	for name, c := range map[string][2]string{
		"bad public key":      {"age1xyz", good},
		"secret key":          {id.String(), good},
		"sealed to a key":     {id.Recipient().String(), agetest.Seal(t, id, id.Recipient())},
		"not armored":         {id.Recipient().String(), "-----BEGIN SOMETHING-----\nabc\n-----END SOMETHING-----\n"},
		"bare identity":       {id.Recipient().String(), id.String()},
		"empty":               {id.Recipient().String(), ""},
		"over the size limit": {id.Recipient().String(), good + strings.Repeat(" ", MaxSealedIdentity)},
	} {
		if err := ValidateUserKey(c[0], c[1]); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want 422", name, err)
		}
	}
}

func TestAsRecorded(t *testing.T) {
	f := File{Filename: "secret.pdf", ContentType: "application/pdf", Scan: ScanPending}
	if got := AsRecorded(f, Package{Encryption: EncryptionNone, FileSeq: 3}); got.Filename != "secret.pdf" || got.Encrypted || got.Scan != ScanPending {
		t.Fatalf("plain package: %+v", got)
	}
	got := AsRecorded(f, Package{Encryption: EncryptionAge, FileSeq: 3})
	if got.Filename != "file-3.age" || got.ContentType != "application/octet-stream" || !got.Encrypted || got.Scan != ScanSkipped {
		t.Fatalf("encrypted package: %+v", got)
	}
}
