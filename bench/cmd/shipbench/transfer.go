package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/bench/internal/rig"
)

// transfer is the state the upload, memory and download rows share: one gateway on one
// bucket, and the last file uploaded (which the download row reads).
type transfer struct {
	t    testing.TB
	c    config
	s    *rig.Stack
	rep  *Report
	seed uint64
	// multipartRate is the upload row's median (bytes/s), the tus row's baseline.
	multipartRate float64
}

// transferRows runs the upload, download and memory rows that want selects.
//
// upload: one file of -size through POST /packages/{id}/files, against minio-go's
// PutObject of the same bytes to the same MinIO, streamed (size unknown) with the same
// part size and one thread, as the gateway does; runs alternate which goes first. The
// same uploads with a quota set (quota.go) take turns with them, against the gateway's
// runs without one.
//
// download: that file through the magic link, against minio-go's GetObject of the
// same object.
//
// memory: a fresh gateway's peak RSS (VmHWM, reset through clear_refs before each phase)
// over its idle RSS, during one upload of -size, -concurrent uploads of -size at once,
// and one upload of -big-size.
func transferRows(ctx context.Context, t testing.TB, c config, bins rig.Bins, want map[string]bool, rep *Report) {
	nats := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: nats.URL})
	s.StartGateway(
		"SHIPFILE_UPLOAD_PART_SIZE="+strconv.FormatInt(int64(c.partSize), 10),
		"SHIPFILE_RATE_LIMIT=0",
		"SHIPFILE_MAX_FILE_SIZE="+strconv.FormatInt(max(int64(c.size), int64(c.bigSize)), 10),
	)
	x := &transfer{t: t, c: c, s: s, rep: rep}

	var pkgID, fileID string
	switch {
	case want["upload"] || want["tus"] || want["cli"]:
		pkgID, fileID = x.uploadRow(ctx, want["upload"])
	case want["download"]:
		// The download row alone needs one file, not the upload row's runs.
		var err error
		if pkgID, fileID, _, err = x.upload(ctx, int64(c.size)); err != nil {
			if ctx.Err() != nil {
				x.notFinished("download")
				return
			}
			t.Fatalf("gateway upload: %v", err)
		}
	}
	if want["tus"] {
		x.tusRow(ctx)
	}
	if want["cli"] {
		x.cliRow(ctx)
	}
	if want["download"] && pkgID != "" {
		x.downloadRow(ctx, pkgID, fileID)
	}
	if pkgID != "" {
		if err := x.s.API.DeletePackage(ctx, pkgID); err != nil {
			t.Fatal(err)
		}
	}
	if want["memory"] || want["tus"] {
		x.memoryRows(ctx, want["memory"], want["tus"])
	}
}

func (x *transfer) nextSeed() uint64 {
	x.seed++
	return x.seed
}

// upload sends one file of size through the gateway into a new package and returns
// the package and file ids and the time the upload took.
func (x *transfer) upload(ctx context.Context, size int64) (pkgID, fileID string, took time.Duration, err error) {
	p, err := x.s.API.CreatePackage(ctx, rig.PackageBody("bench upload"))
	if err != nil {
		return "", "", 0, err
	}
	pkgID = p.Id.String()
	start := time.Now()
	status, answer, err := plainUpload(ctx, x.s.API.Base, x.s.API.Token, pkgID, "big.bin", rig.Payload(size, x.nextSeed()))
	took = time.Since(start)
	if err != nil {
		return pkgID, "", took, fmt.Errorf("upload: %w", err)
	}
	id, _ := answer["id"].(string)
	if status != http.StatusCreated || answer["size"] != float64(size) || id == "" {
		return pkgID, "", took, fmt.Errorf("upload answered %d %v, want 201 with size %d", status, answer, size)
	}
	return pkgID, id, took, nil
}

// plainUpload is the plainest client a user writes (issue 21): a multipart.Writer over
// an io.Pipe, default buffers everywhere, http.DefaultClient, the answer decoded as
// JSON. The upload row measures the gateway with it.
func plainUpload(ctx context.Context, base, token, packageID, filename string, r io.Reader) (int, map[string]any, error) {
	pr, contentType := rig.MultipartFile(filename, r)
	defer pr.CloseWithError(io.ErrClosedPipe) // the writer stops when the server answered early
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/packages/"+packageID+"/files", pr)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var answer map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("answer %d: %w", resp.StatusCode, err)
	}
	return resp.StatusCode, answer, nil
}

