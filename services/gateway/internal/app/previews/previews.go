// Package previews makes the image previews of uploaded files: a JPEG of at most
// MaxSide pixels a side, stored beside the file's object, shown as a thumbnail on the
// owner's and the recipient's pages and as a larger view (docs/WEB-UI.md, "Previews").
//
// A file gets one when it is a PNG, JPEG, GIF or WebP image, its package is not
// end-to-end encrypted, its scan allows it (Wanted), and the dimensions its header
// declares stay within MaxPixels: those are read with image.DecodeConfig before
// anything is decoded, so a decompression bomb costs a header read.
package previews

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	_ "image/gif" // GIF decoder
	"image/jpeg"
	_ "image/png" // PNG decoder
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	xdraw "golang.org/x/image/draw"
	_ "golang.org/x/image/webp" // WebP decoder

	"github.com/shipfile/shipfile/pkg/events"
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
	// after (the preview is queued for deletion with the file's object).
	SetPreview(ctx context.Context, fileID uuid.UUID, key string, width, height int) (recorded bool, err error)
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
var ErrNotImage = errors.New("previews: not a PNG, JPEG, GIF or WebP image")

// ErrTooLarge: the image's declared dimensions (or the file) are over the limits.
var ErrTooLarge = errors.New("previews: image over the pixel limit")

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
	recorded, err := m.store.SetPreview(ctx, fileID, key, w, h)
	if err != nil || !recorded {
		// The file went meanwhile (or the record failed): its preview goes too.
		_ = m.objects.Remove(context.WithoutCancel(ctx), key)
	}
	return err
}

// Render reads an image and returns its preview as a JPEG and the preview's size. It
// reads the header first (image.DecodeConfig) and decodes nothing of an image over
// the pixel limit. r must be at its start; it is read through once or twice (a
// seeker is rewound after the header).
func (m *Maker) Render(r io.ReadSeeker) (jpg []byte, width, height int, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	cfg, format, err := image.DecodeConfig(br)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: %v", ErrNotImage, err)
	}
	if !Checked(cfg, m.opts.MaxPixels) {
		return nil, 0, 0, fmt.Errorf("%w: %s of %d × %d", ErrTooLarge, format, cfg.Width, cfg.Height)
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, 0, 0, err
	}
	br.Reset(r)
	img, _, err := image.Decode(br)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: %v", ErrNotImage, err)
	}
	// The header was checked, but the decoded image is what counts.
	if b := img.Bounds(); !Checked(image.Config{Width: b.Dx(), Height: b.Dy()}, m.opts.MaxPixels) {
		return nil, 0, 0, ErrTooLarge
	}
	small := Scale(img, m.opts.MaxSide)
	var out bytes.Buffer
	if err := jpeg.Encode(&out, small, &jpeg.Options{Quality: m.opts.Quality}); err != nil {
		return nil, 0, 0, err
	}
	b := small.Bounds()
	return out.Bytes(), b.Dx(), b.Dy(), nil
}

// Checked says whether an image of cfg's dimensions may be decoded: positive and at
// most maxPixels in all.
func Checked(cfg image.Config, maxPixels int64) bool {
	w, h := int64(cfg.Width), int64(cfg.Height)
	return w > 0 && h > 0 && w <= maxPixels && h <= maxPixels && w*h <= maxPixels
}

// Scale returns img fitted within maxSide × maxSide (never enlarged) on white, so
// transparent pixels come out white in the JPEG.
func Scale(img image.Image, maxSide int) image.Image {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w > maxSide || h > maxSide {
		if w >= h {
			w, h = maxSide, max(1, h*maxSide/w)
		} else {
			w, h = max(1, w*maxSide/h), maxSide
		}
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(dst, dst.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	xdraw.ApproxBiLinear.Scale(dst, dst.Bounds(), img, b, xdraw.Over, nil)
	return dst
}
