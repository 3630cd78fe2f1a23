//go:build faults

package faults

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
)

// hangBound is the longest an answer may take during an outage (longer counts as a
// hang), unless a scenario says otherwise.
const hangBound = 10 * time.Second

// call is one request of a mixed load.
type call struct {
	op         string
	start, end time.Time
	status     int // 0: no answer
	detail     bool
	body       string
	err        error
}

// mixed is a load of clients each repeating a package's life (create, upload, finalize)
// and a listing, recording every request.
type mixed struct {
	timeout time.Duration
	stopc   chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	calls   []call
}

// startMixed starts clients whose requests give up after timeout (a hang).
func startMixed(api *rig.Client, clients int, upload int64, timeout time.Duration) *mixed {
	m := &mixed{timeout: timeout, stopc: make(chan struct{})}
	for i := range clients {
		m.wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-m.stopc:
					return
				default:
				}
				var id string
				steps := []struct {
					op string
					do func(ctx context.Context) (rig.Answer, error)
				}{
					{"create", func(ctx context.Context) (rig.Answer, error) {
						a, err := api.Do(ctx, "POST", "/api/v1/packages", rig.NewPackage(fmt.Sprintf("client %d #%d", i, n)))
						id = a.Str("id")
						return a, err
					}},
					{"upload", func(ctx context.Context) (rig.Answer, error) {
						return api.Upload(ctx, id, "file.bin", rig.Payload(upload, uint64(n)))
					}},
					{"finalize", func(ctx context.Context) (rig.Answer, error) {
						return api.Do(ctx, "POST", "/api/v1/packages/"+id+"/finalize", nil)
					}},
					{"list", func(ctx context.Context) (rig.Answer, error) {
						return api.Do(ctx, "GET", "/api/v1/packages?limit=10", nil)
					}},
				}
				for _, st := range steps {
					ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
					c := call{op: st.op, start: time.Now()}
					a, err := st.do(ctx)
					cancel()
					c.end, c.err, c.status, c.detail = time.Now(), err, a.Status, a.IsDetailError()
					if len(a.Body) > 0 && a.Status >= 400 {
						c.body = string(a.Body)
					}
					m.mu.Lock()
					m.calls = append(m.calls, c)
					m.mu.Unlock()
					if err != nil || a.Status >= 300 {
						time.Sleep(100 * time.Millisecond)
						break
					}
				}
			}
		})
	}
	return m
}

