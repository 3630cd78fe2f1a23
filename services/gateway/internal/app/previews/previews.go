// Package previews makes the image previews of uploaded files: a JPEG of at most
// MaxSide pixels a side, stored beside the file's object, shown as a thumbnail on the
// owner's and the recipient's pages and as a larger view (docs/API.md, "Image previews").
//
// A file gets one when it is a PNG, JPEG, GIF or WebP image, its package is not
// end-to-end encrypted, its scan allows it (Wanted), and the dimensions its header
// declares stay within MaxPixels: pkg/imagepreview reads them before
// anything is decoded, so a decompression bomb costs a header read.
package previews

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/imagepreview"
	"github.com/shipfile/shipfile/pkg/msgerr"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Defaults of Options.
const (
	DefaultMaxPixels = 40_000_000 // 40 megapixels: at most 160 MB decoded (RGBA)
	DefaultMaxBytes  = 64 << 20   // files larger than this are not decoded
	DefaultMaxSide   = 1024       // the preview's longer side, in pixels
	DefaultQuality   = 82         // JPEG quality of the preview
)

// Suffix is what a preview's object key adds to its file's object key.
const Suffix = ".preview.jpg"

// Key is the object key of the preview of the file stored under objectKey.
func Key(objectKey string) string { return objectKey + Suffix }

// Source is what the maker needs to know of a file.
type Source struct {
	FileID    uuid.UUID
	ObjectKey string
	Size      int64
	Scan      app.ScanState
	// Encrypted: the file or its package is end-to-end encrypted.
	Encrypted bool
	// State is the package's state.
	State app.State
	// PreviewKey is the stored preview's key, "" when there is none.
	PreviewKey string
}

// Store reads files and records their previews.
type Store interface {
	// PreviewSource returns the file; app.ErrNotFound when it is gone.
	PreviewSource(ctx context.Context, fileID uuid.UUID) (Source, error)
	// SetPreview records the preview of the file, holding its package so that a
	// deletion or expiry either comes before (recorded is false: nothing recorded) or
	// after (the preview is queued for deletion with the file's object). When a legal
	// hold covers the package and held is not nil, held runs in that transaction, the
	// package held, before the record commits; its error undoes the record.
	SetPreview(ctx context.Context, fileID uuid.UUID, key string, width, height int, held func(context.Context) error) (recorded bool, err error)
}

// ObjectLocker puts S3's legal hold on an object (SHIPFILE_S3_OBJECT_LOCK).
type ObjectLocker interface {
	SetLegalHold(ctx context.Context, key string, on bool) error
}

// Objects reads and writes objects.
type Objects interface {
	Open(ctx context.Context, key string) (app.Object, error)
	Put(ctx context.Context, key string, r io.Reader, contentType string) (int64, error)
	Remove(ctx context.Context, key string) error
}

// Options bound what a preview may cost.
type Options struct {
	MaxPixels int64 // width × height declared by the header
	MaxBytes  int64 // the file's size
	MaxSide   int
	Quality   int
	// Scan is the gateway's scanning mode: with scanning off previews are made at once,
	// otherwise after the verdict.
	Scan app.ScanMode
	Log  *slog.Logger
	// Locker (nil: no S3 object lock) puts S3's legal hold on the preview of a package
	// under a legal hold, as the hold does on the file objects (audit.Holds).
	Locker ObjectLocker
}

// Maker makes previews, one at a time per Maker so that at most one decoded image is
// in memory.
type Maker struct {
	store   Store
	objects Objects
	opts    Options
	mu      sync.Mutex
}

