// Package config keeps what the command line remembers between runs: the server and
// token of `shipfile login` (the user's config directory, mode 600) and the state of
// unfinished sends (the user's cache directory), so that a send run again goes on.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Settings is what `shipfile login` stores.
type Settings struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// Path is the settings file: $SHIPFILE_CONFIG, or shipfile/config.json in the user's
// config directory ($XDG_CONFIG_HOME or ~/.config on Linux).
func Path() (string, error) {
	if p := os.Getenv("SHIPFILE_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "shipfile", "config.json"), nil
}

// Load reads the settings file; a missing file gives empty settings.
func Load() (Settings, string, error) {
	var s Settings
	p, err := Path()
	if err != nil {
		return s, "", err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return s, p, nil
	}
	if err != nil {
		return s, p, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, p, fmt.Errorf("%s: %w", p, err)
	}
	return s, p, nil
}

// Save writes the settings file with mode 600 (its directory 700), replacing it whole.
func Save(s Settings) (string, error) {
	p, err := Path()
	if err != nil {
		return "", err
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	return p, writePrivate(p, append(b, '\n'))
}

// writePrivate writes b to p through a temporary file of mode 600 and a rename, so the
// file is never readable by others, not even for a moment, and never half written.
func writePrivate(p string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// SendState is what an unfinished `shipfile send` left: its package and each file's
// upload, by the file's path.
type SendState struct {
	PackageID string                     `json:"package_id"`
	Files     map[string]json.RawMessage `json:"files"`
	// Identity is an encrypted send's key (AGE-SECRET-KEY-1…), kept until the send is
	// done so that a run again encrypts to the same key (the file is mode 600).
	Identity string `json:"identity,omitempty"`
	// PassphraseCheck is, for a send encrypted with a passphrase, a small age file made
	// with it, so that a run again can tell the same passphrase from another.
	PassphraseCheck []byte `json:"passphrase_check,omitempty"`
}

// SpoolDir is where an encrypted send whose state file is statePath keeps the
// ciphertext of the file it is uploading: beside the state file.
func SpoolDir(statePath string) string {
	return strings.TrimSuffix(statePath, ".json") + ".spool"
}

// SendStatePath is the state file of a send whose inputs hash to key: shipfile/sends/
// in the user's cache directory ($XDG_CACHE_HOME or ~/.cache on Linux).
func SendStatePath(key string) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "shipfile", "sends", key+".json"), nil
}

// SendKey hashes what makes two sends the same command: the server, the recipients and
// the package's fields, and each file's absolute path, size and modification time.
func SendKey(parts ...any) string {
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// LoadSend reads a send's state; a missing file gives an empty state.
func LoadSend(p string) (SendState, error) {
	s := SendState{Files: map[string]json.RawMessage{}}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		// A torn or foreign file: start over rather than fail for ever.
		return SendState{Files: map[string]json.RawMessage{}}, nil
	}
	if s.Files == nil {
		s.Files = map[string]json.RawMessage{}
	}
	return s, nil
}

// SaveSend writes a send's state (mode 600: it names the package and its uploads).
func SaveSend(p string, s SendState) error {
	b, _ := json.Marshal(s)
	return writePrivate(p, b)
}
