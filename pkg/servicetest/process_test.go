package servicetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// helperAddr, when set, makes the test binary a tiny service instead: it serves
// /readyz on that address until SIGTERM (TestStartProcess runs it).
const helperAddr = "SERVICETEST_HELPER_ADDR"

func TestMain(m *testing.M) {
	if addr := os.Getenv(helperAddr); addr != "" {
		helper(addr)
		return
	}
	os.Exit(m.Run())
}

// helper serves /readyz on addr, says what it was started with, and exits 0 on
// SIGTERM after saying so.
func helper(addr string) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fmt.Printf("helper started with %q\n", os.Args[1:])
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.NotFound(w, r)
	})}
	go func() { _ = srv.ListenAndServe() }()
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "helper got SIGTERM")
	_ = srv.Close()
}

// TestStartProcess: the process gets its arguments and environment, WaitReady sees
// its /readyz, Logs has its output, and the end of the test stops it with SIGTERM.
func TestStartProcess(t *testing.T) {
	addr := servicetest.FreeAddr(t)
	var p *servicetest.Process
	t.Run("run", func(t *testing.T) {
		p = servicetest.StartProcess(t, os.Args[0], []string{helperAddr + "=" + addr}, "one", "two")
		servicetest.WaitReady(t, addr)
		if logs := p.Logs(); !strings.Contains(logs, `helper started with ["one" "two"]`) {
			t.Fatalf("output = %q", logs)
		}
	})
	// The subtest's cleanup has run: the process got SIGTERM and exited.
	if logs := p.Logs(); !strings.Contains(logs, "helper got SIGTERM") {
		t.Fatalf("no SIGTERM in the output: %q", logs)
	}
	if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
		resp.Body.Close()
		t.Fatal("still serving after the test ended")
	}
}

// TestBuildBinaries builds a main package into the directory and fails, naming it,
// for a package that does not build.
func TestBuildBinaries(t *testing.T) {
	src := filepath.Join(t.TempDir(), "hello.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"hello from a built binary\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bins, err := servicetest.BuildBinaries(dir, map[string]string{"hello": src})
	if err != nil {
		t.Fatal(err)
	}
	if bins["hello"] != filepath.Join(dir, "hello") || len(bins) != 1 {
		t.Fatalf("bins = %v", bins)
	}
	out, err := exec.Command(bins["hello"]).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hello from a built binary") {
		t.Fatalf("running the binary: %v %s", err, out)
	}
	_, err = servicetest.BuildBinaries(dir, map[string]string{"broken": filepath.Join(t.TempDir(), "missing.go")})
	if err == nil || !strings.Contains(err.Error(), "build broken") {
		t.Fatalf("a package that does not build: err = %v", err)
	}
}

// TestRunCommand returns the command's output, and fails the test with it when the
// command fails.
func TestRunCommand(t *testing.T) {
	out := servicetest.RunCommand(t, "/bin/sh", []string{"SERVICETEST_WORD=hello"}, "-c", "echo $SERVICETEST_WORD; echo to-stderr >&2")
	if out != "hello\nto-stderr\n" {
		t.Errorf("output = %q", out)
	}
	r := &recorder{TB: t}
	servicetest.RunCommand(r, "/bin/sh", nil, "-c", "echo it broke; exit 3")
	if r.errors != 1 || !strings.Contains(r.messages[0], "exit status 3 it broke") {
		t.Errorf("a failing command: %d failures %q", r.errors, r.messages)
	}
}

// TestClient: Call, Must and Upload send the bearer token and their bodies, and
// return the status and the decoded answer.
func TestClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sf_secret" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"detail":"no token"}`)
			return
		}
		answer := map[string]any{"method": r.Method, "path": r.URL.Path, "content_type": r.Header.Get("Content-Type")}
		status := http.StatusOK
		switch {
		case strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data"):
			f, h, err := r.FormFile("file")
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			b, _ := io.ReadAll(f)
			answer["filename"], answer["content"] = h.Filename, string(b)
			status = http.StatusCreated
		case r.Body != nil:
			var body any
			if json.NewDecoder(r.Body).Decode(&body) == nil {
				answer["body"] = body
			}
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(answer)
	}))
	defer srv.Close()

	c := servicetest.Client{T: t, Base: srv.URL, Token: "sf_secret"}
	got := c.Must("POST", "/things", map[string]any{"n": 1}, http.StatusOK)
	if got["method"] != "POST" || got["path"] != "/things" || got["content_type"] != "application/json" ||
		fmt.Sprint(got["body"]) != "map[n:1]" {
		t.Errorf("POST with a body: %v", got)
	}
	if got := c.Must("GET", "/things", nil, http.StatusOK); got["content_type"] != "" || got["body"] != nil {
		t.Errorf("GET without a body: %v", got)
	}
	if got := c.Upload("/files", "a.txt", []byte("contents")); got["filename"] != "a.txt" || got["content"] != "contents" {
		t.Errorf("upload: %v", got)
	}
	status, body := servicetest.Client{T: t, Base: srv.URL, Token: "wrong"}.Call("GET", "/things", nil)
	if status != http.StatusUnauthorized || body["detail"] != "no token" {
		t.Errorf("wrong token: %d %v", status, body)
	}
}
