package transfer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/pkg/apiclient"
)

// The scan states of a file record that keep it from being served in the server's block
// mode (proto/openapi.yaml, the file's `scan`).
const (
	ScanPending     = "pending"
	ScanInfected    = "infected"
	ScanUnscannable = "unscannable"
	ScanFailed      = "error"
)

// ScanError says a file was not downloaded because of its malware scan: still being
// checked when the wait ran out, or refused for good (it could not be checked, the check
// failed, malware was found).
type ScanError struct {
	// State is the file's scan state: pending, unscannable, error or infected.
	State string
	// Waited is how long the file was waited for (pending only).
	Waited time.Duration
	// Release is the command that releases the file (unscannable or error), for its
	// package's owner fetching it; "" through a link, whose package the fetcher may
	// not know.
	Release string
	// Err is the server's answer.
	Err error
}

func (e *ScanError) Error() string {
	detail := e.Err.Error()
	switch e.State {
	case ScanPending:
		if e.Waited <= 0 {
			return fmt.Sprintf("still being checked for malware (scan: pending), not waited for (--wait 0): %s", detail)
		}
		return fmt.Sprintf("still being checked for malware after waiting %s (scan: pending): %s; run the same command again later, or wait longer with --wait", e.Waited, detail)
	case ScanUnscannable:
		return fmt.Sprintf("not downloaded: it could not be checked for malware (scan: unscannable; %s): %s", e.releaseHint(), detail)
	case ScanFailed:
		return fmt.Sprintf("not downloaded: its check for malware failed (scan: error; %s): %s", e.releaseHint(), detail)
	case ScanInfected:
		return fmt.Sprintf("not downloaded: malware found (scan: infected): %s", detail)
	}
	return fmt.Sprintf("not downloaded (scan: %s): %s", e.State, detail)
}

func (e *ScanError) Unwrap() error { return e.Err }

// releaseHint says who can release the file, and how.
func (e *ScanError) releaseHint() string {
	if e.Release != "" {
		return "to fetch it unchecked, release it: " + e.Release
	}
	return "the package's owner can release it with 'shipfile release'"
}

// scanHeld says err is the answer for a file still being checked for malware: 409 with
// Retry-After (or with `scan: pending`).
func scanHeld(err error) bool {
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict {
		return false
	}
	return ae.Scan == ScanPending || (ae.Scan == "" && ae.RetryAfter > 0)
}

// scanRefused is the *ScanError of err when it is a refusal of file for good because of
// its scan (409 without Retry-After, for a file whose answer or record names a state
// that is not served), else nil. For the package's owner (d.Package) it names the
// command that releases the file.
func (d *Downloader) scanRefused(file apiclient.LinkFile, err error) error {
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || scanHeld(err) {
		return nil
	}
	state := ae.Scan
	if state == "" {
		state = string(file.Scan)
	}
	switch state {
	case ScanUnscannable, ScanFailed:
		se := &ScanError{State: state, Err: err}
		if d.Package != uuid.Nil {
			se.Release = fmt.Sprintf("shipfile release %s %s", d.Package, file.Id)
		}
		return se
	case ScanInfected:
		return &ScanError{State: state, Err: err}
	}
	return nil
}

// waitScan waits for file, held by the malware scan (err, the first answer), asking
// again after each Retry-After, until it is served (the answer to a request from have
// on), refused, or d.Wait has passed since the first wait of d: then the error is a
// *ScanError.
func (d *Downloader) waitScan(ctx context.Context, token string, file apiclient.LinkFile, name string, have int64, err error) (*http.Response, error) {
	if d.Wait <= 0 {
		return nil, &ScanError{State: ScanPending, Err: err}
	}
	if d.waitUntil.IsZero() {
		d.waitUntil = time.Now().Add(d.Wait)
	}
	if d.Waiting != nil && time.Until(d.waitUntil) > 0 {
		d.Waiting(name)
	}
	for {
		left := time.Until(d.waitUntil)
		if left <= 0 {
			return nil, &ScanError{State: ScanPending, Waited: d.Wait, Err: err}
		}
		pause := time.Second
		var ae *api.Error
		if errors.As(err, &ae) && ae.RetryAfter > 0 {
			pause = min(ae.RetryAfter, 30*time.Second)
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		var resp *http.Response
		resp, err = d.request(ctx, token, file, have)
		if scanHeld(err) {
			continue
		}
		if se := d.scanRefused(file, err); se != nil {
			return nil, se
		}
		return resp, err
	}
}
