// Command shipbench measures shipfile against the physical limits of the machine it
// runs on: the real gateway and dispatcher binaries, on real PostgreSQL, NATS and
// MinIO, each figure next to a baseline measured in the same run (the same bytes
// through minio-go straight to MinIO, a bare gin+pgx handler, a plain http.Client), as a
// ratio, because the machine is noisy. It prints a table at the end and exits non-zero
// only when the harness itself fails, not when a target is missed.
//
//	make bench                        the full run (10–12 minutes on 2 cores)
//	go run ./cmd/shipbench -quick     tiny sizes, for development
//	go run ./cmd/shipbench -rows api,events -api-duration 5s
//	go run ./cmd/shipbench -rows api -api-gateways 2 -budget api=3m
//
// It needs PostgreSQL and MinIO as `make up` or `scripts/dev.sh infra` provide them
// (SHIPFILE_TEST_DATABASE_URL, SHIPFILE_S3_*; each row gets its own database and
// bucket) and a nats-server binary (each row runs a private one, because the services'
// stream and consumer names are fixed). It builds the services first, unless
// SHIPBENCH_BIN_DIR names a directory of prebuilt binaries (gateway, shipctl, webhooks,
// expiry, shipfile), as on a machine without Go (SHIPBENCH_BIN_PPROF=1 says they were built
// with the pprof overlay of rig.Build, so that -profile works with them).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
)

// config holds the flags.
type config struct {
	size, bigSize, partSize byteSize
	concurrent, runs        int

	apiClients  int
	apiGateways int
	apiDuration time.Duration
	apiSlice    time.Duration

	// quotaRuns and quotaDuration size the upload and API rows' sides with a quota set.
	quotaRuns     int
	quotaDuration time.Duration

	eventRate     int
	eventDuration time.Duration

	events, subscriptions int
	instances             intList

	natsConfig      string
	dispatcherProcs int

	fairRate     int
	fairDuration time.Duration
	maxInFlight  int

	expiryPackages int
	expiryTarget   time.Duration

	// auditEntries and auditEntriesSmall are the chain's sizes of the audit row's two
	// exports; auditDuration and auditSlice size its create A/B like -api-duration and
	// -api-slice, auditOwners is how many users its clients send as.
	auditEntries, auditEntriesSmall int64
	auditDuration, auditSlice       time.Duration
	auditOwners                     int

	scanFiles int
	scanSize  int64
	// previewSlices is how many times the preview row runs each of its two passes.
	previewSlices int

	rows string
	// tracing, when set ("on" or "full"), runs the api and dispatch rows again with
	// tracing on and compares them with their runs with tracing off.
	tracing string
	budget  budgetFlag
	timeout time.Duration
	out     string
	profile string
	quick   bool
}

// prof records CPU profiles of the services when -profile is set (a no-op otherwise).
var prof *profiler

// allRows are the rows in the order they run.
var allRows = []string{"upload", "tus", "cli", "memory", "download", "api", "audit", "events", "expiry", "scan", "previews", "languages", "fairness", "dispatch"}

// A group starts once the machine's CPU is less than quietBusy busy (or waiting for the
// disk) over a second, or after quietMax.
const (
	quietBusy = 0.2
	quietMax  = 30 * time.Second
)

// dispatchReserve is the time the groups before the dispatcher's leave it at the end of
// the run: it comes last, and on a slow machine it got a few seconds a run.
const dispatchReserve = 60 * time.Second

