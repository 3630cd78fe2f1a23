// Package e2e runs the real gateway binary against real PostgreSQL, NATS and MinIO and
// drives it over HTTP with the client generated from proto/openapi.yaml (pkg/apiclient),
// which checks every answer against that document (servicetest.APIClient): the crash
// test (SIGKILL between commit and publish).
// The upload throughput and memory benchmarks are in bench/ (make bench).
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/store/identitydb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// gatewayBin is the gateway binary built once for the package's tests.
var gatewayBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shipfile-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gatewayBin = filepath.Join(dir, "gateway")
	build := exec.Command("go", "build", "-o", gatewayBin, "../../cmd/gateway")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build gateway:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// gateway is a running gateway process.
type gateway struct {
	t    testing.TB
	cmd  *exec.Cmd
	addr string
	env  []string
	logs *bytes.Buffer
}

// startGateway runs the binary with env (SHIPFILE_* settings) and waits until ready.
func startGateway(t testing.TB, env []string) *gateway {
	t.Helper()
	g := &gateway{t: t, env: env, logs: &bytes.Buffer{}}
	g.addr = servicetest.FreeAddr(t)
	opsAddr := servicetest.FreeAddr(t)
	g.cmd = exec.Command(gatewayBin)
	g.cmd.Env = append(os.Environ(), append(env, "SHIPFILE_HTTP_ADDR="+g.addr, "SHIPFILE_OPS_ADDR="+opsAddr, "SHIPFILE_LOG_LEVEL=warn")...)
	g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if g.cmd.ProcessState == nil {
			_ = g.cmd.Process.Kill()
			_ = g.cmd.Wait()
		}
	})
	servicetest.WaitFor(t, 60*time.Second, "gateway /readyz", func() bool {
		resp, err := http.Get("http://" + opsAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return g
}

// kill sends SIGKILL and reaps the process.
func (g *gateway) kill() {
	_ = g.cmd.Process.Signal(syscall.SIGKILL)
	_ = g.cmd.Wait()
}

func (g *gateway) url(path string) string { return "http://" + g.addr + path }

// env is a fresh database, a bucket of the test's own, and a user with a token.
type env struct {
	dbURL  string
	bucket string
	token  string
	vars   []string
}

func newEnv(t testing.TB, natsURL string) env {
	t.Helper()
	dbURL := pgtest.New(t, migrations.Version(), migrations.Up)
	ctx := context.Background()
	pool, err := database.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	id := identity.NewIdentity(identitydb.NewStore(sqldb.NewDB(pool)))
	u, err := id.CreateUser(ctx, app.NewUser{Email: "e2e@example.com", Name: "E2E", Role: app.RoleRegular})
	if err != nil {
		t.Fatal(err)
	}
	_, raw, err := id.CreateToken(ctx, u.ID, "e2e", nil, identity.System)
	if err != nil {
		t.Fatal(err)
	}
	bucket := "e2e-" + strings.ToLower(rand.Text()[:12])
	var s3 storage.Config
	if err := config.Load(&s3); err != nil {
		t.Fatal(err)
	}
	s3.Bucket = bucket
	st, err := storage.Open(ctx, s3)
	if err != nil {
		t.Fatalf("MinIO: %v", err)
	}
	t.Cleanup(func() { removeBucket(st) })
	return env{dbURL: dbURL, bucket: bucket, token: raw, vars: []string{
		"SHIPFILE_DATABASE_URL=" + dbURL,
		"SHIPFILE_S3_BUCKET=" + bucket,
		"SHIPFILE_NATS_URL=" + natsURL,
		servicetest.SecretKeyEnv,
	}}
}

func removeBucket(st *storage.Store) {
	ctx := context.Background()
	for obj := range st.Client.ListObjects(ctx, st.Bucket, listAll) {
		_ = st.Client.RemoveObject(ctx, st.Bucket, obj.Key, removeOpts)
	}
	_ = st.Client.RemoveBucket(ctx, st.Bucket)
}

// postJSON sends a JSON request with the bearer token (none when empty) and decodes the
// answer; an answer that does not match proto/openapi.yaml fails the test
// (servicetest.HTTPClient). The generated client (servicetest.APIClient) is the other way.
func postJSON(t testing.TB, url, token string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := servicetest.HTTPClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}
