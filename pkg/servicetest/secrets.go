package servicetest

import (
	"crypto/sha256"
	"encoding/base64"
	"testing"

	"github.com/shipfile/shipfile/pkg/secretbox"
)

// SecretKey is the SHIPFILE_SECRET_KEY of services under test: base64 of 32 bytes
// derived from a fixed label, known to every test (and so good for nothing else).
var SecretKey = func() string {
	k := sha256.Sum256([]byte("shipfile servicetest SHIPFILE_SECRET_KEY"))
	return base64.StdEncoding.EncodeToString(k[:])
}()

// SecretKeyEnv is SecretKey as an environment entry for StartProcess.
var SecretKeyEnv = secretbox.EnvKey + "=" + SecretKey

// Keyring returns the keyring of SecretKey, which seals and opens what the services
// under test store.
func Keyring(t testing.TB) *secretbox.Keyring {
	t.Helper()
	r, err := secretbox.Config{Key: SecretKey}.Keyring()
	if err != nil {
		t.Fatal(err)
	}
	return r
}
