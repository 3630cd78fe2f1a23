package previews_test

import (
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
