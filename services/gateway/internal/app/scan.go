package app

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
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

// UseScanMode sets the scanning mode the link routes follow (default off). Call it
// before the service is used.
func (s *Packages) UseScanMode(m ScanMode) { s.scan = m }

// scanAllows is the one check of the link's download routes (a file, the archive):
// nil when f may be served through the link under the service's scanning mode.
func (s *Packages) scanAllows(f File) error { return ScanAllows(s.scan, f) }

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

// ScanOmitted lists the files of package id that the archive of its link leaves out
// because of the scan (pending or failed in block mode, infected in any mode), with why,
// so the archive can say so. Files uploaded through the link are not listed (they are
// never in it).
func (s *Packages) ScanOmitted(ctx context.Context, id uuid.UUID) ([]string, error) {
	files, err := s.store.ListFiles(ctx, id, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		if !LinkMayDownload(f) {
			continue
		}
		switch err := s.scanAllows(f); {
		case err == nil:
		case f.Scan == ScanInfected:
			out = append(out, f.Filename+" (malware found)")
		case f.Scan == ScanPending:
			out = append(out, f.Filename+" (being checked for malware)")
		default:
			out = append(out, f.Filename+" (could not be checked for malware)")
		}
	}
	return out, nil
}

// LinkScanCheck is scanAllows for the recipient's page: nil when the link serves f now,
// else why not (ErrScanPending: "being checked", ErrInfected, ErrScanFailed).
func (s *Packages) LinkScanCheck(f File) error { return s.scanAllows(f) }
