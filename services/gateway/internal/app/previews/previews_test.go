package previews_test

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/previews"
)

func TestWanted(t *testing.T) {
	base := previews.Source{Scan: app.ScanPending, State: app.StateActive}
	with := func(f func(*previews.Source)) previews.Source { s := base; f(&s); return s }
	for _, tc := range []struct {
		name string
		mode app.ScanMode
		src  previews.Source
		want previews.Decision
	}{
		{"scanning off: at once", app.ScanOff, base, previews.Make},
		{"pending: later", app.ScanBlock, base, previews.Later},
		{"pending in flag mode: later", app.ScanFlag, base, previews.Later},
		{"clean", app.ScanBlock, with(func(s *previews.Source) { s.Scan = app.ScanClean }), previews.Make},
		{"skipped", app.ScanBlock, with(func(s *previews.Source) { s.Scan = app.ScanSkipped }), previews.Make},
		{"infected", app.ScanFlag, with(func(s *previews.Source) { s.Scan = app.ScanInfected }), previews.Skip},
		{"infected, scanning off", app.ScanOff, with(func(s *previews.Source) { s.Scan = app.ScanInfected }), previews.Skip},
		{"unscannable", app.ScanBlock, with(func(s *previews.Source) { s.Scan = app.ScanUnscannable }), previews.Skip},
		{"encrypted", app.ScanOff, with(func(s *previews.Source) { s.Encrypted = true }), previews.Skip},
		{"made already", app.ScanOff, with(func(s *previews.Source) { s.PreviewKey = "k.preview.jpg" }), previews.Skip},
		{"expired", app.ScanOff, with(func(s *previews.Source) { s.State = app.StateExpired }), previews.Skip},
		{"draft", app.ScanOff, with(func(s *previews.Source) { s.State = app.StateDraft }), previews.Make},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := previews.Wanted(tc.mode, tc.src); got != tc.want {
				t.Fatalf("Wanted = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestChecked(t *testing.T) {
	for _, tc := range []struct {
		w, h int
		want bool
	}{
		{1, 1, true}, {4000, 3000, true}, {0, 10, false}, {10, -1, false},
		{50000, 50000, false}, {1 << 30, 1, false}, {40_000_000, 1, true}, {40_000_001, 1, false},
	} {
		if got := previews.Checked(image.Config{Width: tc.w, Height: tc.h}, 40_000_000); got != tc.want {
			t.Errorf("Checked(%d × %d) = %v", tc.w, tc.h, got)
		}
	}
}

// webp1x1 is a 1 × 1 lossless WebP.
var webp1x1 = []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")

func TestRender(t *testing.T) {
	m := previews.New(nil, nil, previews.Options{MaxSide: 64, MaxPixels: 1 << 20})
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
		{"png over the pixel limit", p.Bytes(), 0, 0, previews.ErrTooLarge, false},
		{"text", []byte("hello"), 0, 0, previews.ErrNotImage, false},
		{"truncated png", p.Bytes()[:100], 0, 0, previews.ErrTooLarge, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jpg, w, h, err := m.Render(bytes.NewReader(tc.in))
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