// budgets bound each group of rows; the whole run is also bounded by -timeout.
var budgets = map[string]time.Duration{
	"transfer":  390 * time.Second, // upload (with and without a quota), tus, cli, download and memory share one gateway and bucket: 5m0.5s in a run that left the memory row unfinished at 5 minutes
	"api":       100 * time.Second, // the baseline, the gateway, and the gateway with a quota
	"audit":     105 * time.Second, // the A/B (2 × 10 s), the fill of 1,000,000 entries (about 45 s on 2 busy cores) and two exports
	"events":    80 * time.Second,
	"dispatch":  180 * time.Second, // runs of 1, 2 and 4 instances and the ordered run (each 10–25 s and its stack's start), the baseline: 1m22s in a full run
	"expiry":    300 * time.Second, // the fill of 100,000 packages of one owner (its usage row updated for each) and their objects takes 2–3.5 min on 2 cores, then ≤ 60 s to expire them
	"fairness":  60 * time.Second,
	"scan":      240 * time.Second,
	"previews":  60 * time.Second,
	"languages": 60 * time.Second,
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == baselineCommand {
		if err := serveBaseline(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "shipbench:", err)
			os.Exit(1)
		}
		return
	}
	var c config
	c.size, c.bigSize, c.partSize = 1<<30, 8<<30, 16<<20
	c.instances = intList{1, 2, 4}
	fs := flag.NewFlagSet("shipbench", flag.ExitOnError)
	fs.Var(&c.size, "size", "file size of the upload and download rows, and of each of the concurrent uploads")
	fs.Var(&c.bigSize, "big-size", "file size of the single large upload of the memory row")
	fs.Var(&c.partSize, "part-size", "SHIPFILE_UPLOAD_PART_SIZE of the gateway, and the baseline's part size")
	fs.IntVar(&c.concurrent, "concurrent", 8, "concurrent uploads of the memory row")
	fs.IntVar(&c.runs, "runs", 5, "repetitions of the upload and download rows (the median is reported)")
	fs.IntVar(&c.apiClients, "api-clients", 32, "concurrent clients of the API row")
	fs.IntVar(&c.apiGateways, "api-gateways", 1, "gateway instances of the API row, on one database (the clients are spread over them; the baseline runs as many processes)")
	fs.DurationVar(&c.apiDuration, "api-duration", 20*time.Second, "duration of each half of the API row")
	fs.DurationVar(&c.apiSlice, "api-slice", 2*time.Second, "the API row alternates baseline and gateway in slices of this long until each had -api-duration (0: one whole half after the other)")
	fs.IntVar(&c.quotaRuns, "quota-runs", 5, "runs of the upload row with a quota set (a default policy with a storage quota and size limits nothing reaches), taking turns with the runs without one (at most -runs; 0: not measured)")
	fs.DurationVar(&c.quotaDuration, "quota-duration", 20*time.Second, "duration of the API row's side with a quota set, its slices taking turns with the others (0: not measured)")
	fs.Int64Var(&c.auditEntries, "audit-entries", 1_000_000, "audit chain entries of the audit row's large export")
	fs.Int64Var(&c.auditEntriesSmall, "audit-entries-small", 100_000, "audit chain entries of the audit row's small export (the RSS growth it is compared with)")
	fs.DurationVar(&c.auditDuration, "audit-duration", 10*time.Second, "duration of each side (chain on, chain off) of the audit row's create A/B")
	fs.DurationVar(&c.auditSlice, "audit-slice", 2*time.Second, "the audit row's A/B alternates its sides in slices of this long")
	fs.IntVar(&c.auditOwners, "audit-owners", 1, "users the audit row's A/B clients send as (client i as user i mod N; 1: the admin, as in the API row)")
	fs.IntVar(&c.eventRate, "event-rate", 200, "finalizes per second of the event latency row")
	fs.DurationVar(&c.eventDuration, "event-duration", 20*time.Second, "duration of the event latency row")
	fs.IntVar(&c.events, "events", 20000, "events of each dispatcher run")
	fs.IntVar(&c.subscriptions, "subscriptions", 4, "subscriptions each event goes to in the dispatcher row")
	fs.Var(&c.instances, "instances", "dispatcher instance counts of the dispatcher row, comma-separated")
	fs.StringVar(&c.natsConfig, "nats-config", "", "a nats-server configuration file the rows' private servers load (-c), e.g. one with disable_sublist_cache: true")
	fs.IntVar(&c.dispatcherProcs, "dispatcher-gomaxprocs", 0, "GOMAXPROCS of each dispatcher process of the dispatcher row (0: Go's default, the machine's or cgroup's CPUs), as a CPU limit per pod gives it")
	fs.IntVar(&c.maxInFlight, "max-in-flight", 0, "max_in_flight of the dispatcher row's subscriptions (0: the API's default, 16)")
	fs.IntVar(&c.fairRate, "fair-rate", 100, "events per second of the dispatcher fairness row (each to 4 subscriptions)")
	fs.DurationVar(&c.fairDuration, "fair-duration", 15*time.Second, "duration of each phase of the dispatcher fairness row")
	fs.IntVar(&c.expiryPackages, "expiry-packages", 100000, "overdue packages of the expiry row")
	fs.DurationVar(&c.expiryTarget, "expiry-target", 60*time.Second, "time the expiry row has to expire them all")
	fs.IntVar(&c.scanFiles, "scan-files", 16, "files of the scanner row")
	fs.Int64Var(&c.scanSize, "scan-size", 64<<20, "bytes of each file of the scanner row")
	fs.IntVar(&c.previewSlices, "preview-slices", 8, "turns of the preview row (each: every image previewed, and every image decoded)")
	fs.StringVar(&c.tracing, "tracing", "", "on or full: measure tracing's cost (the services export OTLP to a sink in shipbench; on: the default sampling, full: every trace sampled): the API row gets a side with tracing on, its slices taking turns with the others, and the dispatch row runs again with tracing on; each compared with tracing off (≥ 0.95×)")
	fs.StringVar(&c.rows, "rows", strings.Join(allRows, ","), "rows to run, comma-separated: "+strings.Join(allRows, ","))
	fs.Var(&c.budget, "budget", "time a row (or group: transfer, api, audit, events, expiry, scan, previews, languages, fairness, dispatch, tracing) may take, as row=duration; repeat or comma-separate, e.g. api=3m,dispatch=8m (-timeout grows to fit unless given)")
	fs.DurationVar(&c.timeout, "timeout", 0, "bound of the whole run; rows still running then are stopped and reported (default: the budgets of the groups, added up, and 2 minutes)")
	fs.StringVar(&c.out, "o", "", "also write the report as Markdown to this file")
	fs.StringVar(&c.profile, "profile", "", "build the services with a pprof endpoint, save CPU profiles of the measured windows in this directory and list their top functions")
	fs.BoolVar(&c.quick, "quick", false, "tiny sizes and durations, for development (flags given explicitly still win)")
	_ = fs.Parse(os.Args[1:])
	if c.apiGateways < 1 {
		fmt.Fprintln(os.Stderr, "shipbench: -api-gateways must be at least 1")
		os.Exit(2)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for group, d := range c.budget {
		budgets[group] = d
	}
	if c.tracing != "" {
		if c.budget["api"] == 0 {
			// The API row's fourth side: the gateway with tracing on, taking its turns.
			budgets["api"] += c.apiDuration + 15*time.Second
		}
		if _, set := c.budget["tracing"]; !set {
			// After the dispatch row: six runs of one dispatcher, tracing off and on.
			budgets["tracing"] = 4 * time.Minute
		}
	}
	if !set["timeout"] {
		// The whole run may take what its rows' budgets add up to, and a build: a default
		// run gives every row its budget, so each reaches its verdict.
		var sum time.Duration
		for _, d := range budgets {
			sum += d
		}
		c.timeout = max(c.timeout, sum+2*time.Minute)
	}
	if c.quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quick := map[string]string{
			"size": "16MiB", "big-size": "64MiB", "runs": "1", "concurrent": "4", "api-duration": "2s", "quota-duration": "2s",
			"event-rate": "50", "event-duration": "2s", "events": "500", "instances": "1,2", "expiry-packages": "1000",
			"fair-duration": "3s", "scan-files": "4", "audit-entries": "20000", "audit-entries-small": "5000", "audit-duration": "2s", "scan-size": "8388608", "preview-slices": "2",
		}
		for name, v := range quick {
			if !set[name] {
				_ = fs.Set(name, v)
			}
		}
	}
	os.Exit(run(c, strings.Join(append([]string{"shipbench"}, os.Args[1:]...), " ")))
}

