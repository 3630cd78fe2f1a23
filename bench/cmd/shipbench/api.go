package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// baselineCommand is the hidden sub-command that serves the API row's baseline.
const baselineCommand = "baseline-api"

// apiRow: POST /api/v1/packages from -api-clients concurrent clients for -api-duration,
// against a bare gin handler (this program run as `shipbench baseline-api`, a process of
// its own like the gateway) that decodes the same body and does one pgx INSERT of the
// same row into the same packages table of the same database, with the same pool
// settings. The same client drives both, one after the other. With -api-gateways N,
// N gateways run on the one database (and N baseline processes), client i sending to
// instance i mod N. PostgreSQL's wait events are sampled during both halves. With
// -quota-duration, a third side takes its turns: the same gateways with a quota set
// (quota.go), compared with their slices without one; the two gateway sides take turns
// at following the baseline. With a sink (-tracing), a fourth side takes its turns too:
// as many gateways again, exporting their traces to the sink, compared slice by slice
// with the gateways without tracing.
func apiRow(ctx context.Context, t testing.TB, c config, bins rig.Bins, rep *Report, sink *otlpSink) {
	nats := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: nats.URL})
	var gateways, bases []*rig.Proc
	var gatewayClients, baseClients []*rig.Client
	for range c.apiGateways {
		g := s.StartGateway("SHIPFILE_RATE_LIMIT=0")
		gateways = append(gateways, g)
		gatewayClients = append(gatewayClients, rig.NewClient("http://"+g.Addr, s.Token))
	}
	var tracedGateways []*rig.Proc
	var tracedClients []*rig.Client
	if sink != nil {
		for range c.apiGateways {
			g := s.StartGateway(append([]string{"SHIPFILE_RATE_LIMIT=0"}, sink.env(c.tracing)...)...)
			tracedGateways = append(tracedGateways, g)
			tracedClients = append(tracedClients, rig.NewClient("http://"+g.Addr, s.Token))
		}
	}
	me, err := s.API.Me(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner := strconv.FormatInt(me.Id, 10)

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.apiGateways {
		addr := servicetest.FreeAddr(t)
		base := rig.NewProc(t, "baseline-api-"+strconv.Itoa(i), addr, self, []string{baselineCommand, "-addr", addr, "-db", s.DBURL, "-owner", owner}, nil)
		base.Start()
		base.WaitReady(30 * time.Second)
		bases = append(bases, base)
		baseClients = append(baseClients, rig.NewClient(base.URL(""), s.Token))
	}

	half, quotaHalf, tracedHalf := c.apiDuration, c.quotaDuration, time.Duration(0)
	if sink != nil {
		tracedHalf = half
	}
	if need := 2*half + quotaHalf + tracedHalf + 5*time.Second; time.Until(deadlineOf(ctx)) < need {
		rep.Add(Row{What: "API", Verdict: "not run (budget too short for -api-duration)"})
		return
	}
	instances := ""
	if c.apiGateways > 1 {
		instances = fmt.Sprintf(" (%d processes)", c.apiGateways)
	}
	// The halves run interleaved, a slice of each in turn (baseline first), so that both
	// see the same machine: on shared cores the load of other work comes and goes over
	// seconds, and a ratio of two halves measured one after the other measured mostly that.
	slice := c.apiSlice
	if slice <= 0 || slice > half {
		slice = half
	}
	waits := newWaitSampler(ctx, t, s.DBURL)
	pg := postmasterPid(ctx, s.DBURL)
	base := &phase{procs: bases, clients: baseClients, postmaster: pg}
	gate := &phase{procs: gateways, clients: gatewayClients, postmaster: pg}
	quota := &phase{procs: gateways, clients: gatewayClients, postmaster: pg}
	traced := &phase{procs: tracedGateways, clients: tracedClients, postmaster: pg}
	phases := []*phase{base, gate}
	want := map[*phase]time.Duration{base: half, gate: half, quota: quotaHalf, traced: tracedHalf}
	if quotaHalf > 0 {
		phases = append(phases, quota)
	}
	if tracedHalf > 0 {
		phases = append(phases, traced)
	}
	prof.record(ctx, gateways[0], 2*half-time.Second, "api-gateway")
	// After each gateway slice the outbox is let drain (not timed to either side): events
	// the relays had not yet published would otherwise be published in the baseline's next
	// slice, on its CPU (the row read 0.72× instead of 0.62× while the relay published one
	// row per round trip and fell behind).
	var maxLeft int64
	var draining time.Duration
	db := rig.DB(t, s.DBURL)
	for round := 0; base.elapsed() < half || gate.elapsed() < half || quota.elapsed() < quotaHalf || traced.elapsed() < tracedHalf; round++ {
		order := phases
		if round%2 == 1 {
			// The gateway's sides take turns at following the baseline's slice.
			order = append([]*phase{base}, phases[1:]...)
			slices.Reverse(order[1:])
		}
		for _, ph := range order {
			i := slices.Index(phases, ph)
			if d := min(slice, want[ph]-ph.elapsed()); d > 0 {
				w0 := readWAL(ctx, db)
				waits.set(i)
				if ph == quota {
					// The body's size limits do not matter here: a creation carries no file.
					if err := withQuota(ctx, s.API, 1<<30, func() { ph.run(ctx, c.apiClients, d) }); err != nil {
						t.Fatal(err)
					}
				} else {
					ph.run(ctx, c.apiClients, d)
				}
				waits.set(-1)
				if ph != base {
					left, took := rig.WaitOutboxPublished(t, db, time.Minute)
					maxLeft, draining = max(maxLeft, left), draining+took
				}
				ph.wal = ph.wal.add(readWAL(ctx, db).sub(w0)) // the gateway's with its drain
			}
		}
	}
	b, g := base.result(), gate.result()
	rep.Rawf("API: at the end of a gateway slice at most %d of its package.created events were still in the outbox; draining them took %s in all",
		maxLeft, draining.Round(time.Millisecond))
	how := ""
	if slice < half {
		how = fmt.Sprintf(" (interleaved with the other in slices of %s)", slice)
	}
	rep.Rawf("API baseline (gin + one pgx INSERT)%s: %s%s; machine CPU %.0f%% busy, the baseline used %s of CPU (%.2f ms a request)%s; WAL %s; PostgreSQL waits: %s",
		instances, b, how, 100*base.busy(), base.cpu.Round(10*time.Millisecond), perRequest(base.cpu, b.ok), base.pgCPU(b.ok), base.wal.perRequest(b.ok), waits.summary(0))
	rep.Rawf("API gateway POST /api/v1/packages%s: %s%s; machine CPU %.0f%% busy, the gateway used %s of CPU (%.2f ms a request)%s; WAL %s; PostgreSQL waits: %s",
		instances, g, how, 100*gate.busy(), gate.cpu.Round(10*time.Millisecond), perRequest(gate.cpu, g.ok), gate.pgCPU(g.ok), gate.wal.perRequest(g.ok), waits.summary(1))
	if g.ok == 0 || b.ok == 0 {
		t.Fatalf("no request succeeded (gateway %s; baseline %s)", g, b)
	}
	gatewaysText := ""
	if c.apiGateways > 1 {
		gatewaysText = fmt.Sprintf(", %d gateways", c.apiGateways)
	}
	what := fmt.Sprintf("API: POST /api/v1/packages, %d clients%s, %s", c.apiClients, gatewaysText, half)
	rep.Add(Row{
		What:     what,
		Measured: fmt.Sprintf("%.0f req/s, p50 %s, p99 %s", g.rps(), rig.Ms(g.p50), rig.Ms(g.p99)),
		Baseline: fmt.Sprintf("%.0f req/s, p50 %s, p99 %s (gin + pgx INSERT)", b.rps(), rig.Ms(b.p50), rig.Ms(b.p99)),
		Ratio:    ratio(g.rps(), b.rps()),
		Target:   "≥ 0.70× req/s; p99 reported",
		Verdict:  verdict(g.rps() >= 0.7*b.rps() && g.failed == 0, "%.0f%% below 0.70×, %d failed requests", max(0, (0.7-g.rps()/b.rps())/0.7*100), g.failed),
	})
	// The other gateway sides, each against the gateway slices it took turns with.
	sideRow := func(ph *phase, half time.Duration, label, against, whatPrefix, baseline, target string) {
		r := ph.result()
		rep.Rawf("API gateway %s%s: %s%s; machine CPU %.0f%% busy, the gateway used %s of CPU (%.2f ms a request)%s; WAL %s; PostgreSQL waits: %s",
			label, instances, r, how, 100*ph.busy(), ph.cpu.Round(10*time.Millisecond), perRequest(ph.cpu, r.ok), ph.pgCPU(r.ok), ph.wal.perRequest(r.ok), waits.summary(slices.Index(phases, ph)))
		if r.ok == 0 {
			t.Fatalf("no request %s succeeded (%s)", label, r)
		}
		paired, pairs := pairedRatio(ph.rates, gate.rates)
		rep.Rawf("API %s, slice by slice: %s", against, sliceRatios(ph.rates, gate.rates))
		rep.Add(Row{
			What:     fmt.Sprintf("%s: POST /api/v1/packages, %d clients%s, %s", whatPrefix, c.apiClients, gatewaysText, half),
			Measured: fmt.Sprintf("%.0f req/s, p50 %s, p99 %s", r.rps(), rig.Ms(r.p50), rig.Ms(r.p99)),
			Baseline: fmt.Sprintf("%.0f req/s, p50 %s, p99 %s (%s, slices taking turns)", g.rps(), rig.Ms(g.p50), rig.Ms(g.p99), baseline),
			Ratio:    fmt.Sprintf("%.2f× (median of %d slices' ratios; totals %s)", paired, pairs, ratio(r.rps(), g.rps())),
			Target:   target,
			Verdict:  verdict(paired >= 0.95 && r.failed == 0, "%.0f%% below 0.95×, %d failed requests", max(0, (0.95-paired)/0.95*100), r.failed),
		})
	}
	if quotaHalf > 0 {
		sideRow(quota, quotaHalf, "with a quota set ("+quotaPolicyText(1<<30)+")", "with a quota set against without",
			"API with a quota set", "the same gateway without a quota", "≥ 0.95× of no quota")
	}
	if tracedHalf > 0 {
		sampling := samplingText(c.tracing)
		sideRow(traced, tracedHalf, "with tracing on ("+sampling+")", "with tracing on against off",
			"API, tracing on ("+sampling+")", "gateways of the same build, tracing off", "≥ 0.95× of tracing off")
	}
}

