// Package e2e runs the real expiry binary (two of them racing, and beside the real
// gateway) against real PostgreSQL, a private NATS JetStream server and a private
// MinIO, and checks what users and downstream systems see: package states through the
// API, dead links, objects gone from the bucket and package.expired on SHIPFILE_EVENTS.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/expiry/internal/expirytest"
)

// bins are the binaries built once for the package's tests.
var bins map[string]string

func TestMain(m *testing.M) {
	servicetest.RunWithBinaries(m, &bins, map[string]string{
		"gateway": "../../../gateway/cmd/gateway",
		"shipctl": "../../../gateway/cmd/shipctl",
		"expiry":  "../../cmd/expiry",
	})
}

// s3Env points a service at the private MinIO and a bucket.
func s3Env(m *servicetest.MinIO, bucket string) []string {
	return []string{
		"SHIPFILE_S3_ENDPOINT=" + m.Endpoint, "SHIPFILE_S3_ACCESS_KEY=" + m.AccessKey,
		"SHIPFILE_S3_SECRET_KEY=" + m.SecretKey, "SHIPFILE_S3_BUCKET=" + bucket,
	}
}

// TestTwoInstancesRaceOver1000Packages: two expiry processes run side by side; 1,000
// packages (drafts, active and revoked, one object each) become overdue at once. Each
// is expired exactly once: 1,000 package.expired events with distinct package ids on
// SHIPFILE_EVENTS, 1,000 audit entries, every object gone, nothing left overdue.
func TestTwoInstancesRaceOver1000Packages(t *testing.T) {
	const n = 1000
	_, natsURL := servicetest.StartNATS(t)
	m := servicetest.StartMinIO(t)
	bucket := expirytest.Bucket(t, m)
	pool, dbURL := schematest.Pool(t)
	owner := expirytest.User(t, pool)
	specs := make([]expirytest.Spec, n)
	for i := range specs {
		specs[i] = expirytest.Spec{State: []string{"draft", "active", "revoked"}[i%3], ExpiresIn: time.Hour, Files: 1}
	}
	ps := expirytest.Insert(t, pool, owner, specs...)
	expirytest.Put(t, bucket, expirytest.Keys(ps))

	env := append(s3Env(m, bucket.Bucket),
		"SHIPFILE_DATABASE_URL="+dbURL, "SHIPFILE_NATS_URL="+natsURL,
		"SHIPFILE_EXPIRY_INTERVAL=250ms", "SHIPFILE_EXPIRY_BATCH_SIZE=25", "SHIPFILE_LOG_LEVEL=warn")
	var addrs []string
	for range 2 {
		addr := servicetest.FreeAddr(t)
		servicetest.StartProcess(t, bins["expiry"], append(env, "SHIPFILE_EXPIRY_ADDR="+addr))
		addrs = append(addrs, addr)
	}
	for _, addr := range addrs {
		servicetest.WaitReady(t, addr)
	}

	// Every package's time is up at once: expires_at moved into the past (docs/EXPIRY.md).
	began := time.Now()
	if _, err := pool.Exec(context.Background(), `UPDATE packages SET expires_at = now() - interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	js := servicetest.JetStream(t, natsURL)
	servicetest.WaitFor(t, 120*time.Second, "every package expired, every object deleted, every event published", func() bool {
		return expirytest.Count(t, pool, `SELECT count(*) FROM packages WHERE state <> 'expired'`) == 0 &&
			expirytest.Count(t, pool, `SELECT count(*) FROM object_deletions`) == 0 &&
			expirytest.Count(t, pool, `SELECT count(*) FROM outbox WHERE published_at IS NULL`) == 0 &&
			streamMsgs(t, js) >= n
	})
	took := time.Since(began)

	// Beside the package.expired events, the stream may hold the audit chain's first
	// checkpoint, which an instance writes at its first tick: one at most, whichever
	// instance claims it.
	envs := readEvents(t, js)
	want := map[string]bool{}
	for _, p := range ps {
		want[p.ID] = true
	}
	seen := map[string]bool{}
	checkpoints := 0
	for _, e := range envs {
		if e.GetType() == events.TypeAuditCheckpoint {
			checkpoints++
			continue
		}
		id := e.GetPackageExpired().GetPackage().GetPackageId()
		if e.GetType() != events.TypePackageExpired || !want[id] || seen[id] {
			t.Fatalf("unexpected or repeated event: %v", e)
		}
		seen[id] = true
	}
	if len(seen) != n || checkpoints > 1 {
		t.Fatalf("%d package.expired and %d audit.checkpoint events on %s, want %d and at most 1", len(seen), checkpoints, events.StreamEvents, n)
	}
	if left := expirytest.Objects(t, bucket); len(left) != 0 {
		t.Fatalf("%d objects left, e.g. %s", len(left), left[0])
	}
	if c := expirytest.Count(t, pool, `SELECT count(*) FROM audit_log WHERE actor = 'system' AND action = 'package.expired'`); c != n {
		t.Errorf("%d audit entries, want %d", c, n)
	}
	if c := expirytest.Count(t, pool, `SELECT count(*) FROM outbox`); c != 0 {
		t.Errorf("%d outbox rows left, want none: each leaves once published", c)
	}

	// The instances' own counts add up: nothing was expired or deleted twice.
	var expired, deleted []float64
	servicetest.WaitFor(t, 10*time.Second, "both instances' metrics to add up", func() bool {
		expired, deleted = nil, nil
		var sumE, sumD float64
		for _, addr := range addrs {
			ms := scrape(t, addr)
			expired = append(expired, ms["shipfile_expiry_packages_expired_total"])
			deleted = append(deleted, ms["shipfile_expiry_objects_deleted_total"])
			sumE += ms["shipfile_expiry_packages_expired_total"]
			sumD += ms["shipfile_expiry_objects_deleted_total"]
		}
		return sumE == n && sumD == n
	})
	t.Logf("%d packages expired by two instances in %s (from the UPDATE to the last object deleted and the last event on the stream); instance shares: expired %v, objects deleted %v",
		n, took.Round(time.Millisecond), expired, deleted)
}

// TestExpiresWithinOneIntervalThroughTheGateway checks docs/EXPIRY.md with the real
// gateway and expiry binaries: a finalized package and a draft, each with a file;
// their expires_at moved into the past; both are expired within one interval, the link
// answers 410, the objects are gone, the owner still sees the files listed (and gets a
// 409 for their bytes), package.expired is on the stream and in the audit log.
func TestExpiresWithinOneIntervalThroughTheGateway(t *testing.T) {
	const interval = time.Second
	_, natsURL := servicetest.StartNATS(t)
	m := servicetest.StartMinIO(t)
	bucket := expirytest.Bucket(t, m)
	// An empty database: the gateway and shipctl apply the migrations themselves.
	dbURL := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	common := append(s3Env(m, bucket.Bucket), "SHIPFILE_DATABASE_URL="+dbURL, "SHIPFILE_NATS_URL="+natsURL, "SHIPFILE_LOG_LEVEL=warn",
		servicetest.SecretKeyEnv)
	shipctl := func(args ...string) string { return servicetest.RunCommand(t, bins["shipctl"], common, args...) }
	shipctl("user", "create", "--email", "admin@example.com", "--name", "Admin", "--role", "admin")
	lines := strings.Split(strings.TrimSpace(shipctl("token", "create", "--email", "admin@example.com", "--name", "e2e")), "\n")
	a := servicetest.Client{T: t, Token: lines[len(lines)-1]}

	gwAddr, gwOps := servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	a.Base = "http://" + gwAddr
	servicetest.StartProcess(t, bins["gateway"], append(common, "SHIPFILE_HTTP_ADDR="+gwAddr, "SHIPFILE_OPS_ADDR="+gwOps, "SHIPFILE_PUBLIC_URL="+a.Base))
	servicetest.WaitReady(t, gwOps)
	exAddr := servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["expiry"], append(common, "SHIPFILE_EXPIRY_ADDR="+exAddr, "SHIPFILE_EXPIRY_INTERVAL="+interval.String()))
	servicetest.WaitReady(t, exAddr)

	// A finalized package whose link works, and a draft.
	p := a.Must("POST", "/api/v1/packages", map[string]any{"title": "Q3 report", "recipient_email": "bob@example.com"}, http.StatusCreated)
	id := p["id"].(string)
	f := a.Upload("/api/v1/packages/"+id+"/files", "report.pdf", []byte("%PDF-1.7 tiny"))
	fin := a.Must("POST", "/api/v1/packages/"+id+"/finalize", nil, http.StatusOK)
	linkToken := fin["magic_link"].(string)[strings.LastIndex(fin["magic_link"].(string), "/")+1:]
	if status := get(t, a.Base+"/api/v1/links/"+linkToken); status != http.StatusOK {
		t.Fatalf("link before expiry: %d", status)
	}
	draft := a.Must("POST", "/api/v1/packages", map[string]any{"title": "draft", "recipient_email": "carol@example.com", "direction": "inbound"}, http.StatusCreated)
	draftID := draft["id"].(string)
	a.Upload("/api/v1/packages/"+draftID+"/files", "notes.txt", []byte("notes"))
	if objs := expirytest.Objects(t, bucket); len(objs) != 2 {
		t.Fatalf("objects before expiry: %v", objs)
	}

	// Time is up.
	db := connectDB(t, dbURL)
	if _, err := db.Exec(context.Background(), `UPDATE packages SET expires_at = now() - interval '1 minute'
		WHERE id = ANY($1::uuid[])`, []string{id, draftID}); err != nil {
		t.Fatal(err)
	}
	moved := time.Now()
	var expiresAt time.Time
	if err := db.QueryRow(context.Background(), `SELECT expires_at FROM packages WHERE id = $1`, id).Scan(&expiresAt); err != nil {
		t.Fatal(err)
	}
	servicetest.WaitFor(t, 2*interval+5*time.Second, "both packages expired (API)", func() bool {
		return a.Must("GET", "/api/v1/packages/"+id, nil, http.StatusOK)["state"] == "expired" &&
			a.Must("GET", "/api/v1/packages/"+draftID, nil, http.StatusOK)["state"] == "expired"
	})
	took := time.Since(moved)
	// One interval, plus the time one tick and the polling take.
	if took > interval+time.Second {
		t.Errorf("expired %s after expires_at moved into the past; want within one interval (%s)", took, interval)
	}
	t.Logf("expired %s after expires_at moved into the past (SHIPFILE_EXPIRY_INTERVAL=%s)", took.Round(time.Millisecond), interval)

	// The link is dead, like any other.
	if status := get(t, a.Base+"/api/v1/links/"+linkToken); status != http.StatusGone {
		t.Errorf("link after expiry: %d, want 410", status)
	}
	if status := get(t, a.Base+"/p/"+linkToken); status != http.StatusGone {
		t.Errorf("recipient page after expiry: %d, want 410", status)
	}
	// The objects are gone; the owner still sees what was sent, but not its bytes.
	servicetest.WaitFor(t, 10*time.Second, "the objects deleted", func() bool { return len(expirytest.Objects(t, bucket)) == 0 })
	details := a.Must("GET", "/api/v1/packages/"+id, nil, http.StatusOK)
	if files, _ := details["files"].([]any); len(files) != 1 || details["file_count"] != float64(1) {
		t.Errorf("expired package details: %v", details)
	}
	status, body := a.Call("GET", "/api/v1/packages/"+id+"/files/"+f["id"].(string)+"/content", nil)
	if status != http.StatusConflict || !strings.Contains(fmt.Sprint(body["detail"]), "expired") {
		t.Errorf("owner download of an expired package: %d %v, want 409 naming the state", status, body)
	}
	// Nothing else can happen to it but deletion.
	a.Must("POST", "/api/v1/packages/"+id+"/revoke", nil, http.StatusConflict)

	// package.expired, on the stream, once per package, with the package's head.
	js := servicetest.JetStream(t, natsURL)
	var got []*eventsv1.Envelope
	servicetest.WaitFor(t, 10*time.Second, "package.expired on "+events.StreamEvents, func() bool {
		got = nil
		for _, e := range readEvents(t, js) {
			if e.GetType() == events.TypePackageExpired {
				got = append(got, e)
			}
		}
		return len(got) >= 2
	})
	if len(got) != 2 {
		t.Fatalf("%d package.expired events, want 2", len(got))
	}
	me := a.Must("GET", "/api/v1/me", nil, http.StatusOK)
	for _, e := range got {
		pk := e.GetPackageExpired().GetPackage()
		switch pk.GetPackageId() {
		case id:
			if pk.GetTitle() != "Q3 report" || pk.GetRecipientEmail() != "bob@example.com" || pk.GetDirection() != "outbound" ||
				float64(pk.GetOwnerUserId()) != me["id"] || !e.GetPackageExpired().GetExpiresAt().AsTime().Equal(expiresAt) {
				t.Errorf("package.expired of the finalized package: %v (expires_at %s)", e, expiresAt)
			}
		case draftID:
			if pk.GetDirection() != "inbound" || pk.GetTitle() != "draft" {
				t.Errorf("package.expired of the draft: %v", e)
			}
		default:
			t.Errorf("package.expired of an unknown package: %v", e)
		}
	}

	// The audit log names the system as the actor.
	audit := a.Must("GET", "/api/v1/admin/audit?package_id="+id, nil, http.StatusOK)["items"].([]any)
	found := false
	for _, it := range audit {
		e := it.(map[string]any)
		if e["action"] == "package.expired" && e["actor"] == "system" {
			found = true
		}
	}
	if !found {
		t.Errorf("no system package.expired entry in the audit log: %v", audit)
	}

	// An expired package can still be deleted.
	a.Must("DELETE", "/api/v1/packages/"+id, nil, http.StatusNoContent)
	a.Must("GET", "/api/v1/packages/"+id, nil, http.StatusNotFound)
	ms := scrape(t, exAddr)
	if ms["shipfile_expiry_packages_expired_total"] != 2 || ms["shipfile_expiry_objects_deleted_total"] < 2 {
		t.Errorf("expiry metrics: %v", ms)
	}
}

// connectDB returns a pool on the database at url.
func connectDB(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// get answers the status of an unauthenticated GET.
func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// streamMsgs is the number of messages on SHIPFILE_EVENTS.
func streamMsgs(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, events.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return int(info.State.Msgs)
}

// readEvents reads every envelope on SHIPFILE_EVENTS, in order. It reads through one
// ordered consumer's message iterator, which pulls ahead and recreates its server-side
// consumer by itself when a heartbeat is missed; a Fetch per batch would delete and
// recreate that consumer for every batch, and a batch that came back empty on a loaded
// machine (the new consumer not yet delivering within the batch's wait) was taken for the
// end of the stream. Only the one deadline below bounds the read.
func readEvents(t *testing.T, js jetstream.JetStream) []*eventsv1.Envelope {
	t.Helper()
	want := streamMsgs(t, js)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	it, err := c.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	out := make([]*eventsv1.Envelope, 0, want)
	for len(out) < want {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			t.Fatalf("read %d of the stream's %d messages: %v", len(out), want, err)
		}
		env, err := events.UnmarshalEnvelope(msg.Data())
		if err != nil {
			t.Fatalf("%s: %v", msg.Subject(), err)
		}
		if msg.Subject() != events.Subject(env.GetType()) || msg.Headers().Get(jetstream.MsgIDHeader) != env.GetEventId() {
			t.Errorf("message on %s with Nats-Msg-Id %q carries %s %s", msg.Subject(), msg.Headers().Get(jetstream.MsgIDHeader), env.GetType(), env.GetEventId())
		}
		out = append(out, env)
	}
	return out
}

// scrape reads the unlabelled samples of an instance's /metrics.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out
}
