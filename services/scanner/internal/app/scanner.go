// Package app is what the scanner does, independent of NATS, SQL, S3 and the clamd
// protocol: for each uploaded file, stream its object to clamd, record the one verdict,
// and when clamd finds malware, quarantine the object and write the effects (audit
// entry, package.file_infected, the owner's e-mail) with the verdict. A file clamd
// cannot judge is 'unscannable', never 'clean' (Judge). The files of one package share
// the scan slots with the others' (Slots).
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/shipfile/shipfile/pkg/backoff"
	"github.com/shipfile/shipfile/pkg/clip"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/msgerr"
)

// Scan states of a file (files.scan): docs/SCANNING.md.
const (
	ScanPending  = "pending"
	ScanClean    = "clean"
	ScanInfected = "infected"
	ScanError    = "error"
	// ScanUnscannable: clamd could not judge the file (over a limit, encrypted, no
	// verdict in time); held like a pending file until its owner releases it.
	ScanUnscannable = "unscannable"
	ScanSkipped     = "skipped"
)

// AuditActionInfected is the audit log's action for a file clamd found malware in
// (actor "system"; the detail names the signature).
const AuditActionInfected = "file.infected"

// AuditActionUnscannable is the audit log's action for a file clamd could not judge
// (actor "system"; the detail says why).
const AuditActionUnscannable = "file.unscannable"

// ErrNotFound: the file (or its object) is gone, e.g. deleted with its package.
var ErrNotFound = errors.New("not found")

// ErrClamdUnavailable wraps a failure to reach clamd or a connection it dropped: the
// file is scanned again once clamd answers, however long that takes.
var ErrClamdUnavailable = errors.New("clamd unavailable")

// ScanFailedError is clamd's own answer that it could not scan a stream (e.g. "INSTREAM
// size limit exceeded"): counted, and after the attempts recorded as 'error'.
type ScanFailedError struct{ Reply string }

func (e *ScanFailedError) Error() string { return "clamd: " + e.Reply }

// File is a file to scan with its package's head.
type File struct {
	ID        string
	PackageID string
	Filename  string
	Size      int64
	ObjectKey string
	Scan      string
	Attempts  int
	// Package is the head of its package, for package.file_infected.
	Package events.PackageHead
}

// Verdict is what is recorded for a file.
type Verdict struct {
	FileID    string
	Scan      string // clean, infected, unscannable, error
	Signature string // when infected or unscannable: clamd's answer, or why
}

// Effects are written in the verdict's transaction when it is recorded (never for a
// verdict a file already had).
type Effects struct {
	Event       *eventsv1.Envelope
	AuditAction string
	AuditDetail string
	// NotifyOwner: an owner notification of kind 'infected' (the mailer sends it).
	NotifyOwner bool
}

// Store is what the scanner needs of the database.
type Store interface {
	// File returns the file with its package head, ErrNotFound when it is gone.
	File(ctx context.Context, fileID string) (File, error)
	// Record writes v, and fx with it, if the file is still pending: recorded says so.
	Record(ctx context.Context, f File, v Verdict, fx Effects) (recorded bool, err error)
	// CountFailure counts a failed attempt of a pending file and returns the attempts so
	// far (0: the file has a verdict or is gone).
	CountFailure(ctx context.Context, fileID string) (int, error)
}

// Objects is what the scanner needs of the object store.
type Objects interface {
	// Open streams an object; ErrNotFound when it is gone.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// Quarantine removes an infected object from the files' bucket (moving it to the
	// quarantine bucket when one is configured). An object already gone is no error.
	Quarantine(ctx context.Context, key string) error
}

// Clamd scans a stream.
type Clamd interface {
	// Scan streams r to clamd (INSTREAM) and returns the signature found, "" when clean.
	// A connection failure wraps ErrClamdUnavailable; clamd's error answer is a
	// *ScanFailedError, or an *UnscannableError when it refused the stream as too long
	// or gave no verdict in time.
	Scan(ctx context.Context, r io.Reader) (signature string, err error)
}

// Options tune a Scanner.
type Options struct {
	// MaxSize: larger files are recorded 'unscannable' without being read
	// (SHIPFILE_SCAN_MAX_SIZE).
	MaxSize int64
	// Workers are the files scanned at once (SHIPFILE_SCAN_WORKERS): the slots that
	// packages share.
	Workers int
	// PackageShare is how many slots the files of one package take while files of
	// other packages wait for one (default half the slots, at least one); with no one
	// waiting a package takes any free slot.
	PackageShare int
	// MaxAttempts: after this many failed attempts (clamd answered an error, the object
	// could not be read) the file is recorded 'error'.
	MaxAttempts int
	// RetryMax caps the wait before a file is tried again (clamd down, a failure).
	RetryMax time.Duration
}

