package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/imagepreview"
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

// previewFiles makes the row's images: photo-like JPEGs (smooth gradients with grain)
// and screenshot-like PNGs (flat areas and text-like detail).
func previewFiles(t testing.TB, quick bool) [][]byte {
	rng := rand.New(rand.NewPCG(7, 11))
	photo := func(w, h int) []byte {
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				n := uint8(rng.IntN(24))
				img.SetRGBA(x, y, color.RGBA{uint8(x*200/w) + n, uint8(y*200/h) + n, uint8((x+y)*100/(w+h)) + n, 255})
			}
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	screen := func(w, h int) []byte {
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				c := color.RGBA{245, 246, 248, 255}
				if (y/20)%3 == 0 && (x/7+y/20)%5 != 0 && x%7 != 0 {
					c = color.RGBA{30, 30, 40, 255} // "text"
				} else if x < w/5 {
					c = color.RGBA{40, 70, 160, 255} // a sidebar
				}
				img.SetRGBA(x, y, c)
			}
		}
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if quick {
		return [][]byte{photo(1600, 1200), screen(1280, 800)}
	}
	return [][]byte{photo(4000, 3000), photo(4000, 3000), photo(2000, 1500), photo(2000, 1500), screen(1920, 1080), screen(1920, 1080)}
}
