package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/imagepreview"
	"github.com/shipfile/shipfile/pkg/imagepreview/sampleimages"
)

// previewOptions are the gateway's (services/gateway/internal/app/previews defaults).
var previewOptions = imagepreview.Options{MaxPixels: 40_000_000, MaxSide: 1024, Quality: 82}

// previewRow: image previews made (header check, decode, scale to 1024 px, JPEG encode:
// pkg/imagepreview, what the gateway's preview consumer runs) against decoding the same
// files with the standard library alone, in images a second, alternating the two in
// slices so both see the same machine. Photos (JPEG, 12 and 3 megapixels) and
// screenshots (PNG, 2 megapixels).
func previewRow(ctx context.Context, t testing.TB, c config, rep *Report) {
	const what = "previews"
	files := previewFiles(t, c.quick)
	var made, decoded int
	var madeTook, decodedTook time.Duration
	pass := func(preview bool) {
		start := time.Now()
		for _, f := range files {
			if preview {
				if _, _, _, err := imagepreview.Render(bytes.NewReader(f), previewOptions); err != nil {
					t.Fatal(err)
				}
			} else if _, _, err := image.Decode(bytes.NewReader(f)); err != nil {
				t.Fatal(err)
			}
		}
		if preview {
			made += len(files)
			madeTook += time.Since(start)
		} else {
			decoded += len(files)
			decodedTook += time.Since(start)
		}
	}
	slices := c.previewSlices
	for i := 0; i < slices && ctx.Err() == nil; i++ {
		// Each slice runs both, in turns that swap, so neither always goes first.
		pass(i%2 == 0)
		pass(i%2 != 0)
	}
	if made == 0 || decoded == 0 {
		rep.Add(Row{What: what, Verdict: "not run (the row's budget ended first)"})
		return
	}
	measured := float64(made) / madeTook.Seconds()
	baseline := float64(decoded) / decodedTook.Seconds()
	ratio := measured / baseline
	rep.Rawf("previews: %d images in %.2f s (pkg/imagepreview: header, decode, scale to %d px, JPEG q%d) vs %d decoded in %.2f s (image.Decode); %d files, %d slices",
		made, madeTook.Seconds(), previewOptions.MaxSide, previewOptions.Quality, decoded, decodedTook.Seconds(), len(files), slices)
	rep.Add(Row{
		What:     what,
		Measured: fmt.Sprintf("%.1f images/s", measured),
		Baseline: fmt.Sprintf("%.1f images/s (image.Decode of the same files)", baseline),
		Ratio:    fmt.Sprintf("%.2f×", ratio),
		Target:   "≥ 0.8×",
		Verdict:  verdict(ratio >= 0.8, "%.2f× of the baseline", ratio),
	})
}

// previewFiles are the row's images (pkg/imagepreview/sampleimages): photo-like JPEGs
// and screenshot-like PNGs.
func previewFiles(t testing.TB, quick bool) [][]byte {
	files, err := sampleimages.Set(quick)
	if err != nil {
		t.Fatal(err)
	}
	return files
}
