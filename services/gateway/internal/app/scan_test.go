package app_test

import (
	"errors"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

func TestParseScanMode(t *testing.T) {
	tests := []struct {
		in, clamd string
		want      app.ScanMode
		ok        bool
	}{
		{"", "", app.ScanOff, true},
		{"", "clamav:3310", app.ScanBlock, true},
		{"flag", "clamav:3310", app.ScanFlag, true},
		{"off", "clamav:3310", app.ScanOff, true},
		{"block", "", app.ScanBlock, true},
		{"BLOCK", "", "", false},
		{"yes", "", "", false},
	}
	for _, tt := range tests {
		got, err := app.ParseScanMode(tt.in, tt.clamd)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseScanMode(%q, %q) = %q, %v", tt.in, tt.clamd, got, err)
		}
	}
}

// What the link serves of a file, by mode and scan state (SPEC "Malware scanning").
func TestScanAllows(t *testing.T) {
	states := []app.ScanState{app.ScanPending, app.ScanClean, app.ScanInfected, app.ScanError, app.ScanSkipped}
	want := map[app.ScanMode][]error{
		app.ScanOff:   {nil, nil, app.ErrInfected, nil, nil},
		app.ScanFlag:  {nil, nil, app.ErrInfected, nil, nil},
		app.ScanBlock: {app.ErrScanPending, nil, app.ErrInfected, app.ErrScanFailed, nil},
	}
	for mode, errs := range want {
		for i, st := range states {
			if got := app.ScanAllows(mode, app.File{Scan: st}); !errors.Is(got, errs[i]) || (got == nil) != (errs[i] == nil) {
				t.Errorf("%s, %s: %v, want %v", mode, st, got, errs[i])
			}
		}
	}
	var ae *app.Error
	if !errors.As(app.ErrScanPending, &ae) || ae.Kind != app.KindConflict || ae.RetryAfter <= 0 {
		t.Errorf("pending: %+v, want a 409 with Retry-After", ae)
	}
	if !errors.As(app.ErrInfected, &ae) || ae.Kind != app.KindForbidden {
		t.Errorf("infected: %+v, want a 403", ae)
	}
}
