package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSaveIsPrivate(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("SHIPFILE_CONFIG", "")
	p := filepath.Join(dir, "shipfile", "config.json")
	// A file someone left readable is replaced by a private one.
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Save(Settings{URL: "http://h", Token: "sf_x"})
	if err != nil || got != p {
		t.Fatalf("Save = %q, %v; want %q", got, err, p)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %o, want 600", fi.Mode().Perm())
	}
	s, _, err := Load()
	if err != nil || s.URL != "http://h" || s.Token != "sf_x" {
		t.Fatalf("Load = %+v, %v", s, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "shipfile", ".tmp-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestLoadMissing(t *testing.T) {
	t.Setenv("SHIPFILE_CONFIG", filepath.Join(t.TempDir(), "none.json"))
	s, _, err := Load()
	if err != nil || s != (Settings{}) {
		t.Fatalf("Load of a missing file = %+v, %v", s, err)
	}
}

func TestSendState(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	k1 := SendKey("http://h", []string{"a@example.com"}, "t", [][]any{{"/x", 1, 2}})
	k2 := SendKey("http://h", []string{"a@example.com"}, "t", [][]any{{"/x", 1, 3}})
	if k1 == k2 || k1 != SendKey("http://h", []string{"a@example.com"}, "t", [][]any{{"/x", 1, 2}}) {
		t.Fatalf("SendKey: %s %s", k1, k2)
	}
	p, err := SendStatePath(k1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSend(p)
	if err != nil || s.PackageID != "" || s.Files == nil {
		t.Fatalf("LoadSend of nothing = %+v, %v", s, err)
	}
	s.PackageID = "pkg"
	s.Files["/x"] = []byte(`{"upload_id":"u"}`)
	if err := SaveSend(p, s); err != nil {
		t.Fatal(err)
	}
	back, err := LoadSend(p)
	if err != nil || back.PackageID != "pkg" || string(back.Files["/x"]) != `{"upload_id":"u"}` {
		t.Fatalf("LoadSend = %+v, %v", back, err)
	}
	// A torn file starts over instead of failing every later run.
	if err := os.WriteFile(p, []byte(`{"package_id":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := LoadSend(p); err != nil || s.PackageID != "" {
		t.Fatalf("LoadSend of a torn file = %+v, %v", s, err)
	}
}
