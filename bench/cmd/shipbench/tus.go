package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
)

// tusUpload sends one file of size through the gateway's tus endpoints into a new
// package: one PATCH with the whole body when chunk is 0, else PATCHes of chunk bytes.
// It returns the package id and the time from creation to the completing PATCH.
func (x *transfer) tusUpload(ctx context.Context, size, chunk int64) (pkgID string, took time.Duration, err error) {
	p, err := x.s.API.CreatePackage(ctx, rig.PackageBody("bench tus upload"))
	if err != nil {
		return "", 0, err
	}
	pkgID = p.Id.String()
	send := func(method, path string, body io.Reader, n int64, headers ...string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, x.s.API.Base+path, body)
		if err != nil {
			return nil, err
		}
		req.ContentLength = n
		req.Header.Set("Authorization", "Bearer "+x.s.API.Token)
		req.Header.Set("Tus-Resumable", "1.0.0")
		if body != nil {
			req.Header.Set("Content-Type", "application/offset+octet-stream")
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := x.s.API.HTTP.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, nil
	}
	start := time.Now()
	resp, err := send("POST", "/api/v1/packages/"+pkgID+"/uploads", nil, 0, "Upload-Length", strconv.FormatInt(size, 10),
		"Upload-Metadata", "filename "+base64.StdEncoding.EncodeToString([]byte("big.bin")))
	if err != nil || resp.StatusCode != http.StatusCreated {
		return pkgID, 0, fmt.Errorf("tus create: %v %v", resp, err)
	}
	url := resp.Header.Get("Location")
	body := rig.Payload(size, x.nextSeed())
	if chunk <= 0 {
		chunk = size
	}
	for off := int64(0); off < size; off += chunk {
		n := min(chunk, size-off)
		resp, err := send("PATCH", url, io.LimitReader(body, n), n, "Upload-Offset", strconv.FormatInt(off, 10))
		if err != nil {
			return pkgID, 0, fmt.Errorf("tus PATCH at %d: %w", off, err)
		}
		if resp.StatusCode != http.StatusNoContent {
			return pkgID, 0, fmt.Errorf("tus PATCH at %d answered %d", off, resp.StatusCode)
		}
		if off+n == size && resp.Header.Get("Shipfile-File-Id") == "" {
			return pkgID, 0, fmt.Errorf("the completing PATCH names no file")
		}
	}
	return pkgID, time.Since(start), nil
}

// tusRow: one file of -size through tus in one PATCH, and in PATCHes of one part
// (-part-size, 16 MiB by default), as ratios of the multipart upload row of the same
// run (its median rate).
func (x *transfer) tusRow(ctx context.Context) {
	t, size := x.t, int64(x.c.size)
	if x.multipartRate <= 0 {
		x.rep.Add(Row{What: "tus upload", Verdict: "needs the upload row in the same run"})
		return
	}
	for _, chunk := range []int64{0, int64(x.c.partSize)} {
		var rates []float64
		for i := range x.c.runs {
			pkg, took, err := x.tusUpload(ctx, size, chunk)
			if ctx.Err() != nil {
				x.notFinished("tus upload")
				return
			}
			if err != nil {
				t.Fatalf("tus upload: %v", err)
			}
			if err := x.s.API.DeletePackage(ctx, pkg); err != nil {
				t.Fatal(err)
			}
			rates = append(rates, float64(size)/took.Seconds())
			x.rep.Rawf("tus run %d (%s): %d B in %s = %s", i+1, chunkName(chunk), size, took.Round(time.Millisecond), rig.MBps(rates[len(rates)-1]))
		}
		g := rig.Median(rates)
		x.rep.Add(Row{
			What:     fmt.Sprintf("tus upload, 1 file of %s, %s (median of %d)", formatSize(size), chunkName(chunk), x.c.runs),
			Measured: rig.MBps(g), Baseline: rig.MBps(x.multipartRate) + " (the multipart upload row)", Ratio: ratio(g, x.multipartRate),
			Target:  "≥ 0.90×",
			Verdict: verdict(g >= 0.9*x.multipartRate, "%.0f%% below 0.90×", (0.9-g/x.multipartRate)/0.9*100),
		})
	}
}

func chunkName(chunk int64) string {
	if chunk <= 0 {
		return "one PATCH"
	}
	return "PATCHes of " + formatSize(chunk)
}