// directPut is the upload baseline: minio-go streaming the same bytes straight to
// MinIO, size unknown, with the gateway's part size and one thread.
func (x *transfer) directPut(ctx context.Context, size int64) (time.Duration, error) {
	key := "baseline/" + strconv.FormatUint(x.seed, 10)
	start := time.Now()
	info, err := x.s.Objects.Client.PutObject(ctx, x.s.Objects.Bucket, key, rig.Payload(size, x.nextSeed()), -1,
		minio.PutObjectOptions{PartSize: uint64(x.c.partSize), NumThreads: 1, ContentType: "application/octet-stream"})
	took := time.Since(start)
	if err != nil {
		return took, err
	}
	if info.Size != size {
		return took, fmt.Errorf("baseline stored %d bytes, want %d", info.Size, size)
	}
	_ = x.s.Objects.Client.RemoveObject(context.Background(), x.s.Objects.Bucket, key, minio.RemoveObjectOptions{})
	return took, nil
}

// uploadRow runs the upload row: -runs times each, the baseline and the gateway, and
// (for the first -quota-runs runs, when report is set) the gateway with a quota set
// (quota.go), each run starting with a different one of them. It returns the package
// and file of the gateway's last upload.
func (x *transfer) uploadRow(ctx context.Context, report bool) (lastPkg, lastFile string) {
	t, size := x.t, int64(x.c.size)
	var gw, base, quota []float64
	// The gateway's CPU seconds of each upload without and with a quota: on shared cores
	// they vary less than the rates, which the other work on the machine sets.
	var gwCPUs, quotaCPUs []float64
	// gateway uploads one file through the gateway, as the side named what, and records
	// its rate in rates and its CPU time in cpus; false when the row's budget ended.
	gateway := func(run int, what string, rates, cpus *[]float64) bool {
		cpu, gwCPU := rig.ReadCPU(), rig.ProcCPU(x.s.Gateway.Pid())
		pkg, file, took, err := x.upload(ctx, size)
		if ctx.Err() != nil {
			x.notFinished("upload", "download")
			return false
		}
		if err != nil {
			t.Fatalf("gateway upload (%s): %v", what, err)
		}
		used := rig.ProcCPU(x.s.Gateway.Pid()) - gwCPU
		*rates, *cpus = append(*rates, float64(size)/took.Seconds()), append(*cpus, used.Seconds())
		x.rep.Rawf("upload run %d: %s POST /packages/{id}/files %d B in %s = %s; machine CPU %.0f%% busy, the gateway used %s of CPU",
			run, what, size, took.Round(time.Millisecond), rig.MBps(float64(size)/took.Seconds()), 100*cpu.BusySince(),
			used.Round(10*time.Millisecond))
		if lastPkg != "" {
			if err := x.s.API.DeletePackage(ctx, lastPkg); err != nil {
				t.Fatal(err)
			}
		}
		lastPkg, lastFile = pkg, file
		return true
	}
	for i := range x.c.runs {
		sides := []string{"baseline", "gateway"}
		if report && i < x.c.quotaRuns {
			sides = append(sides, "quota")
		}
		for j := range sides {
			switch sides[(i+j)%len(sides)] {
			case "baseline":
				cpu := rig.ReadCPU()
				took, err := x.directPut(ctx, size)
				if ctx.Err() != nil {
					x.notFinished("upload", "download")
					return "", ""
				}
				if err != nil {
					t.Fatalf("baseline PutObject: %v", err)
				}
				base = append(base, float64(size)/took.Seconds())
				x.rep.Rawf("upload run %d: baseline minio-go PutObject %d B in %s = %s; machine CPU %.0f%% busy",
					i+1, size, took.Round(time.Millisecond), rig.MBps(float64(size)/took.Seconds()), 100*cpu.BusySince())
			case "gateway":
				if i == 0 && len(base) > 0 {
					prof.record(ctx, x.s.Gateway, time.Duration(float64(size)/base[0]*float64(time.Second)), "upload-gateway")
				}
				if !gateway(i+1, "gateway", &gw, &gwCPUs) {
					return "", ""
				}
			case "quota":
				if i == 0 && len(base) > 0 {
					prof.record(ctx, x.s.Gateway, time.Duration(float64(size)/base[0]*float64(time.Second)), "upload-gateway-quota")
				}
				ok := true
				if err := withQuota(ctx, x.s.API, size, func() { ok = gateway(i+1, "gateway with a quota", &quota, &quotaCPUs) }); err != nil && ctx.Err() == nil {
					t.Fatal(err)
				}
				if !ok {
					return "", ""
				}
			}
		}
	}
	x.multipartRate = rig.Median(gw)
	if report {
		g, b := rig.Median(gw), rig.Median(base)
		x.rep.Add(Row{
			What:     fmt.Sprintf("upload, 1 file of %s, multipart.Writer over io.Pipe, http.DefaultClient (median of %d)", formatSize(size), x.c.runs),
			Measured: rig.MBps(g), Baseline: rig.MBps(b) + " (minio-go PutObject)", Ratio: ratio(g, b),
			Target:  "≥ 0.95×",
			Verdict: verdict(g >= 0.95*b, "%.0f%% below 0.95×", (0.95-g/b)/0.95*100),
		})
		if len(quota) > 0 {
			q := rig.Median(quota)
			paired, pairs := pairedRatio(quota, gw)
			x.rep.Rawf("upload with a quota set against without, run by run: %s", sliceRatios(quota, gw))
			x.rep.Add(Row{
				What: fmt.Sprintf("upload with a quota set, 1 file of %s, the same client (median of %d; %s)",
					formatSize(size), len(quota), quotaPolicyText(size)),
				Measured: fmt.Sprintf("%s, gateway CPU %.2f s (median)", rig.MBps(q), rig.Median(quotaCPUs)),
				Baseline: fmt.Sprintf("%s, gateway CPU %.2f s (the same gateway without a quota, runs taking turns)", rig.MBps(g), rig.Median(gwCPUs)),
				Ratio: fmt.Sprintf("%.2f× (median of %d runs' ratios; medians %s, CPU %s)", paired, pairs, ratio(q, g),
					ratio(rig.Median(quotaCPUs), rig.Median(gwCPUs))),
				Target:  "≥ 0.95× of no quota",
				Verdict: verdict(paired >= 0.95, "%.0f%% below 0.95×", (0.95-paired)/0.95*100),
			})
		}
	}
	return lastPkg, lastFile
}

