package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/bench/internal/rig"
)

// auditRows: the audit chain's two costs on one gateway and database.
//
//   - The API create row with the chain against the same row without it: POST
//     /api/v1/packages from -api-clients clients (as -audit-owners users), the chain's
//     triggers (audit_chain_link, audit_chain_head_write)
//     enabled for half of the slices and disabled for the other half, interleaved in
//     slices of -audit-slice until each side had -audit-duration. Without the trigger the
//     creations write the same audit rows, unchained. Target ≥ 0.90×.
//   - The export of the chain (GET /api/v1/admin/audit/export, JSONL) at
//     -audit-entries-small and then -audit-entries entries: entries a second, and the
//     gateway's peak RSS during the export over its RSS before it. Target: the growth
//     stays within 16 MiB at both sizes and the larger export's within 4 MiB of the
//     smaller's (memory flat whatever the range); the ratio is the larger export's
//     entries a second over the smaller's.
//
// The chain is filled in bulk (fillChain): entries built and hashed by the database's
// own audit_hash in one recursive query, inserted with the trigger off in the same
// transaction, the head moved to the last, then ANALYZE; the fill is timed, as is the
// trigger's own rate on a sample, for comparison.
func auditRows(ctx context.Context, t testing.TB, c config, bins rig.Bins, rep *Report) {
	nats := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: nats.URL})
	g := s.StartGateway("SHIPFILE_RATE_LIMIT=0")
	db := rig.DB(t, s.DBURL)
	auditCreateAB(ctx, t, c, s, g, db, rep)
	if ctx.Err() != nil {
		return
	}
	auditExport(ctx, t, c, s, g, db, rep)
}

// setChain enables or disables the chain's triggers: the one that links each entry
// (audit_chain_link) and the one that writes the head at commit (audit_chain_head_write).
func setChain(ctx context.Context, t testing.TB, db *pgxpool.Pool, on bool) {
	t.Helper()
	verb := "DISABLE"
	if on {
		verb = "ENABLE"
	}
	if _, err := db.Exec(ctx, `ALTER TABLE audit_log `+verb+` TRIGGER audit_chain_link, `+verb+` TRIGGER audit_chain_head_write`); err != nil {
		t.Fatalf("%s the audit chain's trigger: %v", verb, err)
	}
}