// loadResult sums up a closed-loop load run.
type loadResult struct {
	ok, failed int
	statuses   map[int]int
	elapsed    time.Duration
	p50, p99   time.Duration
}

func (r loadResult) rps() float64 { return float64(r.ok) / r.elapsed.Seconds() }

func (r loadResult) String() string {
	return fmt.Sprintf("%d requests answered 201 and %d not (statuses %v) in %s: %.0f req/s, p50 %s, p99 %s",
		r.ok, r.failed, r.statuses, r.elapsed.Round(time.Millisecond), r.rps(), rig.Ms(r.p50), rig.Ms(r.p99))
}

// phase accumulates one side of the API row over its slices.
type phase struct {
	procs   []*rig.Proc
	clients []*rig.Client
	res     loadResult
	lat     []time.Duration
	cpu     time.Duration // the processes' CPU time during the slices
	// postmaster is PostgreSQL's when it runs on this machine (0: not), pg the CPU time
	// of it and its backends during the slices (every database of the server).
	postmaster int
	pg         time.Duration
	machine    rig.CPUTimes // the machine's CPU ticks during the slices (Total, Idle)
	wal        walStats     // the WAL PostgreSQL wrote during the slices (the whole server's)
	// rates are the requests/s answered 201 of each slice, in order.
	rates []float64
}