func (x *transfer) downloadRow(ctx context.Context, pkgID, fileID string) {
	t, size := x.t, int64(x.c.size)
	fin, err := x.s.API.Finalize(ctx, pkgID)
	if err != nil {
		t.Fatal(err)
	}
	url := x.s.Gateway.URL("/api/v1/links/" + rig.LinkToken(fin.MagicLink) + "/files/" + fileID)
	key := "packages/" + pkgID + "/" + fileID
	minioPids, self := rig.PidsNamed("minio"), os.Getpid()
	var gw, base []float64
	runs := downloadRuns(x.c.runs)
	for i := range runs {
		for j := range 2 {
			baseline := (i+j)%2 == 0
			if !baseline && i == 0 && len(base) > 0 {
				prof.record(ctx, x.s.Gateway, time.Duration(float64(size)/base[0]*float64(time.Second)), "download-gateway")
			}
			cpu, gwCPU, minioCPU, selfCPU := rig.ReadCPU(), rig.ProcCPU(x.s.Gateway.Pid()), rig.ProcsCPU(minioPids), rig.ProcCPU(self)
			start := time.Now()
			var n int64
			var err error
			if baseline {
				n, err = x.directGet(ctx, key)
			} else {
				n, err = plainDownload(ctx, url)
			}
			took := time.Since(start)
			if ctx.Err() != nil {
				x.notFinished("download")
				return
			}
			if err == nil && n != size {
				err = fmt.Errorf("got %d bytes, want %d", n, size)
			}
			if err != nil {
				t.Fatalf("download run %d: %v", i+1, err)
			}
			rate := float64(size) / took.Seconds()
			perGiB := func(d time.Duration) time.Duration {
				return (d * (1 << 30) / time.Duration(size)).Round(10 * time.Millisecond)
			}
			usage := fmt.Sprintf("machine CPU %.0f%% busy; CPU per GiB: gateway %s, MinIO %s, shipbench (the client) %s",
				100*cpu.BusySince(), perGiB(rig.ProcCPU(x.s.Gateway.Pid())-gwCPU), perGiB(rig.ProcsCPU(minioPids)-minioCPU),
				perGiB(rig.ProcCPU(self)-selfCPU))
			if baseline {
				base = append(base, rate)
				x.rep.Rawf("download run %d: baseline minio-go GetObject %d B in %s = %s; %s", i+1, size, took.Round(time.Millisecond), rig.MBps(rate), usage)
			} else {
				gw = append(gw, rate)
				x.rep.Rawf("download run %d: gateway magic link %d B in %s = %s; %s", i+1, size, took.Round(time.Millisecond), rig.MBps(rate), usage)
			}
		}
	}
	g, b := rig.Median(gw), rig.Median(base)
	x.rep.Add(Row{
		What:     fmt.Sprintf("download, 1 file of %s via the magic link, http.DefaultClient + io.Copy (median of %d)", formatSize(size), runs),
		Measured: rig.MBps(g), Baseline: rig.MBps(b) + " (minio-go GetObject)", Ratio: ratio(g, b),
		Target:  "≥ 0.95×",
		Verdict: verdict(g >= 0.95*b, "%.0f%% below 0.95×", (0.95-g/b)/0.95*100),
	})
}

