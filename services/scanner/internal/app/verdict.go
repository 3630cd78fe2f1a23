package app

import "strings"

// unscannablePrefixes are the names clamd gives what it could not judge rather than
// malware it found: its limits (Heuristics.Limits.Exceeded.MaxFileSize, .MaxScanSize,
// .MaxFiles, .MaxRecursion, .MaxScanTime…, with AlertExceedsMax), encrypted archives and
// documents (Heuristics.Encrypted.Zip, .RAR, .PDF, .Doc…, with AlertEncrypted*) and
// executables it could not parse (Heuristics.Broken.Executable, with
// AlertBrokenExecutables).
var unscannablePrefixes = []string{
	"Heuristics.Limits.Exceeded",
	"Heuristics.Encrypted.",
	"Heuristics.Broken.",
}

// Judge is the scan state of a file clamd answered sig about (the name in "stream:
// <sig> FOUND", "" for "stream: OK"): clean when clamd found nothing, unscannable when
// its answer says it could not judge the file, infected otherwise. It holds whatever
// clamd's configuration: with the Alert* options off, clamd answers OK for what it did
// not scan, which is why every shipped clamd.conf sets them.
func Judge(sig string) string {
	if sig == "" {
		return ScanClean
	}
	for _, p := range unscannablePrefixes {
		if strings.HasPrefix(sig, p) {
			return ScanUnscannable
		}
	}
	return ScanInfected
}

// UnscannableError is a scan that ended without a verdict on the file itself (clamd
// refused a stream over its StreamMaxLength, or gave no verdict in time): the file is
// recorded 'unscannable' with Reason as its signature, never tried again.
type UnscannableError struct{ Reason string }

func (e *UnscannableError) Error() string { return "unscannable: " + e.Reason }