// run runs one slice of d.
func (p *phase) run(ctx context.Context, clients int, d time.Duration) {
	var pg0 time.Duration
	if p.postmaster > 0 {
		pg0 = rig.TreeCPU(p.postmaster)
	}
	m0, c0 := rig.ReadCPU(), procsCPU(p.procs)
	r, lat := load(ctx, p.clients, clients, d)
	m1 := rig.ReadCPU()
	p.cpu += procsCPU(p.procs) - c0
	if p.postmaster > 0 {
		p.pg += rig.TreeCPU(p.postmaster) - pg0
	}
	p.machine.Total += m1.Total - m0.Total
	p.machine.Idle += m1.Idle - m0.Idle
	if p.res.statuses == nil {
		p.res.statuses = map[int]int{}
	}
	p.res.ok += r.ok
	p.res.failed += r.failed
	p.rates = append(p.rates, r.rps())
	p.res.elapsed += r.elapsed
	for s, n := range r.statuses {
		p.res.statuses[s] += n
	}
	p.lat = append(p.lat, lat...)
}

func (p *phase) elapsed() time.Duration { return p.res.elapsed }

// pgCPU says how much CPU PostgreSQL used a request, when it runs on this machine.
func (p *phase) pgCPU(ok int) string {
	if p.postmaster == 0 {
		return ""
	}
	return fmt.Sprintf(", PostgreSQL %s (%.2f ms a request)", p.pg.Round(10*time.Millisecond), perRequest(p.pg, ok))
}