func run(c config, command string) int {
	rep := &Report{Start: time.Now(), Postgres: describePostgres(context.Background())}
	fmt.Fprintf(os.Stderr, "==> PostgreSQL: %s\n", rep.Postgres)
	want := map[string]bool{}
	for r := range strings.SplitSeq(c.rows, ",") {
		if r = strings.TrimSpace(r); r != "" {
			want[r] = true
		}
	}
	for r := range want {
		if !contains(allRows, r) {
			fmt.Fprintf(os.Stderr, "shipbench: unknown row %q (rows: %s)\n", r, strings.Join(allRows, ","))
			return 2
		}
	}
	deadline := time.Now().Add(c.timeout)
	var err error
	if prof, err = newProfiler(c.profile, rep); err != nil {
		fmt.Fprintln(os.Stderr, "shipbench:", err)
		return 2
	}
	rig.ProfileNATS = c.profile != ""
	rig.NATSConfig = c.natsConfig
	failed := false
	log := os.Stderr

	var bins rig.Bins
	names := []string{"gateway", "shipctl"}
	if want["cli"] {
		names = append(names, "shipfile")
	}
	if want["events"] || want["dispatch"] || want["fairness"] {
		names = append(names, "webhooks")
	}
	if want["expiry"] {
		names = append(names, "expiry")
	}
	if want["scan"] {
		names = append(names, "scanner")
	}
	if dir := os.Getenv("SHIPBENCH_BIN_DIR"); dir != "" {
		if bins, err = prebuilt(dir, names); err != nil {
			fmt.Fprintln(os.Stderr, "shipbench:", err)
			return 2
		}
		if c.profile != "" && !bins.Pprof {
			fmt.Fprintln(os.Stderr, "shipbench: -profile needs binaries with a pprof endpoint: unset SHIPBENCH_BIN_DIR, or set SHIPBENCH_BIN_PPROF=1 for binaries built with shipbench's overlay (as big-machine-bench's bundle may be)")
			return 2
		}
		fmt.Fprintf(log, "==> using the prebuilt %s of %s\n", strings.Join(names, ", "), dir)
	} else {
		binDir, err := os.MkdirTemp("", "shipbench-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "shipbench:", err)
			return 1
		}
		defer os.RemoveAll(binDir)
		fmt.Fprintf(log, "==> building %s\n", strings.Join(names, ", "))
		if err := rig.Run("build", log, func(t testing.TB) { bins = rig.Build(t, binDir, rig.BuildOptions{Pprof: c.profile != ""}, names...) }); err != nil {
			fmt.Fprintln(os.Stderr, "shipbench: build:", err)
			return 1
		}
	}

	group := func(name string, rows []string, fn func(ctx context.Context, t testing.TB)) {
		var any bool
		for _, r := range rows {
			any = any || want[r]
		}
		if !any {
			return
		}
		// Each group starts on a quiet machine: what the one before left running in the
		// background (the expiry row's object removals in MinIO, autovacuum) would be
		// measured as the next group's cost. The wait is reported, and bounded.
		last := deadline
		if name != "dispatch" && name != "tracing" && want["dispatch"] {
			last = deadline.Add(-dispatchReserve)
		}
		qctx, qcancel := context.WithDeadline(context.Background(), last)
		waited, busy := rig.WaitQuiet(qctx, quietBusy, quietMax)
		qcancel()
		if waited > 1500*time.Millisecond {
			fmt.Fprintf(log, "==> waited %s for the machine to settle before %s (%.0f%% busy or waiting for the disk over the last second)\n",
				waited.Round(100*time.Millisecond), name, 100*busy)
		}
		end := time.Now().Add(budgets[name])
		if end.After(last) {
			end = last
		}
		if time.Until(end) <= 0 {
			for _, r := range rows {
				if want[r] {
					rep.Add(Row{What: r, Verdict: "not run (the run's -timeout was reached, less the time kept for the dispatcher row)"})
				}
			}
			return
		}
		fmt.Fprintf(log, "==> %s (at most %s)\n", name, time.Until(end).Round(time.Second))
		start := time.Now()
		ctx, cancel := context.WithDeadline(context.Background(), end)
		defer cancel()
		if err := rig.Run(name, log, func(t testing.TB) { fn(ctx, t); prof.wait() }); err != nil {
			failed = true
			rep.Add(Row{What: name, Verdict: "harness error: " + firstLine(err.Error())})
		}
		fmt.Fprintf(log, "    %s took %s\n", name, time.Since(start).Round(100*time.Millisecond))
	}

	group("transfer", []string{"upload", "tus", "cli", "memory", "download"}, func(ctx context.Context, t testing.TB) {
		transferRows(ctx, t, c, bins, want, rep)
	})
	var sink *otlpSink
	if c.tracing == "on" || c.tracing == "full" {
		sink = newOTLPSink()
		defer sink.close()
	}
	group("api", []string{"api"}, func(ctx context.Context, t testing.TB) { apiRow(ctx, t, c, bins, rep, sink) })
	group("audit", []string{"audit"}, func(ctx context.Context, t testing.TB) { auditRows(ctx, t, c, bins, rep) })
	group("events", []string{"events"}, func(ctx context.Context, t testing.TB) { eventsRow(ctx, t, c, bins, rep) })
	group("expiry", []string{"expiry"}, func(ctx context.Context, t testing.TB) { expiryRow(ctx, t, c, bins, rep) })
	group("scan", []string{"scan"}, func(ctx context.Context, t testing.TB) { scanRow(ctx, t, c, bins, rep) })
	group("previews", []string{"previews"}, func(ctx context.Context, t testing.TB) { previewRow(ctx, t, c, rep) })
	group("languages", []string{"languages"}, func(ctx context.Context, t testing.TB) { languagesRow(ctx, t, c, bins, rep) })
	group("fairness", []string{"fairness"}, func(ctx context.Context, t testing.TB) { fairnessRow(ctx, t, c, bins, rep) })
	// Last: it takes whatever is left of its budget (its runs stop at their share).
	group("dispatch", []string{"dispatch"}, func(ctx context.Context, t testing.TB) { dispatchRows(ctx, t, c, bins, rep) })
	if sink != nil {
		// The API row compared its sides slice by slice; one dispatcher is compared in
		// runs taking turns, tracing off and on.
		group("tracing", []string{"dispatch"}, func(ctx context.Context, t testing.TB) { tracedDispatchRow(ctx, t, c, bins, rep, sink) })
		rep.Rawf("tracing on (%s): the services sent %d OTLP export requests, %d bytes, to shipbench's sink", samplingText(c.tracing), sink.requests.Load(), sink.bytes.Load())
	}

	fmt.Println()
	fmt.Printf("shipbench, %s, %s\n", rep.Start.UTC().Format("2006-01-02 15:04 UTC"), machine())
	rep.PrintTable(os.Stdout)
	if c.out != "" {
		f, err := os.Create(c.out)
		if err == nil {
			rep.Markdown(f, command)
			err = f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "shipbench: report:", err)
			return 1
		}
		fmt.Printf("report written to %s\n", c.out)
	}
	if failed {
		fmt.Println("the harness failed (see above); the table lacks those rows")
		return 1
	}
	return 0
}