// downloadRuns is how many times the download row reads its file each way: three times
// the other transfer rows' -runs. A download of 1 GiB takes well under a second here, so
// one run is a sample of a moment of a shared machine (pairs of one run spread
// 0.76–1.40×); more of them cost seconds and steady the medians.
func downloadRuns(runs int) int { return 3 * runs }

// plainDownload is the plainest client a user writes (issue 21): http.Get (with the
// row's context, so through http.DefaultClient) and io.Copy of the body into
// io.Discard, default buffers. It returns the bytes read.
func plainDownload(ctx context.Context, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("magic link download: %d", resp.StatusCode)
	}
	return io.Copy(io.Discard, resp.Body)
}

// directGet is the download baseline: minio-go's GetObject of the same object from the
// same MinIO, read with the same plain io.Copy into io.Discard.
func (x *transfer) directGet(ctx context.Context, key string) (int64, error) {
	obj, err := x.s.Objects.Client.GetObject(ctx, x.s.Objects.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return 0, err
	}
	defer obj.Close()
	return io.Copy(io.Discard, obj)
}

// memoryRows measures a fresh gateway's peak RSS growth over its idle RSS: the memory
// rows (multipart uploads) when multipart is set, and -concurrent tus uploads when tus is.
func (x *transfer) memoryRows(ctx context.Context, multipart, tus bool) {
	t := x.t
	g := x.s.Gateway
	g.Kill()
	g.Start()
	g.WaitReady(60 * time.Second)
	// Warm up the API's code paths and connection pools, without an upload: the first
	// upload's part buffer is part of what the rows measure.
	for range 3 {
		if _, err := x.s.API.Me(ctx); err != nil {
			t.Fatal(err)
		}
		p, err := x.s.API.CreatePackage(ctx, rig.PackageBody("warm-up"))
		if err != nil {
			t.Fatal(err)
		}
		if err := x.s.API.DeletePackage(ctx, p.Id.String()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // let the warm-up's garbage settle before reading the idle RSS
	pid := g.Pid()
	idle, err := rig.ProcStatusKiB(pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	idleB := float64(idle) * 1024
	x.rep.Rawf("memory: gateway idle RSS %s", rig.MiB(idleB))

	// phase runs n uploads of size at once and returns the peak RSS growth over the
	// lower of the idle RSS and the RSS at the phase's start: what an earlier phase left
	// (or gave back) neither counts against a phase nor hides what it took.
	phase := func(name string, n int, size int64, viaTus ...bool) (float64, bool) {
		before, err := rig.ProcStatusKiB(pid, "VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		if err := rig.ResetPeakRSS(pid); err != nil {
			t.Fatalf("reset peak RSS: %v", err)
		}
		start := time.Now()
		if n > 1 {
			// Halfway through, at the expected speed of one file: what holds the memory.
			prof.heap(ctx, x.s.Gateway, time.Duration(float64(int64(n)*size)/200e6*float64(time.Second)/2), "memory-concurrent-gateway")
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		pkgs := make([]string, n)
		for i := range n {
			wg.Go(func() {
				if len(viaTus) > 0 {
					pkgs[i], _, errs[i] = x.tusUpload(ctx, size, 0)
					return
				}
				pkgs[i], _, _, errs[i] = x.upload(ctx, size)
			})
		}
		wg.Wait()
		took := time.Since(start)
		peak, err := rig.ProcStatusKiB(pid, "VmHWM")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkgs {
			if p != "" {
				_ = x.s.API.DeletePackage(context.Background(), p)
			}
		}
		if ctx.Err() != nil {
			return 0, false
		}
		for _, err := range errs {
			if err != nil {
				t.Fatalf("memory %s: %v", name, err)
			}
		}
		growth := float64(peak)*1024 - min(idleB, float64(before)*1024)
		x.rep.Rawf("memory %s: %d × %d B in %s (%s), RSS at the start %s, peak RSS %s, growth over the lower of idle and start %s", name, n, size,
			took.Round(time.Millisecond), rig.MBps(float64(int64(n)*size)/took.Seconds()), rig.MiB(float64(before)*1024), rig.MiB(float64(peak)*1024), rig.MiB(growth))
		return growth, true
	}

	part := float64(x.c.partSize)
	if tus {
		conc, ok := phase("concurrent tus", x.c.concurrent, int64(x.c.size), true)
		if !ok {
			x.notFinished("tus memory")
			return
		}
		limit := float64(x.c.concurrent)*part + 32<<20
		x.rep.Add(Row{
			What:     fmt.Sprintf("tus memory: peak RSS growth, %d concurrent tus uploads of %s (one PATCH each)", x.c.concurrent, formatSize(int64(x.c.size))),
			Measured: rig.MiB(conc), Baseline: rig.MiB(idleB) + " (idle RSS, or the phase's start when lower)",
			Target:  fmt.Sprintf("≤ %d × part + 32 MiB = %s", x.c.concurrent, rig.MiB(limit)),
			Verdict: verdict(conc <= limit, "%s over", rig.MiB(conc-limit)),
		})
	}
	if !multipart {
		return
	}
	one, ok := phase("one file", 1, int64(x.c.size))
	if !ok {
		x.notFinished("memory")
		return
	}
	big, ok := phase("one big file", 1, int64(x.c.bigSize))
	if !ok {
		x.notFinished("memory")
		return
	}
	// "No growth with file size": the big file may not take more than the small one,
	// give or take one part: the garbage collector lets the heap reach twice what is
	// live before it runs, so a part buffer that was just released may still be there.
	bigLimit := one + part
	x.rep.Add(Row{
		What:     fmt.Sprintf("upload memory: peak RSS growth, 1 upload of %s vs 1 of %s", formatSize(int64(x.c.bigSize)), formatSize(int64(x.c.size))),
		Measured: rig.MiB(big), Baseline: rig.MiB(one) + fmt.Sprintf(" (%s file)", formatSize(int64(x.c.size))),
		Ratio:   ratio(big, one),
		Target:  "no growth with file size (≤ small + 1 part), and ≤ part + 32 MiB",
		Verdict: verdict(big <= bigLimit && big <= part+32<<20, "%s over", rig.MiB(big-min(bigLimit, part+32<<20))),
	})
	conc, ok := phase("concurrent", x.c.concurrent, int64(x.c.size))
	if !ok {
		x.notFinished("memory")
		return
	}
	limit := float64(x.c.concurrent)*part + 32<<20
	x.rep.Add(Row{
		What:     fmt.Sprintf("upload memory: peak RSS growth, %d concurrent uploads of %s", x.c.concurrent, formatSize(int64(x.c.size))),
		Measured: rig.MiB(conc), Baseline: rig.MiB(idleB) + " (idle RSS, or the phase's start when lower)",
		Target:  fmt.Sprintf("≤ %d × part + 32 MiB = %s", x.c.concurrent, rig.MiB(limit)),
		Verdict: verdict(conc <= limit, "%s over", rig.MiB(conc-limit)),
	})
}

func (x *transfer) notFinished(rows ...string) {
	for _, r := range rows {
		x.rep.Add(Row{What: r, Verdict: "not finished within its budget"})
	}
}