// walStats are pg_stat_wal's counters (records, full-page images, bytes) and the
// server's committed transactions (pg_stat_database, which backends report up to a second
// late: over many slices the error evens out).
type walStats struct{ records, fpi, bytes, commits int64 }

func (w walStats) add(o walStats) walStats {
	return walStats{w.records + o.records, w.fpi + o.fpi, w.bytes + o.bytes, w.commits + o.commits}
}

func (w walStats) sub(o walStats) walStats {
	return walStats{w.records - o.records, w.fpi - o.fpi, w.bytes - o.bytes, w.commits - o.commits}
}

// perRequest says how much WAL a request wrote on average.
func (w walStats) perRequest(ok int) string {
	if ok == 0 || w.records == 0 {
		return "not measured"
	}
	n := float64(ok)
	return fmt.Sprintf("%.0f bytes, %.1f records, %.2f full-page images, %.2f commits a request",
		float64(w.bytes)/n, float64(w.records)/n, float64(w.fpi)/n, float64(w.commits)/n)
}

// readWAL reads pg_stat_wal and the commits (zero counters when it cannot: the row then
// says "not measured").
func readWAL(ctx context.Context, db *pgxpool.Pool) walStats {
	var w walStats
	_ = db.QueryRow(ctx, `SELECT wal_records, wal_fpi, wal_bytes::bigint,
		(SELECT sum(xact_commit)::bigint FROM pg_stat_database) FROM pg_stat_wal`).Scan(&w.records, &w.fpi, &w.bytes, &w.commits)
	return w
}

// busy is the machine's busy share during the phase's slices.
func (p *phase) busy() float64 {
	if p.machine.Total == 0 {
		return 0
	}
	return 1 - float64(p.machine.Idle)/float64(p.machine.Total)
}

func (p *phase) result() loadResult {
	r := p.res
	r.p50, r.p99 = rig.Percentile(p.lat, 50), rig.Percentile(p.lat, 99)
	return r
}

// waitSampler samples what the busy backends wait on (see sampleWaits) for interleaved
// phases: each sample counts for the phase set at that moment (none between slices).
type waitSampler struct {
	mu      sync.Mutex
	current int
	counts  map[int]map[string]int
	samples map[int]int
	// stop ends the sampling and closes its pool (at the latest when the test ends).
	stop func()
}

func newWaitSampler(ctx context.Context, t testing.TB, url string) *waitSampler {
	w := &waitSampler{current: -1, counts: map[int]map[string]int{}, samples: map[int]int{}}
	pool, err := database.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	w.stop = sync.OnceFunc(func() { cancel(); <-done; pool.Close() })
	t.Cleanup(w.stop)
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			w.mu.Lock()
			ph := w.current
			w.mu.Unlock()
			if ph < 0 {
				continue
			}
			got := map[string]int{}
			rows, err := pool.Query(ctx, waitsQuery)
			if err != nil {
				continue
			}
			var what string
			var n int
			if _, err := pgx.ForEachRow(rows, []any{&what, &n}, func() error { got[what] += n; return nil }); err != nil {
				continue
			}
			w.mu.Lock()
			if w.counts[ph] == nil {
				w.counts[ph] = map[string]int{}
			}
			for k, n := range got {
				w.counts[ph][k] += n
			}
			w.samples[ph]++
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *waitSampler) set(ph int) {
	w.mu.Lock()
	w.current = ph
	w.mu.Unlock()
}

func (w *waitSampler) summary(ph int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return waitSummary(w.counts[ph], w.samples[ph])
}

// procsCPU is the CPU time the processes used so far, together.
func procsCPU(procs []*rig.Proc) time.Duration {
	var sum time.Duration
	for _, p := range procs {
		sum += rig.ProcCPU(p.Pid())
	}
	return sum
}

// sampleWaits samples, every 100 ms until the returned function is called, what the
// busy backends of the database at url wait on (pg_stat_activity), and returns a
// summary: the share of samples of each wait, most frequent first ("CPU" when a backend
// waits on nothing). A lock queue on a shared row or object shows up as Lock:….
func sampleWaits(ctx context.Context, t testing.TB, url string) func() string {
	w := newWaitSampler(ctx, t, url)
	w.set(0)
	return func() string {
		w.stop()
		return w.summary(0)
	}
}

