package app

import (
	"fmt"
	"time"
)

// ScanState is a file's malware scan state (files.scan; SPEC "Malware scanning").
type ScanState string

// The scan states of a file.
const (
	ScanPending  ScanState = "pending"  // not scanned yet
	ScanClean    ScanState = "clean"    // clamd found nothing
	ScanInfected ScanState = "infected" // clamd found malware: never served, object removed
	ScanError    ScanState = "error"    // could not be scanned after the retries
	ScanSkipped  ScanState = "skipped"  // over SHIPFILE_SCAN_MAX_SIZE, end-to-end encrypted, or stored before scanning
)

// ScanMode is what the link routes do with files not known to be clean
// (SHIPFILE_SCAN).
type ScanMode string

// The scanning modes.
const (
	ScanOff   ScanMode = "off"   // no scanning: every file is served (an infected one never)
	ScanFlag  ScanMode = "flag"  // files are served while pending; infected ones never
	ScanBlock ScanMode = "block" // through the link a file is served once clean (or skipped)
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

// Errors of a link download the scan refuses.
var (
	// ErrInfected: clamd found malware in the file; it is never served through the link.
	ErrInfected = Forbidden("this file contains malware and cannot be downloaded")
	// ErrScanPending: block mode, the file has not been checked yet.
	ErrScanPending error = &Error{Kind: KindConflict, Detail: "this file is being checked for malware; try again shortly", RetryAfter: ScanRetryAfter}
	// ErrInfectedRemoved answers the owner's download of an infected file: its object
	// was deleted (or quarantined) by the scanner.
	ErrInfectedRemoved error = &Error{Kind: KindGone, Detail: "this file contains malware and was removed from storage"}
	// ErrScanFailed: block mode, the file could not be checked.
	ErrScanFailed = Conflict("this file could not be checked for malware and cannot be downloaded through the link")
)

// ScanAllows says whether f may be served through the link in mode m: an infected file
// never; in block mode only a clean or skipped file (pending: ErrScanPending, 409 with
// Retry-After); in flag and off modes anything else.
func ScanAllows(m ScanMode, f File) error {
	switch {
	case f.Scan == ScanInfected:
		return ErrInfected
	case m != ScanBlock:
		return nil
	case f.Scan == ScanPending:
		return ErrScanPending
	case f.Scan == ScanError:
		return ErrScanFailed
	}
	return nil
}