// Scanner scans uploaded files.
type Scanner struct {
	store   Store
	objects Objects
	clamd   Clamd
	metrics *Metrics
	log     *slog.Logger
	opts    Options
	slots   *Slots
	now     func() time.Time
}

// New returns a Scanner.
func New(store Store, objects Objects, clamd Clamd, metrics *Metrics, log *slog.Logger, opts Options) *Scanner {
	if opts.MaxAttempts < 1 {
		opts.MaxAttempts = 5
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 30 * time.Second
	}
	if opts.Workers < 1 {
		opts.Workers = 4
	}
	if opts.PackageShare < 1 {
		opts.PackageShare = max(1, opts.Workers/2)
	}
	return &Scanner{store: store, objects: objects, clamd: clamd, metrics: metrics, log: log, opts: opts,
		slots: NewSlots(opts.Workers, opts.PackageShare, SlotLinger), now: time.Now}
}

// retry is the error that hands a message back, to be tried again after the back-off
// of its delivery count, capped at RetryMax, because of reason.
func (s *Scanner) retry(numDelivered uint64, reason string) error {
	return msgerr.RetryAfter(min(backoff.TransientDelay(numDelivered), s.opts.RetryMax), errors.New(reason))
}

// Handle scans the file of one package.file_uploaded event (other events are
// acknowledged at once). The message is acknowledged once the file has its verdict
// (recorded now, or before by another instance or an earlier delivery). It first takes
// a scan slot for the file's package; a package that holds its share of the slots
// while another's file waits, or finds none free by the end of its linger
// (SlotLinger), has its message handed back for a moment (deferDelay), so one package's
// backlog never holds every other file pending.
//
// It returns nil when the message is done, a msgerr.Poison when it is not an envelope,
// and a msgerr.RetryAfter when it is to be handled again; the transport turns these
// into Ack, Term and NakWithDelay.
func (s *Scanner) Handle(ctx context.Context, data []byte, numDelivered uint64) error {
	env, err := events.UnmarshalEnvelope(data)
	if err != nil {
		return msgerr.Poison(err)
	}
	fu := env.GetFileUploaded()
	if fu == nil {
		return nil
	}
	release, err := s.slots.Acquire(ctx, fu.GetPackage().GetPackageId())
	switch {
	case errors.Is(err, ErrNoSlot):
		s.metrics.Deferred.Inc()
		return msgerr.RetryAfter(deferDelay(numDelivered), nil)
	case err != nil:
		return msgerr.RetryAfter(0, nil) // stopping while waiting for a slot
	}
	defer release()
	f, err := s.store.File(ctx, fu.GetFileId())
	switch {
	case errors.Is(err, ErrNotFound):
		return nil // deleted meanwhile: nothing to scan
	case err != nil:
		return s.retry(numDelivered, err.Error())
	}
	log := s.log.With("file_id", f.ID, "package_id", f.PackageID)
	switch f.Scan {
	case ScanPending:
	case ScanInfected:
		// Recorded by an earlier delivery that may have stopped before the object was
		// removed: remove it now (idempotent).
		if err := s.objects.Quarantine(ctx, f.ObjectKey); err != nil {
			return s.retry(numDelivered, "quarantine: "+err.Error())
		}
		return nil
	default:
		return nil
	}
	if f.Size > s.opts.MaxSize {
		reason := fmt.Sprintf("larger than the scanner's limit (SHIPFILE_SCAN_MAX_SIZE, %d bytes)", s.opts.MaxSize)
		return s.record(ctx, log, f, Verdict{FileID: f.ID, Scan: ScanUnscannable, Signature: reason}, numDelivered)
	}

	s.metrics.InFlight.Inc()
	start := time.Now()
	sig, err := s.scan(ctx, f)
	s.metrics.InFlight.Dec()
	var sf *ScanFailedError
	var ue *UnscannableError
	switch {
	case errors.Is(err, ErrNotFound):
		// The object is gone: the file is being deleted (its row goes with it), or it
		// was never there. Counted like any failure, so a lost object ends as 'error'.
		return s.failed(ctx, log, f, numDelivered, "object not found")
	case errors.Is(err, ErrClamdUnavailable):
		s.metrics.ClamdUnavailable.Inc()
		if ctx.Err() != nil {
			return msgerr.RetryAfter(0, nil)
		}
		return s.retry(numDelivered, err.Error())
	case errors.As(err, &ue):
		return s.record(ctx, log, f, Verdict{FileID: f.ID, Scan: ScanUnscannable, Signature: ue.Reason}, numDelivered)
	case errors.As(err, &sf):
		return s.failed(ctx, log, f, numDelivered, sf.Error())
	case err != nil:
		if ctx.Err() != nil {
			return msgerr.RetryAfter(0, nil) // stopping: another instance scans it
		}
		// The object store failed midway: transient, like clamd being down.
		return s.retry(numDelivered, err.Error())
	}
	s.metrics.ScanSeconds.Observe(time.Since(start).Seconds())
	s.metrics.Bytes.Add(float64(f.Size))
	return s.record(ctx, log, f, Verdict{FileID: f.ID, Scan: Judge(sig), Signature: sig}, numDelivered)
}

