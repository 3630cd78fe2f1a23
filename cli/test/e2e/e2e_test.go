// Package e2e runs the real `shipfile` binary against the real gateway (and shipctl),
// on the real PostgreSQL, NATS JetStream and MinIO, the way a user's terminal or script
// would: sends and downloads with their SHA-256 checked, a send and a download killed
// midway (SIGKILL) and run again, a protected link, a wrong token, --json outputs. The
// command line reaches the gateway through a small reverse proxy of the test's that
// counts (and can slow) the file bytes on the way, so the test can see what a resumed
// transfer sends again. It builds the binaries with the go tool and imports nothing of
// services/.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
)

// bins are the binaries built once for the package's tests.
var bins map[string]string

func TestMain(m *testing.M) {
	servicetest.RunWithBinaries(m, &bins, map[string]string{
		"gateway":  "../../../services/gateway/cmd/gateway",
		"shipctl":  "../../../services/gateway/cmd/shipctl",
		"shipfile": "../../cmd/shipfile",
	})
}

// partSize is the gateway's upload part size in these tests: a killed PATCH loses at
// most this much of what reached the gateway.
const partSize = 8 << 20

// system is one shipfile installation with the proxy in front of its gateway.
type system struct {
	env   []string // the services' SHIPFILE_* settings
	token string   // an API token of the user
	url   string   // the proxy's base URL (the gateway's public URL)
	gw    string   // the gateway's own address
	ops   string   // the gateway's operations address (/metrics)
	proxy *proxy
	dbURL string         // the gateway's database
	store *storage.Store // the gateway's bucket
}

// startSystem starts a system whose gateway also gets gatewayEnv (SHIPFILE_*=…).
func startSystem(t *testing.T, gatewayEnv ...string) *system {
	t.Helper()
	_, natsURL := servicetest.StartNATS(t)
	// An empty database: shipctl and the gateway apply the migrations themselves.
	dbURL := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	var s3 storage.Config
	if err := config.Load(&s3); err != nil {
		t.Fatal(err)
	}
	s3.Bucket = "cli-" + strings.ToLower(rand.Text()[:12])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := storage.Open(ctx, s3)
	if err != nil {
		t.Fatalf("MinIO at %s: %v", s3.Endpoint, err)
	}
	t.Cleanup(func() { removeBucket(st) })

	s := &system{dbURL: dbURL, store: st, env: []string{
		"SHIPFILE_DATABASE_URL=" + dbURL,
		"SHIPFILE_NATS_URL=" + natsURL,
		"SHIPFILE_S3_ENDPOINT=" + s3.Endpoint,
		"SHIPFILE_S3_ACCESS_KEY=" + s3.AccessKey,
		"SHIPFILE_S3_SECRET_KEY=" + s3.SecretKey,
		"SHIPFILE_S3_BUCKET=" + s3.Bucket,
		"SHIPFILE_LOG_LEVEL=warn",
		"SHIPFILE_UPLOAD_PART_SIZE=" + strconv.Itoa(partSize),
		"SHIPFILE_LINK_RATE=0",
		servicetest.SecretKeyEnv,
	}}
	servicetest.RunCommand(t, bins["shipctl"], s.env, "user", "create", "--email", "cli@example.com", "--name", "CLI User", "--role", "regular")
	out := servicetest.RunCommand(t, bins["shipctl"], s.env, "token", "create", "--email", "cli@example.com", "--name", "cli")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	s.token = lines[len(lines)-1]

	s.gw = servicetest.FreeAddr(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.url = "http://" + ln.Addr().String()
	s.proxy = newProxy(t, ln, s.gw)
	s.ops = servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["gateway"], append(append(append([]string{}, s.env...),
		"SHIPFILE_HTTP_ADDR="+s.gw, "SHIPFILE_OPS_ADDR="+s.ops, "SHIPFILE_PUBLIC_URL="+s.url), gatewayEnv...))
	servicetest.WaitReady(t, s.ops)
	return s
}

func removeBucket(st *storage.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for u := range st.Client.ListIncompleteUploads(ctx, st.Bucket, "", true) {
		_ = st.Client.RemoveIncompleteUpload(ctx, st.Bucket, u.Key)
	}
	for obj := range st.Client.ListObjects(ctx, st.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		_ = st.Client.RemoveObject(ctx, st.Bucket, obj.Key, minio.RemoveObjectOptions{})
	}
	_ = st.Client.RemoveBucket(ctx, st.Bucket)
}

// proxy forwards to the gateway, counting (and, with a rate, slowing) the bytes of tus
// PATCH bodies and of link file downloads, and checks every answer against
// proto/openapi.yaml.
type proxy struct {
	uploaded   atomic.Int64 // PATCH body bytes forwarded to the gateway
	downloaded atomic.Int64 // link file bytes forwarded to the client
	// downloads is how many link file bodies are being forwarded: a killed client's
	// answer goes on until the proxy's write to it fails.
	downloads atomic.Int64
	rate      atomic.Int64 // bytes per second for both; 0: as fast as it goes
	// dropAt, when positive, makes the transfer that brings its counter past it fail
	// there, once (the connection is cut as in a network drop).
	dropAt atomic.Int64
	// corruptAt, when positive, flips the byte of the transfer that is its counter's
	// corruptAt-th (counting from 1), once: bytes changed on the way.
	corruptAt atomic.Int64
}

