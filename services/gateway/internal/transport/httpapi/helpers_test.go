package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/app/previews"
	"github.com/shipfile/shipfile/services/gateway/internal/app/transfers"
	"github.com/shipfile/shipfile/services/gateway/internal/service"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
	"github.com/shipfile/shipfile/services/gateway/internal/transport/httpapi"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// testAPI is a gateway router on its own fresh database, served by httptest.
type testAPI struct {
	t        testing.TB
	url      string
	pool     *pgxpool.Pool
	dbURL    string // with the pool settings of the test
	identity *identity.Identity
	// tokenCache is the gateway's cache of token look-ups.
	tokenCache *identity.TokenCache
	engine     *gin.Engine
	objects    *storage.Store
	registry   *prometheus.Registry
	// resumable is the tus upload service (its sweep is run by tests, not a ticker).
	resumable *transfers.Resumable
	db        *store.Postgres
	// previews makes image previews (no consumer runs in tests: they call Make).
	previews *previews.Maker
}

// answered counts the requests the gateway finished on route with status.
func (a *testAPI) answered(route string, status int) float64 {
	a.t.Helper()
	families, err := a.registry.Gather()
	if err != nil {
		a.t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "shipfile_http_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == route && labels["status"] == strconv.Itoa(status) {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// inFlight reads the gateway's uploads-in-flight gauge.
func (a *testAPI) inFlight() int {
	a.t.Helper()
	families, err := a.registry.Gather()
	if err != nil {
		a.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "shipfile_uploads_in_flight" {
			return int(f.GetMetric()[0].GetGauge().GetValue())
		}
	}
	return 0
}

// testMaxFileSize is the file size limit of test gateways, small enough to cross.
const testMaxFileSize = 4 << 20

func defaultConfig() httpapi.Config {
	return httpapi.Config{MaxJSONBytes: 1 << 20, MaxFileSize: testMaxFileSize, RatePerSecond: 1000, RateBurst: 1000}
}

// objectKeys lists every object in the test's bucket.
func (a *testAPI) objectKeys() []string {
	a.t.Helper()
	var keys []string
	for obj := range a.objects.Client.ListObjects(context.Background(), a.objects.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			a.t.Fatal(obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

// testOptions are the app settings a test may change.
type testOptions struct {
	allowPrivateWebhooks bool
	poolMaxConns         int
	databaseURL          string
	outboxWake           func()
	hasher               *app.Hasher
	linkRate             float64
	linkBurst            int
	clockSkew            time.Duration
	tusLease             time.Duration
	tusLockWait          time.Duration
	tusMaxOpen           int
	objects              *storage.Store
	scanMode             app.ScanMode
}

// withScanMode sets the test gateway's SHIPFILE_SCAN (default off).
func withScanMode(m app.ScanMode) testOption { return func(o *testOptions) { o.scanMode = m } }

// withTusLease sets the test gateway's SHIPFILE_UPLOAD_LOCK_LEASE (default 2s) and
// SHIPFILE_UPLOAD_LOCK_WAIT (0: the default, 5s).
func withTusLease(lease, wait time.Duration) testOption {
	return func(o *testOptions) { o.tusLease, o.tusLockWait = lease, wait }
}

// onObjects runs the test gateway on the bucket of s instead of a bucket of its own on
// the shared MinIO.
func onObjects(s *storage.Store) testOption { return func(o *testOptions) { o.objects = s } }

// withMaxOpen sets the test gateway's SHIPFILE_UPLOAD_MAX_OPEN (default: no limit).
func withMaxOpen(n int) testOption { return func(o *testOptions) { o.tusMaxOpen = n } }

// withHasher makes the test gateway hash passwords with h.
func withHasher(h *app.Hasher) testOption { return func(o *testOptions) { o.hasher = h } }

// withLinkRate limits the test gateway's link routes to rate a second per client IP,
// with burst.
func withLinkRate(rate float64, burst int) testOption {
	return func(o *testOptions) { o.linkRate, o.linkBurst = rate, burst }
}

// withClockSkew sets the test gateway's package service's clock off by d, as on a
// gateway whose clock is wrong.
func withClockSkew(d time.Duration) testOption { return func(o *testOptions) { o.clockSkew = d } }

// onDatabase runs the test gateway on an existing database (another test gateway's),
// as a second instance of one installation.
func onDatabase(url string) testOption { return func(o *testOptions) { o.databaseURL = url } }

// outboxWake is what the store calls after committing outbox rows (a relay's Wake).
func outboxWake(wake func()) testOption { return func(o *testOptions) { o.outboxWake = wake } }

// testOption changes a testOptions.
type testOption func(*testOptions)

// allowPrivateWebhooks sets SHIPFILE_WEBHOOK_ALLOW_PRIVATE=true for the test gateway.
func allowPrivateWebhooks(o *testOptions) { o.allowPrivateWebhooks = true }

// poolMaxConns limits the test gateway's database pool to n connections.
func poolMaxConns(n int) testOption { return func(o *testOptions) { o.poolMaxConns = n } }

func newTestAPI(t testing.TB, cfg httpapi.Config, opts ...testOption) *testAPI {
	t.Helper()
	var o testOptions
	for _, opt := range opts {
		opt(&o)
	}
	url := o.databaseURL
	if url == "" {
		url = pgtest.New(t, migrations.Version(), migrations.Up)
	}
	if o.poolMaxConns > 0 {
		u, err := neturl.Parse(url)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("pool_max_conns", strconv.Itoa(o.poolMaxConns))
		u.RawQuery = q.Encode()
		url = u.String()
	}
	if o.tusLease == 0 {
		o.tusLease = 2 * time.Second
	}
	ctx := context.Background()
	pool, err := database.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	objects := o.objects
	if objects == nil {
		objects = servicetest.Bucket(t)
	}
	// Built as the gateway's main builds it (service.New), without an outbox relay and
	// with the test's API configuration.
	svc, err := service.New(ctx, service.Config{
		PublicURL:      "http://shipfile.test",
		MaxFileSize:    cfg.MaxFileSize,
		MaxFiles:       5,
		UploadPartSize: 5 << 20,
		ResumeWindow:   time.Hour,
		UploadLease:    o.tusLease,
		UploadLockWait: o.tusLockWait,
		WebhookPrivate: o.allowPrivateWebhooks,
		Web: service.WebConfig{
			SessionLifetime: time.Hour, SessionIdle: time.Hour, CookieSecure: "false",
			LoginFailures: 5, LoginLockout: time.Minute,
		},
		Edge: service.EdgeConfig{LinkBurst: o.linkBurst, UploadMaxOpen: o.tusMaxOpen},
		Scan: service.ScanConfig{Mode: string(o.scanMode)},
	}, service.Deps{
		Pool: pool, Objects: objects, OutboxWake: o.outboxWake, Registry: ops.NewRegistry(),
		Secrets: servicetest.Keyring(t), Hasher: o.hasher, LinkRate: o.linkRate, API: &cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.clockSkew != 0 {
		svc.Packages.UseClock(func() time.Time { return time.Now().Add(o.clockSkew) })
	}
	// The auth feed and the usage writer run as in the gateway (no tus sweeper: its
	// tests sweep themselves); registered after pool.Close, so they stop before it.
	t.Cleanup(svc.Start(context.Background()))
	db, identity, tokenCache, resumable, engine, registry := svc.DB, svc.Identity, svc.TokenCache, svc.Resumable, svc.Handler, svc.Registry
	a := &testAPI{t: t, pool: pool, dbURL: url, identity: identity, tokenCache: tokenCache, engine: engine, objects: objects, registry: registry, resumable: resumable, db: db, previews: svc.Previews}
	srv := httptest.NewUnstartedServer(engine)
	httpapi.WithConnContext(srv.Config)
	srv.Start()
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

// user creates a user with a token and returns both.
func (a *testAPI) user(email string, role app.Role) (app.User, string) {
	a.t.Helper()
	ctx := context.Background()
	u, err := a.identity.CreateUser(ctx, app.NewUser{Email: email, Name: "Test " + string(role), Role: role})
	if err != nil {
		a.t.Fatal(err)
	}
	_, raw, err := a.identity.CreateToken(ctx, u.ID, "test", nil, identity.System)
	if err != nil {
		a.t.Fatal(err)
	}
	return u, raw
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

// client is an HTTP client whose every answer from the REST API is checked against
// proto/openapi.yaml (servicetest.Contract: the test fails, and goes on, when one does
// not match); timeout 0 is none. Tests that build their own requests send them with it.
func (a *testAPI) client(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: servicetest.MustContract(a.t).Transport(a.t, nil)}
}

// testRoutes are the paths the tests mount on the engine themselves, which are not the
// REST API's: their answers are not checked against proto/openapi.yaml.
var testRoutes = map[string]bool{"/api/v1/test-panic": true}

// do sends a request; body may be nil, a string (sent as is) or a value (encoded as JSON).
func (a *testAPI) do(method, path, token string, body any, headers ...string) response {
	a.t.Helper()
	var rd io.Reader
	contentType := ""
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
		contentType = "application/json"
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(buf)
		contentType = "application/json"
	}
	req, err := http.NewRequest(method, a.url+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "X-Raw-Body" {
			req.Body = io.NopCloser(strings.NewReader(headers[i+1]))
			req.ContentLength = int64(len(headers[i+1]))
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	// Every answer of the REST API is checked against proto/openapi.yaml (the test fails,
	// and goes on, when one does not match), but for the routes the tests mount themselves.
	client := &http.Client{Timeout: 30 * time.Second}
	if !testRoutes[path] {
		client = a.client(30 * time.Second)
	}
	resp, err := client.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// expect fails the test unless the status is want; for errors it also checks the
// {"detail": "..."} shape.
func expect(t testing.TB, r response, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status = %d, want %d; body: %s", r.status, want, r.body)
	}
	if want >= 400 {
		m := r.json(t)
		if d, ok := m["detail"].(string); !ok || d == "" || len(m) != 1 {
			t.Fatalf("error body = %s, want exactly {\"detail\": \"...\"}", r.body)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Fatalf("error Content-Type = %q", ct)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// assertUTC checks that v is an RFC 3339 date-time in UTC ending in Z.
func assertUTC(t *testing.T, v any) {
	t.Helper()
	s, ok := v.(string)
	if !ok || !strings.HasSuffix(s, "Z") {
		t.Fatalf("date-time = %v, want RFC 3339 UTC ending in Z", v)
	}
	if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
		t.Fatalf("date-time %q: %v", s, err)
	}
}