// auditCreateAB is the create row with and without the chain, interleaved.
func auditCreateAB(ctx context.Context, t testing.TB, c config, s *rig.Stack, g *rig.Proc, db *pgxpool.Pool, rep *Report) {
	half := c.auditDuration
	if time.Until(deadlineOf(ctx)) < 2*half+30*time.Second {
		rep.Add(Row{What: "audit: API create with the chain", Verdict: "not run (budget too short for -audit-duration)"})
		return
	}
	slice := c.auditSlice
	if slice <= 0 || slice > half {
		slice = half
	}
	// With -audit-owners N the clients send as N users (client i as user i mod N): one
	// owner's creations take turns on that owner's usage row with or without the chain,
	// while creations of owners in no common round do not.
	clients := []*rig.Client{rig.NewClient("http://"+g.Addr, s.Token)}
	for i := 1; i < c.auditOwners; i++ {
		clients = append(clients, rig.NewClient("http://"+g.Addr, s.UserToken(fmt.Sprintf("owner%d@example.com", i))))
	}
	pg := postmasterPid(ctx, s.DBURL)
	off := &phase{procs: []*rig.Proc{g}, clients: clients, postmaster: pg}
	on := &phase{procs: []*rig.Proc{g}, clients: clients, postmaster: pg}
	waits := newWaitSampler(ctx, t, s.DBURL)
	var seq0 int64
	if err := db.QueryRow(ctx, `SELECT seq FROM audit_chain_head`).Scan(&seq0); err != nil {
		t.Fatal(err)
	}
	for (off.elapsed() < half || on.elapsed() < half) && ctx.Err() == nil {
		for i, ph := range []*phase{off, on} {
			d := min(slice, half-ph.elapsed())
			if d <= 0 {
				continue
			}
			setChain(ctx, t, db, ph == on)
			w0 := readWAL(ctx, db)
			waits.set(i)
			ph.run(ctx, c.apiClients, d)
			waits.set(-1)
			// Each side's events are published before the other's slice, counted to it.
			rig.WaitOutboxPublished(t, db, time.Minute)
			ph.wal = ph.wal.add(readWAL(ctx, db).sub(w0))
		}
	}
	setChain(context.Background(), t, db, true)
	var chained, unchained, seq1 int64
	if err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE seq IS NOT NULL), count(*) FILTER (WHERE seq IS NULL),
		(SELECT seq FROM audit_chain_head) FROM audit_log WHERE action = 'package.create'`).Scan(&chained, &unchained, &seq1); err != nil {
		t.Fatal(err)
	}
	// The head is one row updated by every entry: what its table grew to shows how
	// many of its versions the trigger's lookups had to pass over.
	var headPages int64
	if err := db.QueryRow(ctx, `SELECT pg_relation_size('audit_chain_head') / current_setting('block_size')::bigint`).Scan(&headPages); err != nil {
		t.Fatal(err)
	}
	a, b := on.result(), off.result()
	if a.ok == 0 || b.ok == 0 {
		t.Fatalf("no creation succeeded (with the chain %s; without %s)", a, b)
	}
	if chained != int64(a.ok) || unchained != int64(b.ok) {
		rep.Rawf("audit A/B: %d package.create entries chained and %d not, for %d and %d creations answered 201 (requests cut off at a slice's end may have been written)",
			chained, unchained, a.ok, b.ok)
	}
	how := fmt.Sprintf(" (the two interleaved in slices of %s)", slice)
	rep.Rawf("audit A/B, without the chain: %s%s; the gateway used %s of CPU (%.2f ms a request)%s; WAL %s; PostgreSQL waits: %s",
		b, how, off.cpu.Round(10*time.Millisecond), perRequest(off.cpu, b.ok), off.pgCPU(b.ok), off.wal.perRequest(b.ok), waits.summary(0))
	rep.Rawf("audit A/B, with the chain: %s%s; the gateway used %s of CPU (%.2f ms a request)%s; WAL %s; PostgreSQL waits: %s; the chain grew from %d to %d; the head's table has %d pages",
		a, how, on.cpu.Round(10*time.Millisecond), perRequest(on.cpu, a.ok), on.pgCPU(a.ok), on.wal.perRequest(a.ok), waits.summary(1), seq0, seq1, headPages)
	rep.Add(Row{
		What:     fmt.Sprintf("audit: API create with the chain, %d clients, %d owners, %s", c.apiClients, len(clients), half),
		Measured: fmt.Sprintf("%.0f req/s, p50 %s, p99 %s", a.rps(), rig.Ms(a.p50), rig.Ms(a.p99)),
		Baseline: fmt.Sprintf("%.0f req/s, p50 %s, p99 %s (the chain's trigger off)", b.rps(), rig.Ms(b.p50), rig.Ms(b.p99)),
		Ratio:    ratio(a.rps(), b.rps()),
		Target:   "≥ 0.90× req/s",
		Verdict:  verdict(a.rps() >= 0.9*b.rps() && a.failed == 0, "%.0f%% below 0.90×, %d failed requests", max(0, (0.9-a.rps()/b.rps())/0.9*100), a.failed),
	})
}

// auditExport fills the chain to each size and exports it whole.
func auditExport(ctx context.Context, t testing.TB, c config, s *rig.Stack, g *rig.Proc, db *pgxpool.Pool, rep *Report) {
	rate := triggerRate(ctx, t, db, 2000, 100)
	rep.Rawf("audit: the chain's trigger linked %.0f entries a second (2,000 entries in statements of 100); %d entries through it would take %s",
		rate, c.auditEntries, (time.Duration(float64(c.auditEntries)/rate) * time.Second).Round(time.Second))
	type result struct {
		entries  int64
		took     time.Duration
		bytes    int64
		growth   int64 // KiB
		fillTook time.Duration
	}
	var results []result
	for _, size := range []int64{c.auditEntriesSmall, c.auditEntries} {
		var head int64
		if err := db.QueryRow(ctx, `SELECT seq FROM audit_chain_head`).Scan(&head); err != nil {
			t.Fatal(err)
		}
		fillStart := time.Now()
		if size > head {
			fillChain(ctx, t, db, size-head)
		}
		fillTook := time.Since(fillStart)
		if ctx.Err() != nil {
			return
		}
		checkFill(ctx, t, db)
		// The statistics autovacuum keeps, taken at once: without them the planner
		// reads the export's keyset pages (seq > after AND seq <= last ORDER BY seq
		// LIMIT 1000) through a bitmap scan of the whole rest of the range, a page at a
		// time, which makes the export quadratic in the entries just written.
		analyzeStart := time.Now()
		if _, err := db.Exec(ctx, `ANALYZE audit_log`); err != nil {
			t.Fatal(err)
		}
		analyzeTook := time.Since(analyzeStart)
		var want int64
		var wantHash string
		if err := db.QueryRow(ctx, `SELECT seq, hash FROM audit_chain_head`).Scan(&want, &wantHash); err != nil {
			t.Fatal(err)
		}
		lines, n, last, took, growth := exportOnce(ctx, t, s, g)
		if ctx.Err() != nil {
			return
		}
		// Every entry of the chain: the head as it was before the export, then the
		// export's own audit entry, written before it streams, linked to that head.
		if lines != want+1 || !bytes.Contains(last, []byte(`"action":"audit.export"`)) || !bytes.Contains(last, []byte(`"prev_hash":"`+wantHash+`"`)) {
			t.Fatalf("the export of %d entries and its own: %d lines, the last %.300s; want it linked to %s", want, lines, last, wantHash)
		}
		rep.Rawf("audit export of %d entries (JSONL): %d lines, %s in %s (%.0f entries/s, %s); the gateway's peak RSS %s over its RSS before; the fill took %s (%.0f entries/s), ANALYZE %s",
			want, lines, rig.MiB(float64(n)), took.Round(time.Millisecond), float64(lines)/took.Seconds(), rig.MBps(float64(n)/took.Seconds()),
			rig.MiB(float64(growth)*1024), fillTook.Round(100*time.Millisecond), float64(size-head)/fillTook.Seconds(), analyzeTook.Round(10*time.Millisecond))
		results = append(results, result{entries: lines, took: took, bytes: n, growth: growth, fillTook: fillTook})
	}
	small, big := results[0], results[1]
	const limitKiB, slackKiB = 16 << 10, 4 << 10
	flat := big.growth <= limitKiB && small.growth <= limitKiB && big.growth <= small.growth+slackKiB
	rep.Add(Row{
		What: fmt.Sprintf("audit: export of %d entries (JSONL, GET /api/v1/admin/audit/export)", big.entries),
		Measured: fmt.Sprintf("%.0f entries/s, %s; RSS +%s", float64(big.entries)/big.took.Seconds(), rig.MBps(float64(big.bytes)/big.took.Seconds()),
			rig.MiB(float64(big.growth)*1024)),
		Baseline: fmt.Sprintf("%d entries: %.0f entries/s; RSS +%s", small.entries, float64(small.entries)/small.took.Seconds(), rig.MiB(float64(small.growth)*1024)),
		Ratio:    ratio(float64(big.entries)/big.took.Seconds(), float64(small.entries)/small.took.Seconds()) + " entries/s",
		Target:   "RSS growth ≤ 16 MiB, and within 4 MiB of the smaller export's",
		Verdict:  verdict(flat, "RSS +%s at %d entries, +%s at %d", rig.MiB(float64(big.growth)*1024), big.entries, rig.MiB(float64(small.growth)*1024), small.entries),
	})
}

// triggerRate inserts n entries through the chain's trigger, per statements of per,
// and returns the entries a second.
func triggerRate(ctx context.Context, t testing.TB, db *pgxpool.Pool, n, per int) float64 {
	t.Helper()
	start := time.Now()
	for i := 0; i < n; i += per {
		if _, err := db.Exec(ctx, `INSERT INTO audit_log (actor, action, detail)
			SELECT 'system', 'bench.entry', 'bench entry ' || g FROM generate_series(1, $1::int) g`, per); err != nil {
			t.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// fillChunk is how many entries one statement of fillChain adds.
const fillChunk = 100_000

// fillChain appends n entries to the chain, fillChunk a transaction: each entry built
// as an audit_log row and hashed by audit_hash (the trigger's own function) after the
// one before, in one recursive query; inserted with the trigger off for the
// transaction (ALTER TABLE is transactional, and its lock keeps every other writer of
// audit_log waiting until the commit); the head moved to the last.
func fillChain(ctx context.Context, t testing.TB, db *pgxpool.Pool, n int64) {
	t.Helper()
	for n > 0 && ctx.Err() == nil {
		chunk := min(n, fillChunk)
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sql := range []string{
			// The table first, then the head: a writer holds its insert's lock on the
			// table while it waits for the head.
			`ALTER TABLE audit_log DISABLE TRIGGER audit_chain_link`,
			`SELECT 1 FROM audit_chain_head FOR UPDATE`,
			`WITH RECURSIVE c(n, e, hash) AS (
				SELECT 1::bigint, r, audit_hash(r)
				FROM audit_chain_head h,
				LATERAL (SELECT jsonb_populate_record(NULL::audit_log, jsonb_build_object(
					'seq', h.seq + 1, 'created_at', clock_timestamp(), 'actor', 'system', 'action', 'bench.entry',
					'ip', '', 'user_agent', '', 'detail', 'bench entry ' || (h.seq + 1), 'hits', 1, 'prev_hash', h.hash)) AS r) x
				UNION ALL
				SELECT c.n + 1, r, audit_hash(r)
				FROM c,
				LATERAL (SELECT jsonb_populate_record(NULL::audit_log, jsonb_build_object(
					'seq', (c.e).seq + 1, 'created_at', clock_timestamp(), 'actor', 'system', 'action', 'bench.entry',
					'ip', '', 'user_agent', '', 'detail', 'bench entry ' || ((c.e).seq + 1), 'hits', 1, 'prev_hash', c.hash)) AS r) x
				WHERE c.n < ` + strconv.FormatInt(chunk, 10) + `
			), ins AS (
				INSERT INTO audit_log (created_at, actor, action, ip, user_agent, detail, hits, seq, prev_hash, hash)
				SELECT (e).created_at, (e).actor, (e).action, (e).ip, (e).user_agent, (e).detail, (e).hits, (e).seq, (e).prev_hash, hash FROM c
			)
			UPDATE audit_chain_head SET seq = l.seq, hash = l.hash
			FROM (SELECT (e).seq AS seq, hash FROM c ORDER BY n DESC LIMIT 1) l`,
			`ALTER TABLE audit_log ENABLE TRIGGER audit_chain_link`,
		} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				_ = tx.Rollback(context.Background())
				t.Fatalf("filling the audit chain: %v", err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		n -= chunk
	}
}

// checkFill checks the last entries the fill wrote against what the trigger's function
// makes of them, and that they link.
func checkFill(ctx context.Context, t testing.TB, db *pgxpool.Pool) {
	t.Helper()
	var bad int64
	if err := db.QueryRow(ctx, `SELECT count(*) FROM (
		SELECT a.hash, audit_hash(a) AS recomputed, a.prev_hash, lag(a.hash) OVER (ORDER BY a.seq) AS before
		FROM audit_log a WHERE a.seq > (SELECT seq - 1000 FROM audit_chain_head)) x
		WHERE recomputed <> hash OR (before IS NOT NULL AND before <> prev_hash)`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Fatalf("%d of the chain's last 1,000 entries do not verify after the fill", bad)
	}
}

// exportOnce exports the whole chain through the gateway as JSONL and returns the lines,
// the bytes, the last line, the time it took and the gateway's peak RSS during it over
// its RSS before, in KiB.
func exportOnce(ctx context.Context, t testing.TB, s *rig.Stack, g *rig.Proc) (lines, n int64, last []byte, took time.Duration, growthKiB int64) {
	t.Helper()
	pid := g.Pid()
	before, err := rig.ProcStatusKiB(pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	hwm := rig.ResetPeakRSS(pid) == nil
	var peak int64
	var mu sync.Mutex
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss, err := rig.ProcStatusKiB(pid, "VmRSS"); err == nil {
				mu.Lock()
				peak = max(peak, rss)
				mu.Unlock()
			}
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+g.Addr+"/api/v1/admin/audit/export?format=jsonl", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		stop()
		wg.Wait()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		stop()
		wg.Wait()
		t.Fatalf("export: %d %s", resp.StatusCode, body)
	}
	lc := &lineCounter{}
	n, err = io.CopyBuffer(lc, resp.Body, make([]byte, 256<<10))
	resp.Body.Close()
	took = time.Since(start)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("export after %d bytes: %v", n, err)
	}
	if hwm {
		if v, err := rig.ProcStatusKiB(pid, "VmHWM"); err == nil {
			peak = max(peak, v)
		}
	}
	return lc.lines, n, lc.lastLine(), took, max(0, peak-before)
}

// lineCounter counts the lines written to it and keeps the tail of what it got.
type lineCounter struct {
	lines int64
	tail  []byte
}

func (l *lineCounter) Write(p []byte) (int, error) {
	l.lines += int64(bytes.Count(p, []byte{'\n'}))
	if len(p) >= 4096 {
		l.tail = append(l.tail[:0], p[len(p)-4096:]...)
	} else {
		l.tail = append(l.tail, p...)
		if len(l.tail) > 8192 {
			l.tail = append([]byte(nil), l.tail[len(l.tail)-4096:]...)
		}
	}
	return len(p), nil
}

// lastLine is the last complete line written.
func (l *lineCounter) lastLine() []byte {
	t := bytes.TrimRight(l.tail, "\n")
	if i := bytes.LastIndexByte(t, '\n'); i >= 0 {
		return t[i+1:]
	}
	return t
}
