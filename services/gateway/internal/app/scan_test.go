package app_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

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

// What the link serves of a file, by mode and scan state: an unscannable or failed file
// is held in block mode until released.
func TestScanAllows(t *testing.T) {
	released := time.Now()
	states := []app.ScanState{app.ScanPending, app.ScanClean, app.ScanInfected, app.ScanError, app.ScanUnscannable, app.ScanSkipped}
	tests := []struct {
		mode     app.ScanMode
		released bool
		want     []error
	}{
		{app.ScanOff, false, []error{nil, nil, app.ErrInfected, nil, nil, nil}},
		{app.ScanFlag, false, []error{nil, nil, app.ErrInfected, nil, nil, nil}},
		{app.ScanBlock, false, []error{app.ErrScanPending, nil, app.ErrInfected, app.ErrScanFailed, app.ErrScanFailed, nil}},
		{app.ScanBlock, true, []error{app.ErrScanPending, nil, app.ErrInfected, nil, nil, nil}},
	}
	for _, tt := range tests {
		for i, st := range states {
			t.Run(fmt.Sprintf("%s/%s/released=%v", tt.mode, st, tt.released), func(t *testing.T) {
				f := app.File{Scan: st}
				if tt.released {
					f.ScanReleasedAt = &released
				}
				got := app.ScanAllows(tt.mode, f)
				if (got == nil) != (tt.want[i] == nil) || !errors.Is(got, tt.want[i]) {
					t.Fatalf("%v, want %v", got, tt.want[i])
				}
				var sh *app.ScanHeldError
				if held := errors.As(got, &sh); held != (got != nil && st != app.ScanInfected) || (held && sh.Scan != st) {
					t.Fatalf("%#v: a held file's error carries its state", got)
				}
			})
		}
	}
	var ae *app.Error
	if !errors.As(app.ScanAllows(app.ScanBlock, app.File{Scan: app.ScanPending}), &ae) || ae.Kind != app.KindConflict || ae.RetryAfter <= 0 {
		t.Errorf("pending: %+v, want a 409 with Retry-After", ae)
	}
	if !errors.As(app.ScanAllows(app.ScanBlock, app.File{Scan: app.ScanUnscannable}), &ae) || ae.Kind != app.KindConflict || ae.RetryAfter != 0 ||
		!strings.Contains(ae.Detail, "could not be checked") {
		t.Errorf("unscannable: %+v, want a 409 without Retry-After saying it could not be checked", ae)
	}
	if !errors.As(app.ErrInfected, &ae) || ae.Kind != app.KindForbidden {
		t.Errorf("infected: %+v, want a 403", ae)
	}
}

// What the owner's download serves: a stranger's upload is held in block mode until it
// is clean, skipped or released; the owner's own files are never held.
func TestOwnerScanAllows(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name       string
		mode       app.ScanMode
		by         app.Uploader
		scan       app.ScanState
		released   bool
		held       bool
		retryAfter bool
	}{
		{"pending upload", app.ScanBlock, app.ByRecipient, app.ScanPending, false, true, true},
		{"clean upload", app.ScanBlock, app.ByRecipient, app.ScanClean, false, false, false},
		{"skipped upload", app.ScanBlock, app.ByRecipient, app.ScanSkipped, false, false, false},
		{"unscannable upload", app.ScanBlock, app.ByRecipient, app.ScanUnscannable, false, true, false},
		{"failed upload", app.ScanBlock, app.ByRecipient, app.ScanError, false, true, false},
		{"released unscannable upload", app.ScanBlock, app.ByRecipient, app.ScanUnscannable, true, false, false},
		{"released failed upload", app.ScanBlock, app.ByRecipient, app.ScanError, true, false, false},
		{"owner's pending file", app.ScanBlock, app.ByOwner, app.ScanPending, false, false, false},
		{"owner's unscannable file", app.ScanBlock, app.ByOwner, app.ScanUnscannable, false, false, false},
		{"flag mode, pending upload", app.ScanFlag, app.ByRecipient, app.ScanPending, false, false, false},
		{"off mode, unscannable upload", app.ScanOff, app.ByRecipient, app.ScanUnscannable, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := app.File{UploadedBy: tt.by, Scan: tt.scan}
			if tt.released {
				f.ScanReleasedAt = &now
			}
			err := app.OwnerScanAllows(tt.mode, f)
			if (err != nil) != tt.held {
				t.Fatalf("OwnerScanAllows = %v, held %v", err, tt.held)
			}
			if err == nil {
				return
			}
			var sh *app.ScanHeldError
			var ae *app.Error
			if !errors.As(err, &sh) || sh.Scan != tt.scan || !errors.As(err, &ae) || ae.Kind != app.KindConflict || (ae.RetryAfter > 0) != tt.retryAfter {
				t.Fatalf("%#v: want a 409 carrying %s, Retry-After %v", err, tt.scan, tt.retryAfter)
			}
		})
	}
}

// Which files may be released, and the words people see for each state.
func TestScanReleasableAndText(t *testing.T) {
	now := time.Now()
	tests := []struct {
		scan       app.ScanState
		released   bool
		releasable bool
		text       string
	}{
		{app.ScanPending, false, false, "being checked"},
		{app.ScanClean, false, false, "checked"},
		{app.ScanInfected, false, false, "malware found"},
		{app.ScanUnscannable, false, true, "could not be checked"},
		{app.ScanError, false, true, "could not be checked"},
		{app.ScanUnscannable, true, true, "released"},
		{app.ScanError, true, true, "released"},
		{app.ScanSkipped, false, false, "not checked"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/released=%v", tt.scan, tt.released), func(t *testing.T) {
			f := app.File{Scan: tt.scan}
			if tt.released {
				f.ScanReleasedAt = &now
			}
			err := app.ScanReleasable(f)
			if (err == nil) != tt.releasable || (err != nil && app.KindOf(err) != app.KindConflict) {
				t.Fatalf("ScanReleasable = %v, releasable %v", err, tt.releasable)
			}
			if got := app.ScanText(f); got != tt.text {
				t.Fatalf("ScanText = %q, want %q", got, tt.text)
			}
		})
	}
}