// waitsQuery counts the busy backends of the current database by what they wait on.
const waitsQuery = `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*)
	FROM pg_stat_activity
	WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()
	GROUP BY 1`

// waitSummary: the average count of busy backends of each wait over samples, most
// frequent first.
func waitSummary(counts map[string]int, samples int) string {
	if samples == 0 {
		return "no samples"
	}
	type wait struct {
		what string
		n    int
	}
	var ws []wait
	for w, n := range counts {
		ws = append(ws, wait{w, n})
	}
	slices.SortFunc(ws, func(a, b wait) int { return b.n - a.n })
	var parts []string
	for i, w := range ws {
		if i == 6 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.1f", w.what, float64(w.n)/float64(samples)))
	}
	return fmt.Sprintf("backends busy on average, by wait (%d samples): %s", samples, strings.Join(parts, ", "))
}

// load runs clients goroutines, each sending POST /api/v1/packages one after the
// other, for d, client i to instances[i mod len(instances)]; latencies are those of
// 201 answers.
func load(ctx context.Context, instances []*rig.Client, clients int, d time.Duration) (loadResult, []time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	res := loadResult{statuses: map[int]int{}}
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			var mine []time.Duration
			statuses := map[int]int{}
			client := instances[i%len(instances)]
			body := rig.NewPackage("bench api " + strconv.Itoa(i))
			for ctx.Err() == nil {
				t0 := time.Now()
				// Raw, not the generated client: this is the measured request, and the
				// baseline's is raw too (see rig/apiclient.go).
				a, err := client.Do(ctx, "POST", "/api/v1/packages", body)
				if ctx.Err() != nil {
					break // cut off by the end of the run: not counted
				}
				if err != nil {
					statuses[-1]++
					continue
				}
				statuses[a.Status]++
				if a.Status == http.StatusCreated {
					mine = append(mine, time.Since(t0))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, mine...)
			for s, n := range statuses {
				res.statuses[s] += n
				if s == http.StatusCreated {
					res.ok += n
				} else {
					res.failed += n
				}
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.p50, res.p99 = rig.Percentile(lat, 50), rig.Percentile(lat, 99)
	return res, lat
}

func perRequest(cpu time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(cpu) / float64(time.Millisecond) / float64(n)
}

func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Hour)
}

// serveBaseline is `shipbench baseline-api -addr A -db URL -owner ID`: POST
// /api/v1/packages decodes the JSON body and inserts one draft package row, nothing
// else (no token check, no outbox row, no audit entry); /readyz answers 200.
func serveBaseline(args []string) error {
	fs := flag.NewFlagSet(baselineCommand, flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	db := fs.String("db", "", "database URL")
	owner := fs.Int64("owner", 0, "owner_user_id of the rows")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := database.Open(ctx, *db)
	if err != nil {
		return err
	}
	defer pool.Close()

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/readyz", func(c *gin.Context) { c.Status(http.StatusOK) })
	r.POST("/api/v1/packages", func(c *gin.Context) {
		var req struct {
			Title          string `json:"title"`
			RecipientEmail string `json:"recipient_email"`
			RecipientName  string `json:"recipient_name"`
		}
		if err := json.NewDecoder(c.Request.Body).Decode(&req); err != nil {
			c.JSON(http.StatusUnprocessableEntity, gin.H{"detail": err.Error()})
			return
		}
		id, _ := uuid.NewV7()
		now := time.Now().UTC()
		_, err := pool.Exec(c.Request.Context(), `INSERT INTO packages
			(id, owner_user_id, title, recipient_email, recipient_name, direction, state, ttl_days, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, 'outbound', 'draft', 7, $6, $7)`,
			id, *owner, req.Title, req.RecipientEmail, req.RecipientName, now, now.Add(7*24*time.Hour))
		if err != nil {
			c.JSON(http.StatusInternalServerError, gin.H{"detail": err.Error()})
			return
		}
		c.JSON(http.StatusCreated, gin.H{"id": id.String(), "title": req.Title, "recipient_email": req.RecipientEmail,
			"recipient_name": req.RecipientName, "direction": "outbound", "state": "draft", "ttl_days": 7,
			"created_at": now, "expires_at": now.Add(7 * 24 * time.Hour)})
	})
	srv := &http.Server{Addr: *addr, Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