// scan streams f's object to clamd.
func (s *Scanner) scan(ctx context.Context, f File) (string, error) {
	obj, err := s.objects.Open(ctx, f.ObjectKey)
	if err != nil {
		return "", err
	}
	defer obj.Close()
	return s.clamd.Scan(ctx, obj)
}

// failed counts a failed attempt; the last one records 'error'.
func (s *Scanner) failed(ctx context.Context, log *slog.Logger, f File, numDelivered uint64, reason string) error {
	n, err := s.store.CountFailure(ctx, f.ID)
	if err != nil {
		return s.retry(numDelivered, err.Error())
	}
	if n == 0 {
		return nil // a verdict meanwhile, or the file is gone
	}
	if n >= s.opts.MaxAttempts {
		log.Warn("file could not be scanned; recorded as error", "attempts", n, "reason", reason)
		return s.record(ctx, log, f, Verdict{FileID: f.ID, Scan: ScanError}, numDelivered)
	}
	return s.retry(numDelivered, fmt.Sprintf("scan attempt %d of %d failed: %s", n, s.opts.MaxAttempts, reason))
}

// record writes v (with its effects when infected or unscannable) and, for an infected
// file, removes its object once the verdict is committed. An unscannable file keeps its
// object (its owner may release it) and causes no event and no e-mail.
func (s *Scanner) record(ctx context.Context, log *slog.Logger, f File, v Verdict, numDelivered uint64) error {
	var fx Effects
	switch v.Scan {
	case ScanInfected:
		fx = InfectedEffects(f, v.Signature, s.now())
	case ScanUnscannable:
		fx = Effects{AuditAction: AuditActionUnscannable,
			AuditDetail: clip.Bytes(fmt.Sprintf("could not be checked for malware: %s: %s", f.Filename, v.Signature), 1000)}
	}
	recorded, err := s.store.Record(ctx, f, v, fx)
	if err != nil {
		return s.retry(numDelivered, err.Error())
	}
	if recorded {
		s.metrics.Files.WithLabelValues(v.Scan).Inc()
		log.Info("scan verdict recorded", "scan", v.Scan, "signature", v.Signature, "size", f.Size)
	}
	if v.Scan == ScanInfected {
		if err := s.objects.Quarantine(ctx, f.ObjectKey); err != nil {
			// The verdict stands (the link never serves the file); the redelivery
			// removes the object.
			return s.retry(numDelivered, "quarantine: "+err.Error())
		}
	}
	return nil
}

// InfectedEffects are the effects of finding sig in f at now: package.file_infected,
// the audit entry naming the signature, and the owner's e-mail.
func InfectedEffects(f File, sig string, now time.Time) Effects {
	e := events.NewEnvelope(events.TypePackageFileInfected, now.UTC())
	e.Data = &eventsv1.Envelope_FileInfected{FileInfected: &eventsv1.FileInfected{
		Package: f.Package.Proto(),
		FileId:  f.ID, Filename: f.Filename, Signature: sig,
	}}
	return Effects{
		Event:       e,
		AuditAction: AuditActionInfected,
		AuditDetail: clip.Bytes(fmt.Sprintf("malware found in %s: %s", f.Filename, sig), 1000),
		NotifyOwner: true,
	}
}