// prebuilt returns the binaries names in dir (SHIPBENCH_BIN_DIR), each of which must
// be an executable file.
func prebuilt(dir string, names []string) (rig.Bins, error) {
	// SHIPBENCH_BIN_PPROF=1 says they serve net/http/pprof on SHIPBENCH_PPROF_ADDR (built with
	// rig.Build's Pprof overlay), for -profile.
	bins := rig.Bins{Path: map[string]string{}, Pprof: os.Getenv("SHIPBENCH_BIN_PPROF") == "1"}
	for _, n := range names {
		path := filepath.Join(dir, n)
		fi, err := os.Stat(path)
		if err != nil {
			return bins, fmt.Errorf("SHIPBENCH_BIN_DIR: %w", err)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return bins, fmt.Errorf("SHIPBENCH_BIN_DIR: %s is not an executable file", path)
		}
		bins.Path[n] = path
	}
	return bins, nil
}

// groupOf maps a row to the group whose budget bounds it.
var groupOf = map[string]string{
	"upload": "transfer", "tus": "transfer", "cli": "transfer", "memory": "transfer", "download": "transfer", "transfer": "transfer",
	"api": "api", "audit": "audit", "events": "events", "expiry": "expiry", "scan": "scan", "previews": "previews", "languages": "languages", "fairness": "fairness", "dispatch": "dispatch",
	"tracing": "tracing", // -tracing's dispatcher comparison
}

