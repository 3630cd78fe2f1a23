package imagepreview_test

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"testing"

	"github.com/shipfile/shipfile/pkg/imagepreview"
	"github.com/shipfile/shipfile/pkg/imagepreview/sampleimages"
)

func photoJPEG(b *testing.B, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			n := uint8((x*7 + y*13) % 24)
			img.SetRGBA(x, y, color.RGBA{uint8(x*200/w) + n, uint8(y*200/h) + n, 90 + n, 255})
		}
	}
	var out bytes.Buffer
	if err := jpeg.Encode(&out, img, &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	return out.Bytes()
}

// BenchmarkPhoto: a 12-megapixel JPEG decoded alone, scaled alone, and previewed
// whole (the encoder alone: BenchmarkEncode).
func BenchmarkPhoto(b *testing.B) {
	f := photoJPEG(b, 4000, 3000)
	img, _, _ := image.Decode(bytes.NewReader(f))
	o := imagepreview.Options{MaxPixels: 40_000_000, MaxSide: 1024, Quality: 82}
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			_, _, _ = image.Decode(bytes.NewReader(f))
		}
	})
	b.Run("scale", func(b *testing.B) {
		for b.Loop() {
			imagepreview.Scale(img, 1024)
		}
	})
	b.Run("render", func(b *testing.B) {
		for b.Loop() {
			_, _, _, _ = imagepreview.Render(bytes.NewReader(f), o)
		}
	})
}

// rowFiles are the files of shipbench's preview row.
func rowFiles(b *testing.B) [][]byte {
	files, err := sampleimages.Set(false)
	if err != nil {
		b.Fatal(err)
	}
	return files
}

// BenchmarkRow: shipbench's preview row as benchmarks, one iteration every file: the
// standard library's decode alone (the row's baseline) and the whole preview.
func BenchmarkRow(b *testing.B) {
	files := rowFiles(b)
	o := imagepreview.Options{MaxPixels: 40_000_000, MaxSide: 1024, Quality: 82}
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			for _, f := range files {
				if _, _, err := image.Decode(bytes.NewReader(f)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("render", func(b *testing.B) {
		for b.Loop() {
			for _, f := range files {
				if _, _, _, err := imagepreview.Render(bytes.NewReader(f), o); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkScreenshot: a 1080p PNG screenshot (an RGBA image) scaled alone and
// previewed whole.
func BenchmarkScreenshot(b *testing.B) {
	f := rowFiles(b)[4]
	img, _, err := image.Decode(bytes.NewReader(f))
	if err != nil {
		b.Fatal(err)
	}
	o := imagepreview.Options{MaxPixels: 40_000_000, MaxSide: 1024, Quality: 82}
	b.Run("scale", func(b *testing.B) {
		for b.Loop() {
			imagepreview.Scale(img, 1024)
		}
	})
	b.Run("render", func(b *testing.B) {
		for b.Loop() {
			_, _, _, _ = imagepreview.Render(bytes.NewReader(f), o)
		}
	})
}