func (m *mixed) stop() []call {
	close(m.stopc)
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// tally sums up calls: answers by status, how many were {"detail"} errors, how many got
// no answer (hangs: cut off by hangBound), and examples of bad ones.
type tally struct {
	total, ok, unavailable, fiveHundred, other5xx, otherErr, noAnswer, hangs int
	noDetail                                                                 int
	slowest                                                                  time.Duration
	examples                                                                 []string
}

func count(calls []call) tally {
	var t tally
	for _, c := range calls {
		t.total++
		if d := c.end.Sub(c.start); d > t.slowest {
			t.slowest = d
		}
		switch {
		case c.err != nil:
			t.noAnswer++
			if errors.Is(c.err, context.DeadlineExceeded) {
				t.hangs++
				if len(t.examples) < 3 {
					t.examples = append(t.examples, fmt.Sprintf("%s started %s hung %s", c.op, c.start.Format("15:04:05.000"), c.end.Sub(c.start).Round(time.Millisecond)))
				}
			}
		case c.status < 400:
			t.ok++
		case c.status == http.StatusServiceUnavailable:
			t.unavailable++
		case c.status == http.StatusInternalServerError:
			t.fiveHundred++
		case c.status >= 500:
			t.other5xx++
		default:
			t.otherErr++
		}
		if c.err == nil && c.status >= 400 && !c.detail {
			t.noDetail++
		}
		if (c.err == nil && c.status >= 500 && c.status != http.StatusServiceUnavailable) || (c.err == nil && c.status >= 400 && !c.detail) {
			if len(t.examples) < 3 {
				t.examples = append(t.examples, fmt.Sprintf("%s → %d %.120s", c.op, c.status, c.body))
			}
		}
	}
	return t
}

func (t tally) String() string {
	return fmt.Sprintf("%d requests: %d 2xx, %d 503, %d 500, %d other 5xx, %d 4xx, %d without an answer (%d hung until the client gave up); slowest %s",
		t.total, t.ok, t.unavailable, t.fiveHundred, t.other5xx, t.otherErr, t.noAnswer, t.hangs, t.slowest.Round(time.Millisecond))
}

// during returns the calls that started between from and to.
func during(calls []call, from, to time.Time) []call {
	var out []call
	for _, c := range calls {
		if c.start.After(from) && c.start.Before(to) {
			out = append(out, c)
		}
	}
	return out
}

// firstSuccessAfter returns how long after t the first call of op that started after t
// succeeded (-1 when none did).
func firstSuccessAfter(calls []call, op string, t time.Time) time.Duration {
	sort.Slice(calls, func(i, j int) bool { return calls[i].end.Before(calls[j].end) })
	for _, c := range calls {
		if c.op == op && c.start.After(t) && c.err == nil && c.status < 300 {
			return c.end.Sub(t)
		}
	}
	return -1
}

// TestPostgresOutage: a private PostgreSQL cluster is stopped for 10 s under a mixed
// load. Every request answered during the outage is 503 {"detail"} (no 500, no hang);
// the gateway recovers by itself when PostgreSQL is back; no package is half-written:
// each has its package.created event, each file row its object and each object its row.
func TestPostgresOutage(t *testing.T) {
	pg := rig.StartPostgres(t)
	admin, err := pgx.Connect(context.Background(), pg.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(context.Background(), "CREATE DATABASE shipfile"); err != nil {
		t.Fatal(err)
	}
	admin.Close(context.Background())
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL, DBURL: pg.URL("shipfile"), LogOutbox: true})
	g := s.StartGateway("SHIPFILE_RATE_LIMIT=0")

	m := startMixed(s.API, 6, 64<<10, hangBound)
	time.Sleep(*load / 2)
	pg.Stop("fast")
	stopped := time.Now()
	time.Sleep(10 * time.Second)
	restarting := time.Now()
	pg.Start()
	restarted := time.Now()
	t.Logf("PostgreSQL stopped at %s, started again at %s", stopped.Format("15:04:05.000"), restarted.Format("15:04:05.000"))
	time.Sleep(*load)
	calls := m.stop()

	out := count(during(calls, stopped, restarting))
	all := count(calls)
	recovery := firstSuccessAfter(calls, "create", restarted)
	record(t, "requests started during the 10 s outage", out)
	record(t, "whole run", all)
	record(t, "first package created after PostgreSQL was back", fmt.Sprintf("%.1f s", recovery.Seconds()))
	if all.fiveHundred+all.other5xx > 0 || all.noDetail > 0 {
		t.Errorf("answers other than 503 {\"detail\"}: %v", all.examples)
	}
	if all.hangs > 0 {
		t.Errorf("%d requests hung for %s: %v", all.hangs, hangBound, all.examples)
	}
	if out.unavailable == 0 {
		t.Errorf("no request was answered 503 during the outage: %v", out)
	}
	if recovery < 0 || recovery > 15*time.Second {
		t.Errorf("the gateway did not recover within 15 s of PostgreSQL's restart (%s)", recovery)
	}
	g.WaitReady(30 * time.Second)

	db := rig.DB(t, s.DBURL)
	rig.WaitOutboxPublished(t, db, 60*time.Second)
	checkNoHalfWritten(t, s, db)
}

