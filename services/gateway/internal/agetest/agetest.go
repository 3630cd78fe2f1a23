// Package agetest makes owners' sealed identities (docs/ENCRYPTION.md)
// for the gateway's tests.
package agetest

import (
	"bytes"
	"io"
	"testing"

	"filippo.io/age"
	"filippo.io/age/armor"
)

// Seal encrypts identity to r, ASCII-armored: with a passphrase's recipient, a sealed
// identity as PUT /api/v1/me/key takes it.
func Seal(t testing.TB, identity *age.X25519Identity, r age.Recipient) string {
	t.Helper()
	var out bytes.Buffer
	aw := armor.NewWriter(&out)
	w, err := age.Encrypt(aw, r)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(w, identity.String())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// SealWithPassphrase seals identity with passphrase as the browser does (age scrypt,
// armored), with a low work factor: fast in tests, where the browser uses age's default.
func SealWithPassphrase(t testing.TB, identity *age.X25519Identity, passphrase string) string {
	t.Helper()
	r, err := age.NewScryptRecipient(passphrase)
	if err != nil {
		t.Fatal(err)
	}
	r.SetWorkFactor(10)
	return Seal(t, identity, r)
}
