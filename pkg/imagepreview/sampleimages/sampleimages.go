// Package sampleimages makes the images the preview benchmarks run on, the same bytes
// every time: photo-like JPEGs (smooth gradients with grain) and screenshot-like PNGs
// (flat areas, a sidebar and text-like detail). shipbench's preview row and
// pkg/imagepreview's own benchmarks measure the same files.
package sampleimages

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
)

// Set is the benchmarks' set: two 12-megapixel and two 3-megapixel photos, two 1080p
// screenshots; with small, one photo of 1600 × 1200 and one screenshot of 1280 × 800.
func Set(small bool) ([][]byte, error) {
	rng := rand.New(rand.NewPCG(7, 11))
	type spec struct {
		photo bool
		w, h  int
	}
	specs := []spec{{true, 4000, 3000}, {true, 4000, 3000}, {true, 2000, 1500}, {true, 2000, 1500}, {false, 1920, 1080}, {false, 1920, 1080}}
	if small {
		specs = []spec{{true, 1600, 1200}, {false, 1280, 800}}
	}
	out := make([][]byte, 0, len(specs))
	for _, s := range specs {
		var b bytes.Buffer
		var err error
		if s.photo {
			err = jpeg.Encode(&b, photo(rng, s.w, s.h), &jpeg.Options{Quality: 90})
		} else {
			err = png.Encode(&b, screen(s.w, s.h))
		}
		if err != nil {
			return nil, err
		}
		out = append(out, b.Bytes())
	}
	return out, nil
}

// photo is a w × h gradient with grain from rng.
func photo(rng *rand.Rand, w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			n := uint8(rng.IntN(24))
			img.SetRGBA(x, y, color.RGBA{uint8(x*200/w) + n, uint8(y*200/h) + n, uint8((x+y)*100/(w+h)) + n, 255})
		}
	}
	return img
}

// screen is a w × h page: a light background, a sidebar and rows of "text".
func screen(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			c := color.RGBA{245, 246, 248, 255}
			if (y/20)%3 == 0 && (x/7+y/20)%5 != 0 && x%7 != 0 {
				c = color.RGBA{30, 30, 40, 255} // text
			} else if x < w/5 {
				c = color.RGBA{40, 70, 160, 255} // a sidebar
			}
			img.SetRGBA(x, y, c)
		}
	}
	return img
}
