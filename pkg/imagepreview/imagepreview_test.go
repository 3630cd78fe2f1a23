package imagepreview_test

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"testing"

	"github.com/shipfile/shipfile/pkg/imagepreview"
)

func TestChecked(t *testing.T) {
	for _, tc := range []struct {
		w, h int
		want bool
	}{
		{1, 1, true}, {4000, 3000, true}, {0, 10, false}, {10, -1, false},
		{50000, 50000, false}, {1 << 30, 1, false}, {40_000_000, 1, true}, {40_000_001, 1, false},
	} {
		if got := imagepreview.Checked(image.Config{Width: tc.w, Height: tc.h}, 40_000_000); got != tc.want {
			t.Errorf("Checked(%d × %d) = %v", tc.w, tc.h, got)
		}
	}
}

// webp1x1 is a 1 × 1 lossless WebP.
var webp1x1 = []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")

func TestRender(t *testing.T) {
	o := imagepreview.Options{MaxSide: 64, MaxPixels: 1 << 20, Quality: 80}
	img := image.NewPaletted(image.Rect(0, 0, 300, 100), color.Palette{color.Black, color.White})
	var g, p bytes.Buffer
	if err := gif.Encode(&g, img, nil); err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(&p, image.NewNRGBA(image.Rect(0, 0, 2000, 1000))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		in         []byte
		w, h       int
		wantErr    error
		decodeable bool
	}{
		{"gif scaled down", g.Bytes(), 64, 21, nil, true},
		{"webp kept small", webp1x1, 1, 1, nil, true},
		{"png over the pixel limit", p.Bytes(), 0, 0, imagepreview.ErrTooLarge, false},
		{"text", []byte("hello"), 0, 0, imagepreview.ErrNotImage, false},
		{"truncated png", p.Bytes()[:100], 0, 0, imagepreview.ErrTooLarge, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jpg, w, h, err := imagepreview.Render(bytes.NewReader(tc.in), o)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !tc.decodeable {
				return
			}
			cfg, format, err := image.DecodeConfig(bytes.NewReader(jpg))
			if err != nil || format != "jpeg" || cfg.Width != tc.w || cfg.Height != tc.h || w != tc.w || h != tc.h {
				t.Fatalf("preview %s %dx%d (%dx%d reported), %v; want %dx%d", format, cfg.Width, cfg.Height, w, h, err, tc.w, tc.h)
			}
		})
	}
}

// TestScale: a transparent image comes out white; an opaque one (a JPEG's YCbCr, an
// opaque RGBA) keeps its colours; the aspect ratio is kept.
func TestScale(t *testing.T) {
	clear := image.NewNRGBA(image.Rect(0, 0, 200, 100))
	red := image.NewRGBA(image.Rect(0, 0, 100, 400))
	for i := 0; i < len(red.Pix); i += 4 {
		red.Pix[i], red.Pix[i+3] = 255, 255
	}
	ycc := image.NewYCbCr(image.Rect(0, 0, 300, 300), image.YCbCrSubsampleRatio420)
	for i := range ycc.Y {
		ycc.Y[i] = 0
	}
	for i := range ycc.Cb {
		ycc.Cb[i], ycc.Cr[i] = 128, 128
	}
	for _, tc := range []struct {
		name string
		img  image.Image
		w, h int
		want color.RGBA
	}{
		{"transparent", clear, 64, 32, color.RGBA{255, 255, 255, 255}},
		{"opaque", red, 16, 64, color.RGBA{255, 0, 0, 255}},
		{"ycbcr", ycc, 64, 64, color.RGBA{0, 0, 0, 255}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := imagepreview.Scale(tc.img, 64)
			if b := out.Bounds(); b.Dx() != tc.w || b.Dy() != tc.h {
				t.Fatalf("size %v, want %dx%d", b, tc.w, tc.h)
			}
			if got := color.RGBAModel.Convert(out.At(tc.w/2, tc.h/2)).(color.RGBA); got != tc.want {
				t.Fatalf("centre %v, want %v", got, tc.want)
			}
		})
	}
}

// TestScaleYCbCrMatchesRGB: a JPEG's YCbCr image scaled plane by plane looks like the
// same image scaled in RGB (mean difference of a channel under 3 of 255).
func TestScaleYCbCrMatchesRGB(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 1203, 797))
	for y := range 797 {
		for x := range 1203 {
			src.SetRGBA(x, y, color.RGBA{uint8(x * 255 / 1203), uint8(y * 255 / 797), uint8((x ^ y) & 0x3f), 255})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, src, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	img, err := jpeg.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := img.(*image.YCbCr); !ok {
		t.Fatalf("decoded a %T", img)
	}
	got := imagepreview.Scale(img, 300)
	want := imagepreview.Scale(src, 300)
	if got.Bounds() != want.Bounds() || got.Bounds().Dx() != 300 || got.Bounds().Dy() != 198 {
		t.Fatalf("bounds %v and %v", got.Bounds(), want.Bounds())
	}
	var sum, n float64
	for y := range 198 {
		for x := range 300 {
			g := color.RGBAModel.Convert(got.At(x, y)).(color.RGBA)
			w := want.At(x, y).(color.RGBA)
			for _, d := range []int{int(g.R) - int(w.R), int(g.G) - int(w.G), int(g.B) - int(w.B)} {
				sum += float64(max(d, -d))
				n++
			}
		}
	}
	if mean := sum / n; mean > 3 {
		t.Fatalf("mean difference %.2f", mean)
	}
}