func newProxy(t *testing.T, ln net.Listener, target string) *proxy {
	p := &proxy{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0) // cut connections are what these tests make
	contract := servicetest.MustContract(t)
	rp.ModifyResponse = func(resp *http.Response) error {
		// Every answer the command line gets must match proto/openapi.yaml: its status
		// and headers, and its body unless it is a file's bytes.
		bytesOfFile := !strings.Contains(resp.Header.Get("Content-Type"), "json") && resp.ContentLength != 0 &&
			resp.Request.Method == http.MethodGet && strings.Contains(resp.Request.URL.Path, "/files/")
		if bytesOfFile {
			if err := contract.Check(resp.Request, resp.StatusCode, resp.Header, nil); err != nil {
				t.Errorf("contract: %v", err)
			}
			if strings.Contains(resp.Request.URL.Path, "/api/v1/links/") {
				p.downloads.Add(1)
				resp.Body = &slowCounter{r: resp.Body, n: &p.downloaded, rate: &p.rate, dropAt: &p.dropAt, corruptAt: &p.corruptAt, open: &p.downloads}
			}
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if err := contract.Check(resp.Request, resp.StatusCode, resp.Header, body); err != nil {
			t.Errorf("contract: %v\nanswer: %.300s", err, body)
		}
		return nil
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			r.Body = &slowCounter{r: r.Body, n: &p.uploaded, rate: &p.rate, dropAt: &p.dropAt, corruptAt: &p.corruptAt}
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

// slowCounter counts what is read through it and keeps to a rate.
type slowCounter struct {
	r         io.ReadCloser
	n         *atomic.Int64
	rate      *atomic.Int64
	dropAt    *atomic.Int64
	corruptAt *atomic.Int64
	start     time.Time
	read      int64
	open      *atomic.Int64 // decremented once at Close, when set
	closed    atomic.Bool
}

// errDropped is the cut of a simulated network drop.
var errDropped = errors.New("connection dropped by the test")

func (s *slowCounter) Read(b []byte) (int, error) {
	if s.start.IsZero() {
		s.start = time.Now()
	}
	if len(b) > 256<<10 {
		b = b[:256<<10]
	}
	n, err := s.r.Read(b)
	if at := s.dropAt.Load(); at > 0 && s.n.Load()+int64(n) >= at && s.dropAt.CompareAndSwap(at, 0) {
		return 0, errDropped
	}
	if at := s.corruptAt.Load(); at > 0 {
		if before := s.n.Load(); before < at && at <= before+int64(n) && s.corruptAt.CompareAndSwap(at, 0) {
			b[at-before-1] ^= 0xff
		}
	}
	s.n.Add(int64(n))
	s.read += int64(n)
	if rate := s.rate.Load(); rate > 0 {
		if ahead := time.Duration(float64(s.read)/float64(rate)*float64(time.Second)) - time.Since(s.start); ahead > 0 {
			time.Sleep(ahead)
		}
	}
	return n, err
}

func (s *slowCounter) Close() error {
	if s.open != nil && s.closed.CompareAndSwap(false, true) {
		s.open.Add(-1)
	}
	return s.r.Close()
}

// user is one person's shell: their config and cache directories.
type user struct {
	t    *testing.T
	home string
	env  []string
	// dir is the working directory of their commands; "" is the test's.
	dir string
}

func newUser(t *testing.T) *user {
	home := t.TempDir()
	return &user{t: t, home: home, env: []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"XDG_CACHE_HOME=" + filepath.Join(home, "cache"),
		"SHIPFILE_TOKEN=", "SHIPFILE_URL=", "SHIPFILE_CONFIG=",
	}}
}

// result is one finished run of the command line.
type result struct {
	stdout, stderr string
	code           int
}

// command prepares a run of shipfile with args, stdin as its standard input.
func (u *user) command(stdin string, extraEnv []string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.Command(bins["shipfile"], args...)
	cmd.Dir = u.dir
	cmd.Env = append(append(os.Environ(), u.env...), extraEnv...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	return cmd, &out, &errb
}

// run runs shipfile to its end (at most 2 minutes).
func (u *user) run(stdin string, extraEnv []string, args ...string) result {
	u.t.Helper()
	cmd, out, errb := u.command(stdin, extraEnv, args...)
	if err := cmd.Start(); err != nil {
		u.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		u.t.Fatalf("shipfile %v ran over 2 minutes; stderr:\n%s", args, errb)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		u.t.Fatal(err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// ok runs shipfile and fails the test unless it exits 0.
func (u *user) ok(stdin string, args ...string) result {
	u.t.Helper()
	r := u.run(stdin, nil, args...)
	if r.code != 0 {
		u.t.Fatalf("shipfile %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// decode parses a --json output: exactly one JSON document.
func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("--json output is not the expected JSON document: %v\n%s", err, r.stdout)
	}
	if dec.More() {
		t.Fatalf("--json output holds more than one document:\n%s", r.stdout)
	}
	return v
}

// randomFile writes size random bytes to dir/name and returns its path and SHA-256.
func randomFile(t *testing.T, dir, name string, size int64) (string, string) {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(rand.Reader, size)); err != nil {
		t.Fatal(err)
	}
	return p, hex.EncodeToString(h.Sum(nil))
}

func sha256File(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// detailOf asks the gateway itself what it answers to GET path with token: the status
// and its `detail`.
func detailOf(t *testing.T, base, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Detail string `json:"detail"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	return resp.StatusCode, doc.Detail
}

// waitFor polls cond every 20 ms until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

func newHead(u string) (*http.Request, error) { return http.NewRequest(http.MethodHead, u, nil) }

func parseInt(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }

func strconv64(n int64) string { return strconv.FormatInt(n, 10) }

// uploadsInFlight reads the gateway's shipfile_uploads_in_flight gauge.
func (s *system) uploadsInFlight(t *testing.T) int {
	t.Helper()
	resp, err := httpClient.Get("http://" + s.ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "shipfile_uploads_in_flight "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metrics: %q", line)
			}
			return int(n)
		}
	}
	t.Fatal("the gateway's /metrics has no shipfile_uploads_in_flight")
	return 0
}