// New returns a Maker; zero options take their defaults.
func New(store Store, objects Objects, opts Options) *Maker {
	if opts.MaxPixels <= 0 {
		opts.MaxPixels = DefaultMaxPixels
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxSide <= 0 {
		opts.MaxSide = DefaultMaxSide
	}
	if opts.Quality <= 0 {
		opts.Quality = DefaultQuality
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Maker{store: store, objects: objects, opts: opts}
}

// Decision is what becomes of a file.
type Decision int

// Decisions of Wanted.
const (
	Skip  Decision = iota // no preview, ever
	Later                 // the scan has not judged the file yet
	Make                  // make it now
)

// Wanted says whether a file gets a preview in scanning mode m: never for an
// encrypted file, an infected one, one the scanner could not judge, or a package no
// longer active or draft; after the verdict while scanning is on; at once with it off.
func Wanted(m app.ScanMode, s Source) Decision {
	switch {
	case s.Encrypted, s.PreviewKey != "", s.Scan == app.ScanInfected:
		return Skip
	case s.State != app.StateDraft && s.State != app.StateActive:
		return Skip
	case m == app.ScanOff:
		return Make
	case s.Scan == app.ScanPending:
		return Later
	case s.Scan == app.ScanClean || s.Scan == app.ScanSkipped:
		return Make
	}
	return Skip
}

// ErrNotImage: the file is not an image of a kind previews are made of.
var ErrNotImage = imagepreview.ErrNotImage

// ErrTooLarge: the image's declared dimensions (or the file) are over the limits.
var ErrTooLarge = imagepreview.ErrTooLarge

// Handle handles one package.file_uploaded: it makes the file's preview when Wanted
// says so, asks for the event again while the file waits for its verdict, and
// acknowledges everything else. Errors are those of pkg/msgerr.
func (m *Maker) Handle(ctx context.Context, data []byte, numDelivered uint64) error {
	env, err := events.UnmarshalEnvelope(data)
	if err != nil {
		return msgerr.Poison(err)
	}
	fu := env.GetFileUploaded()
	if fu == nil {
		return nil
	}
	id, err := uuid.Parse(fu.GetFileId())
	if err != nil {
		return msgerr.Poison(fmt.Errorf("file id: %w", err))
	}
	switch err := m.Make(ctx, id); {
	case errors.Is(err, errLater):
		// Looked at again later, less often the longer the scan takes.
		return msgerr.RetryAfter(app.ScanRetryAfter*time.Duration(max(1, min(numDelivered, 12))), nil)
	case errors.Is(err, ErrNotImage), errors.Is(err, ErrTooLarge), errors.Is(err, app.ErrNotFound):
		return nil
	default:
		return err
	}
}

var errLater = errors.New("previews: waiting for the scan")

// Make makes the preview of one file if Wanted says so; nil when there is nothing to
// do. It returns ErrNotImage or ErrTooLarge for files that get none.
func (m *Maker) Make(ctx context.Context, fileID uuid.UUID) error {
	src, err := m.store.PreviewSource(ctx, fileID)
	if err != nil {
		return err
	}
	switch Wanted(m.opts.Scan, src) {
	case Skip:
		return nil
	case Later:
		return errLater
	}
	if src.Size > m.opts.MaxBytes {
		return ErrTooLarge
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	obj, err := m.objects.Open(ctx, src.ObjectKey)
	if err != nil {
		return err
	}
	defer obj.Close()
	jpg, w, h, err := m.Render(obj)
	if err != nil {
		if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrNotImage) {
			m.opts.Log.Info("no preview", "file_id", fileID, "reason", err.Error())
		}
		return err
	}
	key := Key(src.ObjectKey)
	if _, err := m.objects.Put(ctx, key, bytes.NewReader(jpg), "image/jpeg"); err != nil {
		return err
	}
	recorded, err := m.store.SetPreview(ctx, fileID, key, w, h, m.holdPreview(key))
	if err != nil || !recorded {
		// The file went meanwhile (or the record failed): its preview goes too.
		_ = m.objects.Remove(context.WithoutCancel(ctx), key)
	}
	return err
}

// holdPreview is what SetPreview runs for a held package: with object lock, S3's legal
// hold on the preview at key. It runs while the record's transaction holds the package,
// so a hold placed meanwhile either committed before (the package is held) or waits for
// the record and finds the preview among the objects it holds; a release waits likewise,
// and lifts the hold from the preview too. A preview held and then not recorded (the
// commit failed) keeps its S3 legal hold until it is lifted by hand.
func (m *Maker) holdPreview(key string) func(context.Context) error {
	if m.opts.Locker == nil {
		return nil
	}
	return func(ctx context.Context) error {
		if err := m.opts.Locker.SetLegalHold(ctx, key, true); err != nil {
			return fmt.Errorf("the package is on legal hold, and its preview could not be held: %w", err)
		}
		return nil
	}
}

// Render reads an image, at its start, and returns its preview as a JPEG and the
// preview's size (pkg/imagepreview: the header's dimensions are checked before
// anything is decoded).
func (m *Maker) Render(r io.ReadSeeker) (jpg []byte, width, height int, err error) {
	return imagepreview.Render(r, imagepreview.Options{MaxPixels: m.opts.MaxPixels, MaxSide: m.opts.MaxSide, Quality: m.opts.Quality})
}
