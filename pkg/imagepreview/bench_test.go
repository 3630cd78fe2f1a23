package imagepreview_test

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"testing"

	"github.com/shipfile/shipfile/pkg/imagepreview"
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

// BenchmarkPhoto: a 12-megapixel JPEG decoded alone, scaled alone, encoded alone, and
// previewed whole.
func BenchmarkPhoto(b *testing.B) {
	f := photoJPEG(b, 4000, 3000)
	img, _, _ := image.Decode(bytes.NewReader(f))
	small := imagepreview.Scale(img, 1024)
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
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			_ = jpeg.Encode(io.Discard, small, &jpeg.Options{Quality: 82})
		}
	})
	b.Run("render", func(b *testing.B) {
		for b.Loop() {
			_, _, _, _ = imagepreview.Render(bytes.NewReader(f), o)
		}
	})
}