// checkNoHalfWritten checks that every package has its package.created event in
// SHIPFILE_EVENTS, every file row its object and every object a file row, and that
// every package's file_count matches its files.
func checkNoHalfWritten(t *testing.T, s *rig.Stack, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) {
	t.Helper()
	ctx := context.Background()
	var packages, created, badCounts int
	if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM packages),
		(SELECT count(*) FROM outbox_log WHERE subject = $1),
		(SELECT count(*) FROM packages p WHERE file_count <> (SELECT count(*) FROM files f WHERE f.package_id = p.id))`,
		events.Subject(events.TypePackageCreated)).Scan(&packages, &created, &badCounts); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(ctx, `SELECT object_key FROM files`)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	rowKeys := map[string]bool{}
	for _, k := range keys {
		rowKeys[k] = true
	}
	// Objects of deleted or failed files are queued in object_deletions: not orphans.
	rows, err = db.Query(ctx, `SELECT object_key FROM object_deletions`)
	if err != nil {
		t.Fatal(err)
	}
	queued, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	queuedKeys := map[string]bool{}
	for _, k := range queued {
		queuedKeys[k] = true
	}
	objects := map[string]bool{}
	orphans := 0
	for _, k := range s.ObjectKeys() {
		objects[k] = true
		if !rowKeys[k] && !queuedKeys[k] {
			orphans++
		}
	}
	missing := 0
	for _, k := range keys {
		if !objects[k] {
			missing++
		}
	}
	record(t, "packages / package.created events / file rows / objects", fmt.Sprintf("%d / %d / %d / %d", packages, created, len(keys), len(objects)))
	record(t, "half-written: packages without their event, file_count mismatches, rows without object, objects without row",
		fmt.Sprintf("%d, %d, %d, %d", packages-created, badCounts, missing, orphans))
	if packages != created || badCounts > 0 || missing > 0 || orphans > 0 {
		t.Errorf("half-written state: %d packages but %d created events, %d file_count mismatches, %d rows without object, %d orphan objects",
			packages, created, badCounts, missing, orphans)
	}
}

// TestMinIOOutage: a private MinIO is killed while files stream through the gateway and
// kept down for a few seconds under a mixed load. The uploads under way and those during
// the outage fail with 503 {"detail"} and leave no file row; nothing is half-written;
// uploads work again once MinIO is back; the multipart uploads the failures left are
// aborted by the expiry service's sweep.
func TestMinIOOutage(t *testing.T) {
	mio := servicetest.StartMinIO(t)
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL, LogOutbox: true, S3: &storage.Config{
		Endpoint: mio.Endpoint, AccessKey: mio.AccessKey, SecretKey: mio.SecretKey,
	}})
	s.StartGateway("SHIPFILE_RATE_LIMIT=0", "SHIPFILE_UPLOAD_PART_SIZE="+itoa(5<<20))

	// Big uploads under way when MinIO dies.
	type result struct {
		a   rig.Answer
		err error
		end time.Time
	}
	big := make(chan result, 3)
	for i := range 3 {
		pkg := s.API.MustCreatePackage(t, rig.PackageBody("big "+itoa(i))).Id.String()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			a, err := s.API.Upload(ctx, pkg, "big.bin", rig.Throttle(rig.Payload(48<<20, uint64(i)), 6<<20))
			big <- result{a, err, time.Now()}
		}()
	}
	// minio-go retries a refused request ten times with back-off before it gives up,
	// so an upload may take that long to be answered 503; longer is a hang.
	m := startMixed(s.API, 4, 256<<10, 30*time.Second)
	servicetest.WaitFor(t, 20*time.Second, "multipart uploads under way", func() bool { return len(s.IncompleteUploads()) >= 3 })
	stopped := time.Now()
	mio.Stop()
	for i := range 3 {
		r := <-big
		record(t, "big upload "+itoa(i+1)+" under way when MinIO died", describe(r.a, r.err)+fmt.Sprintf(", %.1f s after the kill", r.end.Sub(stopped).Seconds()))
		if r.err != nil || r.a.Status != http.StatusServiceUnavailable || !r.a.IsDetailError() {
			t.Errorf("an upload under way when MinIO died got %s, want 503 {\"detail\"}", describe(r.a, r.err))
		}
	}
	time.Sleep(max(0, 5*time.Second-time.Since(stopped)))
	restarting := time.Now()
	record(t, "MinIO down for", restarting.Sub(stopped).Round(100*time.Millisecond).String())
	mio.Start()
	restarted := time.Now()
	time.Sleep(*load / 2)
	calls := m.stop()

	var uploads []call
	for _, c := range during(calls, stopped, restarting) {
		if c.op == "upload" {
			uploads = append(uploads, c)
		}
	}
	out := count(during(calls, stopped, restarting))
	all := count(calls)
	recovery := firstSuccessAfter(calls, "upload", restarted)
	record(t, "requests started during the outage", out)
	record(t, "uploads started during the outage", count(uploads))
	record(t, "whole run", all)
	record(t, "first upload stored after MinIO was back", fmt.Sprintf("%.1f s", recovery.Seconds()))
	if all.fiveHundred+all.other5xx > 0 || all.noDetail > 0 || all.hangs > 0 {
		t.Errorf("answers other than 503 {\"detail\"}, or hangs: %v; %v", all, all.examples)
	}
	if u := count(uploads); u.unavailable == 0 {
		t.Errorf("no upload started during the outage was answered 503: %v", u)
	}
	if recovery < 0 {
		t.Errorf("no upload succeeded after MinIO came back")
	}

	db := rig.DB(t, s.DBURL)
	rig.WaitOutboxPublished(t, db, 60*time.Second)
	// The gateway removes what a failed upload stored once storage answers again; the
	// expiry service aborts the multipart uploads it could not abort.
	record(t, "incomplete multipart uploads left by the failures", len(s.IncompleteUploads()))
	s.StartService("expiry", "SHIPFILE_EXPIRY_INTERVAL=1s", "SHIPFILE_EXPIRY_STALE_UPLOAD_AGE=1s")
	servicetest.WaitFor(t, 60*time.Second, "the stale multipart uploads to be aborted and queued objects removed", func() bool {
		var queued int
		_ = db.QueryRow(context.Background(), `SELECT count(*) FROM object_deletions`).Scan(&queued)
		return len(s.IncompleteUploads()) == 0 && queued == 0
	})
	checkNoHalfWritten(t, s, db)
}
