package transfers

import (
	"context"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Store keeps the state of resumable uploads.
type Store interface {
	// CreateUpload inserts u in a transaction that serialises the creations of its
	// package and of its creator, after check accepts their counts.
	CreateUpload(ctx context.Context, u TusUpload, check func(OpenUploads) error) error
	GetUpload(ctx context.Context, id uuid.UUID) (TusUpload, error)
	// LockUpload takes the upload for lease (renewable) under owner and returns it;
	// ErrUploadLocked when another owner's lease runs. With who, only an upload who
	// owns is taken (app.ErrNotFound for another's, whose lease is left alone).
	LockUpload(ctx context.Context, id, owner uuid.UUID, lease time.Duration, who *TusOwner) (TusUpload, error)
	// AskRelease asks the request that holds the upload's lease to let go, on
	// whichever gateway it runs, and returns its lease owner; ok is false when no
	// lease runs.
	AskRelease(ctx context.Context, id uuid.UUID) (holder uuid.UUID, ok bool, err error)
	// SaveUpload stores offset, parts, tail, digest and expiry, and renews the lease
	// (or gives it back when release is set); ErrUploadLocked when owner no longer
	// holds it.
	SaveUpload(ctx context.Context, u TusUpload, owner uuid.UUID, lease time.Duration, release bool) error
	// RenewLease extends owner's lease on the upload and says whether another
	// request asked it to let go; ErrUploadLocked when owner no longer holds it.
	RenewLease(ctx context.Context, id, owner uuid.UUID, lease time.Duration) (asked bool, err error)
	UnlockUpload(ctx context.Context, id, owner uuid.UUID) error
	// CompleteUpload records the finished file like PackageStore.AddFile and, in the
	// same transaction, marks the upload complete and gives its lease back.
	CompleteUpload(ctx context.Context, u TusUpload, owner uuid.UUID, f app.File, change func(p *app.Package) (app.Effects, error)) (app.Package, error)
	DeleteUpload(ctx context.Context, id uuid.UUID) error
	// UploadsToEnd lists uploads past their expiry, or whose package is gone or no
	// longer takes uploads of their kind, that no running PATCH holds.
	UploadsToEnd(ctx context.Context, limit int) ([]TusUpload, error)
	// PackageUploads lists a package's uploads.
	PackageUploads(ctx context.Context, packageID uuid.UUID) ([]TusUpload, error)
	// OpenUploads counts a package's unfinished uploads (not past their expiry).
	OpenUploads(ctx context.Context, packageID uuid.UUID) (int, error)
	// FileExists reports whether a file row with that id exists.
	FileExists(ctx context.Context, id uuid.UUID) (bool, error)
	// KnownMultipart returns which of the S3 multipart upload ids an upload row names.
	KnownMultipart(ctx context.Context, ids []string) (map[string]bool, error)
}

// Multipart is an incomplete S3 multipart upload.
type Multipart struct {
	Key       string
	UploadID  string
	Initiated time.Time
}

// ChunkStore keeps the bytes of resumable uploads.
type ChunkStore interface {
	// Buffer returns a part buffer and the function that gives it back.
	Buffer() ([]byte, func(), error)
	StartMultipart(ctx context.Context, key, contentType string) (uploadID string, err error)
	PutPart(ctx context.Context, key, uploadID string, number int, data []byte) (TusPart, error)
	// StreamPart sends part number of len(buf) bytes, the first filled of which are in
	// buf already, while it reads the rest from r into buf, so that receiving and
	// sending overlap. Every byte taken from r is kept in buf[:N], in order, whatever
	// happens. A Part with its Size set was full and is stored; BodyErr is r's error
	// (io.EOF when it ended), which comes without a part when r ended or failed inside
	// it, and may come with one. The error is the store's.
	StreamPart(ctx context.Context, key, uploadID string, number int, r io.Reader, buf []byte, filled int) (Streamed, error)
	CompleteMultipart(ctx context.Context, key, uploadID string, parts []TusPart) error
	AbortMultipart(ctx context.Context, key, uploadID string) error
	// PutSmall stores data as one object.
	PutSmall(ctx context.Context, key string, data []byte, contentType string) error
	// ReadSmall reads the whole object into buf.
	ReadSmall(ctx context.Context, key string, buf []byte) (int, error)
	Remove(ctx context.Context, key string) error
	// RemovePrefix removes every object whose key starts with prefix.
	RemovePrefix(ctx context.Context, prefix string) error
	// ListMultipart lists the incomplete multipart uploads of keys under prefix.
	ListMultipart(ctx context.Context, prefix string) ([]Multipart, error)
}
