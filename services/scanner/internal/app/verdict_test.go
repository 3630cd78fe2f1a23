package app_test

import (
	"testing"

	"github.com/shipfile/shipfile/services/scanner/internal/app"
)

// Judge tells malware from what clamd could not judge, whatever its configuration
// named: its limits and encrypted content are unscannable, never infected or clean.
func TestJudge(t *testing.T) {
	tests := []struct{ sig, want string }{
		{"", app.ScanClean},
		{"Eicar-Test-Signature.UNOFFICIAL", app.ScanInfected},
		{"Win.Test.EICAR_HDB-1", app.ScanInfected},
		{"Heuristics.Phishing.Email.SpoofedDomain", app.ScanInfected},
		{"Heuristics.Limits.Exceeded.MaxFileSize", app.ScanUnscannable},
		{"Heuristics.Limits.Exceeded.MaxScanSize", app.ScanUnscannable},
		{"Heuristics.Limits.Exceeded.MaxFiles", app.ScanUnscannable},
		{"Heuristics.Limits.Exceeded.MaxRecursion", app.ScanUnscannable},
		{"Heuristics.Limits.Exceeded.MaxScanTime", app.ScanUnscannable},
		{"Heuristics.Limits.Exceeded", app.ScanUnscannable},
		{"Heuristics.Encrypted.Zip", app.ScanUnscannable},
		{"Heuristics.Encrypted.RAR", app.ScanUnscannable},
		{"Heuristics.Encrypted.7Zip", app.ScanUnscannable},
		{"Heuristics.Encrypted.PDF", app.ScanUnscannable},
		{"Heuristics.Encrypted.Doc", app.ScanUnscannable},
		{"Heuristics.Broken.Executable", app.ScanUnscannable},
		// A name that only looks alike is malware.
		{"Heuristics.EncryptedZip.Trojan", app.ScanInfected},
	}
	for _, tt := range tests {
		t.Run(tt.sig, func(t *testing.T) {
			if got := app.Judge(tt.sig); got != tt.want {
				t.Errorf("Judge(%q) = %q, want %q", tt.sig, got, tt.want)
			}
		})
	}
}
