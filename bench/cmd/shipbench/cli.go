package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
)

// cliRow: `shipfile send` of one file of -size (the command line: create, tus upload
// from a file on disk with its SHA-256 computed on the way, the check against the
// server's records, finalize), timed from start to exit, as a ratio of the multipart
// upload row of the same run (its median rate).
func (x *transfer) cliRow(ctx context.Context) {
	t, size := x.t, int64(x.c.size)
	what := fmt.Sprintf("shipfile send, 1 file of %s (median of %d)", formatSize(size), x.c.runs)
	if x.multipartRate <= 0 {
		x.rep.Add(Row{What: what, Verdict: "needs the upload row in the same run"})
		return
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "big.bin")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, rig.Payload(size, x.nextSeed())); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"SHIPFILE_URL="+x.s.API.Base, "SHIPFILE_TOKEN="+x.s.API.Token,
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
	var rates []float64
	for i := range x.c.runs {
		cmd := exec.CommandContext(ctx, x.s.Bins.Path["shipfile"], "send", file, "--to", "recipient@example.com",
			"--title", fmt.Sprintf("bench cli %d", i+1), "--json", "--quiet")
		cmd.Env = env
		cmd.Stderr = os.Stderr
		start := time.Now()
		out, err := cmd.Output()
		took := time.Since(start)
		if ctx.Err() != nil {
			x.notFinished(what)
			return
		}
		if err != nil {
			t.Fatalf("shipfile send: %v", err)
		}
		var doc struct {
			Package struct {
				ID string `json:"id"`
			} `json:"package"`
		}
		if err := json.Unmarshal(out, &doc); err != nil || doc.Package.ID == "" {
			t.Fatalf("shipfile send --json: %v %s", err, out)
		}
		if err := x.s.API.DeletePackage(ctx, doc.Package.ID); err != nil {
			t.Fatal(err)
		}
		rates = append(rates, float64(size)/took.Seconds())
		x.rep.Rawf("shipfile send run %d: %d B in %s = %s", i+1, size, took.Round(time.Millisecond), rig.MBps(rates[len(rates)-1]))
	}
	g := rig.Median(rates)
	x.rep.Add(Row{
		What:     what,
		Measured: rig.MBps(g), Baseline: rig.MBps(x.multipartRate) + " (the multipart upload row)", Ratio: ratio(g, x.multipartRate),
		Target:  "≥ 0.90×",
		Verdict: verdict(g >= 0.9*x.multipartRate, "%.0f%% below 0.90×", (0.9-g/x.multipartRate)/0.9*100),
	})
}
