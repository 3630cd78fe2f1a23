//go:build faults

// Package faults kills and restarts the real processes (gateway, dispatchers, NATS,
// PostgreSQL, MinIO, the SMTP server, clamd) under load and checks, at the end of each
// scenario, what arrived: nothing lost, duplicates recognisable, errors answered 503
// with {"detail"}. The scenarios run only with the build tag faults (make test-faults),
// never in make test. At the end a table of the figures is printed (and written as
// Markdown to SHIPFILE_FAULTS_REPORT when set): what was sent, what arrived, what was
// lost or duplicated, which requests got a 5xx.
package faults

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
)

// bins are the binaries, built once for the package.
var bins rig.Bins

// load is how long the scenarios keep their load up around each fault (-load).
var load = flag.Duration("load", 8*time.Second, "duration of each scenario's load")

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "shipfile-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	err = rig.Run("build", os.Stderr, func(t testing.TB) {
		bins = rig.Build(t, dir, rig.BuildOptions{}, "gateway", "shipctl", "webhooks", "mailer", "expiry", "scanner")
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	start := time.Now()
	code := m.Run()
	os.RemoveAll(dir)
	printFigures(start)
	os.Exit(code)
}

// figure is one number a scenario reports.
type figure struct {
	scenario, name string
	value          any
}

var (
	figuresMu sync.Mutex
	figures   []figure
	verdicts  = map[string]string{}
	order     []string
)

// record notes a figure of the running scenario.
func record(t *testing.T, name string, value any) {
	t.Helper()
	figuresMu.Lock()
	defer figuresMu.Unlock()
	sc := t.Name()
	if _, ok := verdicts[sc]; !ok {
		order = append(order, sc)
		verdicts[sc] = "?"
		t.Cleanup(func() {
			figuresMu.Lock()
			defer figuresMu.Unlock()
			verdicts[sc] = "PASS"
			if t.Failed() {
				verdicts[sc] = "FAIL"
			}
		})
	}
	figures = append(figures, figure{sc, name, value})
	t.Logf("%s: %v", name, value)
}

func printFigures(start time.Time) {
	figuresMu.Lock()
	defer figuresMu.Unlock()
	if len(figures) == 0 {
		return
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nscenario\tresult\tfigure\tvalue")
	for _, sc := range order {
		first := true
		for _, f := range figures {
			if f.scenario != sc {
				continue
			}
			name, verdict := "", ""
			if first {
				name, verdict = sc, verdicts[sc]
				first = false
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", name, verdict, f.name, f.value)
		}
	}
	tw.Flush()
	path := os.Getenv("SHIPFILE_FAULTS_REPORT")
	if path == "" {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### Fault scenarios, %s (took %s)\n\n", start.UTC().Format("2006-01-02 15:04 UTC"), time.Since(start).Round(time.Second))
	fmt.Fprintln(&b, "| scenario | result | figure | value |\n|---|---|---|---|")
	for _, sc := range order {
		first := true
		for _, f := range figures {
			if f.scenario != sc {
				continue
			}
			name, verdict := "", ""
			if first {
				name, verdict = "`"+sc+"`", verdicts[sc]
				first = false
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %v |\n", name, verdict, f.name, f.value)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		_ = os.WriteFile(path, []byte(b.String()), 0o644)
	}
}