// budgetFlag is -budget: row=duration pairs, repeated or comma-separated, keyed by group.
type budgetFlag map[string]time.Duration

func (b *budgetFlag) String() string {
	if b == nil || len(*b) == 0 {
		return ""
	}
	parts := make([]string, 0, len(*b))
	for g, d := range *b {
		parts = append(parts, g+"="+d.String())
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func (b *budgetFlag) Set(s string) error {
	if *b == nil {
		*b = budgetFlag{}
	}
	for part := range strings.SplitSeq(s, ",") {
		row, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		group, known := groupOf[strings.TrimSpace(row)]
		if !ok || !known {
			return fmt.Errorf("want row=duration with a row of %s or transfer, e.g. dispatch=8m", strings.Join(allRows, ","))
		}
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			return fmt.Errorf("want a positive duration after %s=, e.g. 3m", row)
		}
		(*b)[group] = d
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// byteSize is a flag of a size in bytes: 1GiB, 16MiB, 512KiB or a plain number.
type byteSize int64

func (b *byteSize) String() string { return formatSize(int64(*b)) }

func (b *byteSize) Set(s string) error {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("want a size such as 1GiB, 16MiB or 4096")
	}
	*b = byteSize(n * mult)
	return nil
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return strconv.FormatInt(n, 10)
}

// intList is a flag of comma-separated positive integers.
type intList []int

func (l *intList) String() string {
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(s string) error {
	var out intList
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return fmt.Errorf("want positive integers, comma-separated")
		}
		out = append(out, n)
	}
	*l = out
	return nil
}
