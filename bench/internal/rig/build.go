package rig

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// commands are the repository's binaries, by name, with their package directories.
var commands = map[string]string{
	"gateway":  "services/gateway/cmd/gateway",
	"shipctl":  "services/gateway/cmd/shipctl",
	"webhooks": "services/webhooks/cmd/webhooks",
	"mailer":   "services/mailer/cmd/mailer",
	"expiry":   "services/expiry/cmd/expiry",
	"shipfile": "cli/cmd/shipfile",
	"scanner":  "services/scanner/cmd/scanner",
}

// Root returns the repository's root: the nearest directory above the working
// directory that holds go.work.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the working directory: run from inside the shipfile repository")
		}
		dir = parent
	}
}

// Bins are the built binaries.
type Bins struct {
	// Path maps a binary's name (gateway, shipctl, webhooks, mailer, expiry, shipfile) to its path.
	Path map[string]string
	// Pprof says the services were built with a pprof endpoint (BuildOptions.Pprof).
	Pprof bool
}

// BuildOptions change how Build builds.
type BuildOptions struct {
	// Pprof adds, through `go build -overlay` (the repository is not touched), a file
	// to each binary's main package that serves net/http/pprof on the address in
	// SHIPBENCH_PPROF_ADDR when that is set. Processes started by NewService get one.
	Pprof bool
}

// pprofFile is the file the Pprof option adds to each main package.
const pprofFile = `package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

// Added by the benchmark harness (go build -overlay), never part of the sources.
func init() {
	if addr := os.Getenv("SHIPBENCH_PPROF_ADDR"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
`

// Build compiles the named binaries with one ` + "`go build`" + ` into dir, and returns their
// paths. Unchanged packages come from the build cache, so only the link steps run when
// ` + "`make build`" + ` or an earlier run built the same sources.
func Build(t testing.TB, dir string, o BuildOptions, names ...string) Bins {
	t.Helper()
	root := Root(t)
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	bins := Bins{Path: map[string]string{}, Pprof: o.Pprof}
	if o.Pprof {
		src := filepath.Join(dir, "zz_shipbench_pprof.go")
		if err := os.WriteFile(src, []byte(pprofFile), 0o644); err != nil {
			t.Fatal(err)
		}
		replace := map[string]string{}
		for _, n := range names {
			if n != "shipctl" && n != "shipfile" {
				replace[filepath.Join(root, commands[n], "zz_shipbench_pprof.go")] = src
			}
		}
		overlay, _ := json.Marshal(map[string]any{"Replace": replace})
		path := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(path, overlay, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-overlay", path)
	}
	for _, n := range names {
		pkg, ok := commands[n]
		if !ok {
			t.Fatalf("build: no binary named %q", n)
		}
		args = append(args, "./"+pkg)
		bins.Path[n] = filepath.Join(dir, n)
	}
	start := time.Now()
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
	t.Logf("built %v in %s", names, time.Since(start).Round(100*time.Millisecond))
	return bins
}
