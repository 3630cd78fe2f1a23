package imagepreview_test

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
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
// opaque RGBA) keeps its colours (within YCbCr's rounding); the aspect ratio is kept.
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
			if got := color.RGBAModel.Convert(out.At(tc.w/2, tc.h/2)).(color.RGBA); !near(got, tc.want, 2) {
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
			w := color.RGBAModel.Convert(want.At(x, y)).(color.RGBA)
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

// near says whether each channel of a and b differs by at most tol.
func near(a, b color.RGBA, tol int) bool {
	for _, d := range []int{int(a.R) - int(b.R), int(a.G) - int(b.G), int(a.B) - int(b.B), int(a.A) - int(b.A)} {
		if max(d, -d) > tol {
			return false
		}
	}
	return true
}

// TestScaleColours: RGBA (alpha-premultiplied) and NRGBA images, as PNGs decode,
// scaled down and put over white: opaque colours are kept, a transparent pixel is
// white whatever colour it holds, a half-transparent one is half white; the preview's
// JPEG shows the same colours.
func TestScaleColours(t *testing.T) {
	// Four vertical bands of 50 pixels, each one colour.
	bands := func(m draw.Image, cs [4]color.Color) image.Image {
		b := m.Bounds()
		for y := range b.Dy() {
			for x := range b.Dx() {
				m.Set(x, y, cs[x/50])
			}
		}
		return m
	}
	halfRed := color.RGBA{255, 127, 127, 255} // red at alpha 128 over white
	for _, tc := range []struct {
		name string
		img  image.Image
		want [4]color.RGBA
	}{
		{"nrgba", bands(image.NewNRGBA(image.Rect(0, 0, 200, 120)), [4]color.Color{
			color.NRGBA{200, 30, 60, 255}, color.NRGBA{255, 0, 0, 0}, color.NRGBA{255, 0, 0, 128}, color.NRGBA{10, 120, 240, 255},
		}), [4]color.RGBA{{200, 30, 60, 255}, {255, 255, 255, 255}, halfRed, {10, 120, 240, 255}}},
		{"rgba", bands(image.NewRGBA(image.Rect(0, 0, 200, 120)), [4]color.Color{
			color.RGBA{200, 30, 60, 255}, color.RGBA{0, 0, 0, 0}, color.RGBA{128, 0, 0, 128}, color.RGBA{10, 120, 240, 255},
		}), [4]color.RGBA{{200, 30, 60, 255}, {255, 255, 255, 255}, halfRed, {10, 120, 240, 255}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := imagepreview.Scale(tc.img, 100) // 100 × 60: bands of 25 pixels
			if b := out.Bounds(); b.Dx() != 100 || b.Dy() != 60 {
				t.Fatalf("size %v", b)
			}
			var p bytes.Buffer
			if err := png.Encode(&p, tc.img); err != nil {
				t.Fatal(err)
			}
			jpg, _, _, err := imagepreview.Render(bytes.NewReader(p.Bytes()), imagepreview.Options{MaxSide: 100, MaxPixels: 1 << 20, Quality: 95})
			if err != nil {
				t.Fatal(err)
			}
			preview, err := jpeg.Decode(bytes.NewReader(jpg))
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.want {
				for _, y := range []int{5, 30, 55} {
					x := 25*i + 12 // mid-band, away from the blends at the edges
					if got := color.RGBAModel.Convert(out.At(x, y)).(color.RGBA); !near(got, want, 3) {
						t.Errorf("band %d at (%d, %d): %v, want %v", i, x, y, got, want)
					}
					if got := color.RGBAModel.Convert(preview.At(x, y)).(color.RGBA); !near(got, want, 6) {
						t.Errorf("preview's band %d at (%d, %d): %v, want %v", i, x, y, got, want)
					}
				}
			}
		})
	}
}

// TestScaleShapes: images one pixel wide or high, tiny ones and every kind a decoder
// returns come out at the right size and colour.
func TestScaleShapes(t *testing.T) {
	want := color.RGBA{40, 170, 90, 255}
	y, cb, cr := color.RGBToYCbCr(want.R, want.G, want.B)
	kinds := map[string]func(r image.Rectangle) draw.Image{
		"rgba":   func(r image.Rectangle) draw.Image { return image.NewRGBA(r) },
		"nrgba":  func(r image.Rectangle) draw.Image { return image.NewNRGBA(r) },
		"rgba64": func(r image.Rectangle) draw.Image { return image.NewRGBA64(r) },
	}
	for _, size := range []image.Point{{1, 1}, {1, 300}, {300, 1}, {2, 2}, {3, 1000}, {129, 65}} {
		imgs := map[string]image.Image{}
		for name, mk := range kinds {
			m := mk(image.Rect(0, 0, size.X, size.Y))
			draw.Draw(m, m.Bounds(), image.NewUniform(want), image.Point{}, draw.Src)
			imgs[name] = m
		}
		for _, ratio := range []image.YCbCrSubsampleRatio{image.YCbCrSubsampleRatio420, image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio422} {
			m := image.NewYCbCr(image.Rect(0, 0, size.X, size.Y), ratio)
			for i := range m.Y {
				m.Y[i] = y
			}
			for i := range m.Cb {
				m.Cb[i], m.Cr[i] = cb, cr
			}
			imgs[fmt.Sprintf("ycbcr %v", ratio)] = m
		}
		for name, img := range imgs {
			t.Run(fmt.Sprintf("%s %dx%d", name, size.X, size.Y), func(t *testing.T) {
				out := imagepreview.Scale(img, 64)
				w, h := min(size.X, 64), min(size.Y, 64)
				if size.X > 64 || size.Y > 64 {
					if size.X >= size.Y {
						w, h = 64, max(1, size.Y*64/size.X)
					} else {
						w, h = max(1, size.X*64/size.Y), 64
					}
				}
				if b := out.Bounds(); b.Dx() != w || b.Dy() != h {
					t.Fatalf("size %v, want %dx%d", b, w, h)
				}
				for _, p := range []image.Point{{0, 0}, {w - 1, h - 1}, {w / 2, h / 2}} {
					if got := color.RGBAModel.Convert(out.At(p.X, p.Y)).(color.RGBA); !near(got, want, 3) {
						t.Fatalf("at %v: %v, want %v", p, got, want)
					}
				}
			})
		}
	}
}
