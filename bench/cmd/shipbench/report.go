package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

// Row is one line of the result table.
type Row struct {
	What     string
	Measured string
	Baseline string
	// Ratio is measured/baseline as "0.93×" ("—" when the row has no baseline).
	Ratio  string
	Target string
	// Verdict is "met", "MISSED (…)", "not run (…)" or "harness error (…)".
	Verdict string
}

// Report collects the rows and the raw figures of a run.
type Report struct {
	mu    sync.Mutex
	Rows  []Row
	Raw   []string
	Start time.Time
	// Postgres says which PostgreSQL the run measured on and how it is configured.
	Postgres string
}

// Add appends a row.
func (r *Report) Add(row Row) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if row.Baseline == "" {
		row.Baseline = "—"
	}
	if row.Ratio == "" {
		row.Ratio = "—"
	}
	r.Rows = append(r.Rows, row)
}

// Rawf records a raw figure (and prints it as it comes).
func (r *Report) Rawf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.Raw = append(r.Raw, line)
	r.mu.Unlock()
	fmt.Fprintln(os.Stderr, "    "+line)
}

// ratio formats a/b as "0.93×".
func ratio(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// verdict says "met" or "MISSED (<how>)".
func verdict(ok bool, how string, args ...any) string {
	if ok {
		return "met"
	}
	return "MISSED (" + fmt.Sprintf(how, args...) + ")"
}

// PrintTable writes the rows as an aligned text table.
func (r *Report) PrintTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "what\tmeasured\tbaseline (same run)\tratio\ttarget\tverdict")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", row.What, row.Measured, row.Baseline, row.Ratio, row.Target, row.Verdict)
	}
	tw.Flush()
}

// Markdown writes the whole report: when, where, the command, the table, the raw figures.
func (r *Report) Markdown(w io.Writer, command string) {
	fmt.Fprintf(w, "### Run of %s\n\n", r.Start.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "- machine: %s\n", machine())
	fmt.Fprintf(w, "- PostgreSQL: %s\n", r.Postgres)
	fmt.Fprintf(w, "- command: `%s`\n", command)
	fmt.Fprintf(w, "- took: %s\n\n", time.Since(r.Start).Round(time.Second))
	fmt.Fprintln(w, "| what | measured | baseline (same run) | ratio | target | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", row.What, row.Measured, row.Baseline, row.Ratio, row.Target, row.Verdict)
	}
	fmt.Fprintln(w, "\nRaw figures:\n\n```")
	for _, l := range r.Raw {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w, "```")
}

// machine describes the host: CPU model and count, memory, kernel, Go version, load.
func machine() string {
	cpu := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if v, ok := strings.CutPrefix(s.Text(), "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
		f.Close()
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"), "%d", &kb)
		mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
	}
	kernel := ""
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		kernel = ", " + strings.TrimSpace(string(out))
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = ", load average at the end " + strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%s × %d CPUs%s%s, %s%s", cpu, runtime.NumCPU(), mem, kernel, runtime.Version(), load)
}

// describePostgres says which PostgreSQL the rows' databases are made on
// (SHIPFILE_TEST_DATABASE_URL; SHIPFILE_BENCH_PG, set by scripts/dev.sh bench, says where
// it comes from) and the settings that change the figures. A server tuned for CI
// (autovacuum off, so tables are never analyzed; durability off) is named as such:
// its figures are not production's.
func describePostgres(ctx context.Context) string {
	origin := os.Getenv("SHIPFILE_BENCH_PG")
	if origin == "" {
		origin = "SHIPFILE_TEST_DATABASE_URL (not started by scripts/dev.sh bench)"
	}
	url := os.Getenv("SHIPFILE_TEST_DATABASE_URL")
	if url == "" {
		return origin + "; SHIPFILE_TEST_DATABASE_URL unset"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Sprintf("%s; unreachable: %v", origin, err)
	}
	defer conn.Close(ctx)
	var version, av, fsync, sc, sb string
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('autovacuum'),
		current_setting('fsync'), current_setting('synchronous_commit'), current_setting('shared_buffers')`).
		Scan(&version, &av, &fsync, &sc, &sb)
	if err != nil {
		return fmt.Sprintf("%s; settings: %v", origin, err)
	}
	kind := "configured like production"
	if av != "on" || fsync != "on" || sc == "off" {
		kind = "TUNED FOR CI, not like production"
	}
	return fmt.Sprintf("%s; %s %s: autovacuum=%s fsync=%s synchronous_commit=%s shared_buffers=%s; services' pools plan_cache_mode=force_custom_plan",
		origin, version, kind, av, fsync, sc, sb)
}
