package app

import (
	"fmt"
	"time"
)

// ScanState is a file's malware scan state (files.scan).
type ScanState string

// The scan states of a file.
const (
	ScanPending     ScanState = "pending"     // not scanned yet
	ScanClean       ScanState = "clean"       // clamd found nothing
	ScanInfected    ScanState = "infected"    // clamd found malware: never served, object removed
	ScanError       ScanState = "error"       // could not be scanned after the retries
	ScanUnscannable ScanState = "unscannable" // clamd could not judge it: over its limits, encrypted, too deep, timed out
	ScanSkipped     ScanState = "skipped"     // over SHIPFILE_SCAN_MAX_SIZE, end-to-end encrypted, or stored before scanning
)

// ScanMode is what the gateway does with files not known to be clean (SHIPFILE_SCAN).
type ScanMode string

// The scanning modes.
const (
	ScanOff   ScanMode = "off"   // no scanning: every file is served (an infected one never)
	ScanFlag  ScanMode = "flag"  // files are served while pending; infected ones never
	ScanBlock ScanMode = "block" // a file is served once clean, skipped or released
)

// ParseScanMode reads SHIPFILE_SCAN: "" is the default, block when clamd is configured
// (clamdAddr not empty), off otherwise.
func ParseScanMode(s, clamdAddr string) (ScanMode, error) {
	switch m := ScanMode(s); m {
	case "":
		if clamdAddr != "" {
			return ScanBlock, nil
		}
		return ScanOff, nil
	case ScanOff, ScanFlag, ScanBlock:
		return m, nil
	default:
		return "", fmt.Errorf("SHIPFILE_SCAN must be off, flag or block, not %q", s)
	}
}

// ScanRetryAfter is the Retry-After of a file still being checked in block mode.
const ScanRetryAfter = 5 * time.Second

// Errors of a download the scan refuses.
var (
	// ErrInfected: clamd found malware in the file; it is never served through the link.
	ErrInfected = Forbidden("this file contains malware and cannot be downloaded")
	// ErrScanPending: block mode, the file has not been checked yet (409 with Retry-After).
	ErrScanPending error = &Error{Kind: KindConflict, Detail: "this file is being checked for malware; try again shortly", RetryAfter: ScanRetryAfter}
	// ErrInfectedRemoved answers the owner's download of an infected file: its object
	// was deleted (or quarantined) by the scanner.
	ErrInfectedRemoved error = &Error{Kind: KindGone, Detail: "this file contains malware and was removed from storage"}
	// ErrScanFailed: block mode, the file could not be checked and its package's owner
	// has not released it.
	ErrScanFailed = Conflict("this file could not be checked for malware and cannot be downloaded through the link until the package's owner releases it")
)

// ScanHeldError is a download the scan holds back in block mode: Err says why (a 409,
// with Retry-After while pending) and Scan is the file's state, which the API's answer
// carries beside the detail.
type ScanHeldError struct {
	Scan ScanState
	Err  *Error
}

func (e *ScanHeldError) Error() string { return e.Err.Detail }

// Unwrap gives the application error, so KindOf and errors.As(*Error) see it.
func (e *ScanHeldError) Unwrap() error { return e.Err }

// held wraps err, one of the conflicts above, with f's scan state.
func held(f File, err error) error {
	return &ScanHeldError{Scan: f.Scan, Err: err.(*Error)}
}

// ScanReleased reports whether the package's owner released f, a file the scanner
// could not judge.
func (f File) ScanReleased() bool { return f.ScanReleasedAt != nil }

// scanUnjudged reports whether the scanner gave up on f: unscannable, or error after
// the retries.
func scanUnjudged(s ScanState) bool { return s == ScanUnscannable || s == ScanError }

// ScanAllows says whether f may be served through the link in mode m: an infected file
// never; in block mode a pending file is held (ErrScanPending: 409 with Retry-After)
// and an unscannable or failed one until its owner releases it (ErrScanFailed); in flag
// and off modes anything else. A held file's error is a *ScanHeldError.
func ScanAllows(m ScanMode, f File) error {
	switch {
	case f.Scan == ScanInfected:
		return ErrInfected
	case m != ScanBlock:
		return nil
	case f.Scan == ScanPending:
		return held(f, ErrScanPending)
	case scanUnjudged(f.Scan) && !f.ScanReleased():
		return held(f, ErrScanFailed)
	}
	return nil
}

// Errors of the owner's download of a file a stranger uploaded.
var (
	errOwnerScanPending = &Error{Kind: KindConflict, RetryAfter: ScanRetryAfter,
		Detail: "this file was uploaded through a request link and is being checked for malware; try again shortly"}
	errOwnerScanFailed = &Error{Kind: KindConflict,
		Detail: "this file was uploaded through a request link and could not be checked for malware; release it to download it"}
)

// OwnerScanAllows says whether f may be served to its package's owner (or an admin)
// in mode m. A file the owner uploaded is theirs to download whatever its state (an
// infected one has no object left: the caller answers ErrInfectedRemoved). In block
// mode a file a stranger uploaded through a request link is held until it is clean,
// skipped or released: pending → 409 with Retry-After, unscannable or failed → 409; the
// error is a *ScanHeldError.
func OwnerScanAllows(m ScanMode, f File) error {
	if m != ScanBlock || f.UploadedBy != ByRecipient {
		return nil
	}
	switch {
	case f.Scan == ScanPending:
		return held(f, errOwnerScanPending)
	case scanUnjudged(f.Scan) && !f.ScanReleased():
		return held(f, errOwnerScanFailed)
	}
	return nil
}

// ScanReleasable says whether f may be released: only a file the scanner could not
// judge (unscannable, or error after the retries); anything else is a conflict.
func ScanReleasable(f File) error {
	if scanUnjudged(f.Scan) {
		return nil
	}
	return Conflict("only a file that could not be checked for malware (unscannable or error) can be released; this one is %s", f.Scan)
}

// ScanText says in words what the scan made of f, for people: "being checked",
// "checked", "malware found", "could not be checked", "released" (could not be checked,
// and released by the package's owner) or "not checked" (skipped).
func ScanText(f File) string {
	switch {
	case f.Scan == ScanPending:
		return "being checked"
	case f.Scan == ScanClean:
		return "checked"
	case f.Scan == ScanInfected:
		return "malware found"
	case scanUnjudged(f.Scan) && f.ScanReleased():
		return "released"
	case scanUnjudged(f.Scan):
		return "could not be checked"
	case f.Scan == ScanSkipped:
		return "not checked"
	}
	return string(f.Scan)
}
