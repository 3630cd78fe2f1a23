package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
)

// profiler records CPU profiles of the services during measured windows, when -profile
// names a directory: the profiles are saved there and their top functions go into the
// raw figures, to say where the time goes when a target is missed.
type profiler struct {
	dir string
	rep *Report
	wg  sync.WaitGroup
}

// record profiles p for d from now, in the background, under name.
func (pr *profiler) record(ctx context.Context, p *rig.Proc, d time.Duration, name string) {
	if p == nil {
		return
	}
	pr.cpu(d, name, func(path string) error { return p.CPUProfile(ctx, d, path) })
}

// recordNATS profiles the nats-server n for d from now, in the background, under name
// (when n was started with rig.ProfileNATS).
func (pr *profiler) recordNATS(ctx context.Context, n *rig.NATSServer, d time.Duration, name string) {
	if n.ProfileAddr == "" {
		return
	}
	pr.cpu(d, name, func(path string) error { return rig.CPUProfileAt(ctx, n.ProfileAddr, d, path) })
}

// cpu saves, in the background, the CPU profile of d that fetch writes to a path, as name.
func (pr *profiler) cpu(d time.Duration, name string, fetch func(path string) error) {
	if pr == nil || pr.dir == "" {
		return
	}
	pr.wg.Go(func() {
		path := filepath.Join(pr.dir, name+".pprof")
		if err := fetch(path); err != nil {
			pr.rep.Rawf("profile %s: %v", name, err)
			return
		}
		pr.top(fmt.Sprintf("%s (CPU, %s)", name, d.Round(time.Second)), path)
	})
}

// heap saves the process's heap profile after delay, with its top allocation sites by
// memory in use.
func (pr *profiler) heap(ctx context.Context, p *rig.Proc, delay time.Duration, name string) {
	if pr == nil || pr.dir == "" || p == nil {
		return
	}
	pr.wg.Go(func() {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
		path := filepath.Join(pr.dir, name+".pprof")
		if err := p.HeapProfile(ctx, path); err != nil {
			pr.rep.Rawf("heap profile %s: %v", name, err)
			return
		}
		pr.top(name+" (heap in use)", path, "-sample_index=inuse_space")
	})
}

// top records the top of `go tool pprof -top` of a saved profile (only its path where no
// go command is at hand, as on the bigger machine of ../shared/tools/big-machine-bench).
func (pr *profiler) top(name, path string, args ...string) {
	if _, err := exec.LookPath("go"); err != nil {
		pr.rep.Rawf("profile %s, saved as %s (no go command here to list its top)", name, path)
		return
	}
	out, err := exec.Command("go", append(append([]string{"tool", "pprof", "-top", "-nodecount=15"}, args...), path)...).CombinedOutput()
	if err != nil {
		pr.rep.Rawf("profile %s: go tool pprof: %v", name, err)
		return
	}
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// Drop pprof's header lines about the file and the binary.
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") || strings.HasPrefix(l, "Time:") {
			continue
		}
		keep = append(keep, "  "+l)
	}
	pr.rep.Rawf("profile %s, saved as %s:\n%s", name, path, strings.Join(keep, "\n"))
}

// wait waits for the profiles being recorded.
func (pr *profiler) wait() {
	if pr != nil {
		pr.wg.Wait()
	}
}

func newProfiler(dir string, rep *Report) (*profiler, error) {
	if dir == "" {
		return &profiler{rep: rep}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("-profile: %w", err)
	}
	return &profiler{dir: dir, rep: rep}, nil
}
