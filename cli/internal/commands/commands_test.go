package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// runMain runs the command line with no server behind it, in a home of its own.
func runMain(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, "cache"))
	t.Setenv("SHIPFILE_CONFIG", "")
	t.Setenv("SHIPFILE_TOKEN", "")
	t.Setenv("SHIPFILE_URL", "")
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, IO{In: strings.NewReader(stdin), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func TestExitCodes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		say  string
	}{
		{"no command", nil, ExitUsage, "no command"},
		{"unknown command", []string{"nope"}, ExitUsage, "unknown command"},
		{"unknown flag", []string{"whoami", "--nope"}, ExitUsage, "unknown flag"},
		{"extra argument", []string{"whoami", "x"}, ExitUsage, "argument"},
		{"send without files", []string{"send", "--to", "a@example.com"}, ExitUsage, "argument"},
		{"send without --to", []string{"send", file}, ExitUsage, "--to"},
		{"the same recipient twice", []string{"send", file, "--to", "a@example.com", "--to", "A@example.com "}, ExitUsage, "twice"},
		{"encrypt is taken", []string{"send", file, "--to", "a@example.com", "--encrypt"}, ExitFailed, "not logged in"},
		{"days", []string{"ls", "--limit", "101"}, ExitUsage, "--limit"},
		{"bad id", []string{"rm", "12"}, ExitUsage, "not a package id"},
		{"bad token id", []string{"tokens", "revoke", "x"}, ExitUsage, "not a token id"},
		{"not an age key", []string{"get", "https://h/p/tok#key"}, ExitUsage, "not an age key"},
		{"login without url", []string{"login"}, ExitUsage, "--url"},
		{"not logged in", []string{"whoami"}, ExitFailed, "not logged in"},
		{"missing file", []string{"send", "/no/such/file", "--to", "a@example.com"}, ExitFailed, "no such file"},
		// Secrets come only from standard input: no flag takes one.
		{"password on the command line", []string{"send", file, "--to", "a@example.com", "--password", "secret123"}, ExitUsage, "unknown flag: --password"},
		{"token on the command line", []string{"login", "--url", "http://h", "--token", "sf_x"}, ExitUsage, "unknown flag: --token"},
		{"passphrase on the command line", []string{"send", file, "--to", "a@example.com", "--passphrase", "secret123"}, ExitUsage, "unknown flag: --passphrase"},
		{"help", []string{"--help"}, ExitOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runMain(t, "", tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.say) {
				t.Fatalf("shipfile %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.say)
			}
		})
	}
}

func TestJSONError(t *testing.T) {
	if code, stdout, stderr := runMain(t, ""); code != ExitUsage || stdout != "" || !strings.Contains(stderr, "Available Commands") {
		t.Fatalf("no command: exit %d, stdout %q, stderr %q; want 2 and the help on stderr", code, stdout, stderr)
	}
	code, stdout, stderr := runMain(t, "", "whoami", "--json")
	var doc struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	if code != ExitFailed || stdout != "" || json.Unmarshal([]byte(stderr), &doc) != nil || doc.ExitCode != 1 || !strings.Contains(doc.Error, "not logged in") {
		t.Fatalf("whoami --json when not logged in: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestPasswordStdin(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"secret password\n", "secret password"},
		{"no newline", "no newline"},
		{"crlf line\r\nnext\n", "crlf line"},
	} {
		a := &app{io: IO{In: strings.NewReader(tc.in)}}
		a.stdin = newLineReader(a.io.In)
		got, err := a.readSecret("Password: ")
		if err != nil || got != tc.want {
			t.Errorf("readSecret(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	a := &app{io: IO{In: strings.NewReader("")}}
	a.stdin = newLineReader(a.io.In)
	if _, err := a.readSecret("Password: "); err == nil || !strings.Contains(err.Error(), "password expected") {
		t.Errorf("readSecret of empty stdin: %v", err)
	}
}

func TestVersion(t *testing.T) {
	code, stdout, _ := runMain(t, "", "--version")
	if code != ExitOK || stdout != "shipfile "+Version()+"\n" || Version() == "" {
		t.Fatalf("--version: exit %d, %q (Version() = %q)", code, stdout, Version())
	}
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"a release", debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{"a checkout's build", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "26b7040aaaabbbbccccddddeeeeffff000011112"}, {Key: "vcs.modified", Value: "true"}}}, "(devel) (26b7040aaaab, modified)"},
		{"a pseudo-version names its commit", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261128220000-26b7040aaaab"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "26b7040aaaabbbbccccddddeeeeffff000011112"}}}, "v0.0.0-20261128220000-26b7040aaaab"},
		{"no version", debug.BuildInfo{}, "(devel)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionOf(&tc.bi); got != tc.want {
				t.Errorf("versionOf = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "complete -o default -F __start_shipfile shipfile", "zsh": "#compdef shipfile", "fish": "complete -c shipfile"} {
		t.Run(shell, func(t *testing.T) {
			code, stdout, stderr := runMain(t, "", "completion", shell)
			if code != ExitOK || !strings.Contains(stdout, want) {
				t.Fatalf("completion %s: exit %d, stderr %q, script lacks %q", shell, code, stderr, want)
			}
		})
	}
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}} {
		if code, stdout, _ := runMain(t, "", args...); code != ExitUsage || stdout != "" {
			t.Errorf("shipfile %v: exit %d, stdout %q; want 2 and nothing on stdout", args, code, stdout)
		}
	}
}
