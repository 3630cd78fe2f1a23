package transfer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenPart(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		setup   func(path string) error
		created bool
		fail    string
	}{
		{"a new part is created", func(string) error { return nil }, true, ""},
		{"an earlier run's part is resumed", func(p string) error { return os.WriteFile(p, []byte("half"), 0o644) }, false, ""},
		{"a symlink to a file is refused", func(p string) error { return os.Symlink(victim, p) }, false, "symbolic link"},
		{"a dangling symlink is refused", func(p string) error { return os.Symlink(filepath.Join(dir, "nowhere"), p) }, false, "symbolic link"},
		{"a directory is refused", func(p string) error { return os.Mkdir(p, 0o755) }, false, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f.part")
			if err := tc.setup(p); err != nil {
				t.Fatal(err)
			}
			f, created, err := openPart(p)
			if tc.fail != "" {
				if err == nil || !strings.Contains(err.Error(), tc.fail) || !IsLocal(err) {
					t.Fatalf("openPart: %v; want a local error saying %q", err, tc.fail)
				}
				if _, err := os.Lstat(filepath.Join(dir, "nowhere")); err == nil {
					t.Fatal("the dangling symlink's target was created")
				}
				if b, _ := os.ReadFile(victim); string(b) != "keep" {
					t.Fatal("the symlink's target changed")
				}
				return
			}
			if err != nil || created != tc.created {
				t.Fatalf("openPart: created %v, %v; want created %v", created, err, tc.created)
			}
			f.Close()
		})
	}
}

func TestPlace(t *testing.T) {
	dir := t.TempDir()
	from := filepath.Join(dir, "a.part")
	to := filepath.Join(dir, "a")
	if err := os.WriteFile(from, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, []byte("there first"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Place(from, to); err == nil || !IsLocal(err) {
		t.Fatalf("Place over an existing file: %v; want a local error", err)
	}
	if b, _ := os.ReadFile(to); string(b) != "there first" {
		t.Fatalf("Place replaced an existing file: it holds %q", b)
	}
	link := filepath.Join(dir, "l")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), link); err != nil {
		t.Fatal(err)
	}
	if err := Place(from, link); err == nil {
		t.Fatal("Place over a symlink succeeded")
	}
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); err == nil {
		t.Fatal("Place wrote through a symlink")
	}
	free := filepath.Join(dir, "b")
	if err := Place(from, free); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(free); string(b) != "new" {
		t.Fatalf("the placed file holds %q", b)
	}
	if _, err := os.Lstat(from); err == nil {
		t.Fatal("Place left the part behind")
	}
}
