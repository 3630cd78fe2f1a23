package transfers

import (
	"context"
	"crypto/sha1" //nolint:gosec // tus checksum extension algorithm, not used for security
	"crypto/sha256"
	"crypto/subtle"
	"encoding"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// Resumable uploads (tus 1.0.0). The protocol's state lives in PostgreSQL (Store) and
// its bytes in an S3 multipart upload (ChunkStore), so any gateway instance, or one
// restarted, answers HEAD and goes on with PATCH. A PATCH holds one part buffer: bytes
// go into it and out as a part each time it is full. What is left when a PATCH ends is
// made durable too: as a part when it reaches S3's minimum part size, else as a small
// tail object that the next PATCH reads back into its buffer first.

// TusUpload is the state of one resumable upload.
type TusUpload struct {
	ID            uuid.UUID
	PackageID     uuid.UUID
	UploadedBy    app.Uploader
	CreatorUserID *int64 // owner uploads
	// CreatorTokenID is the API token an owner's upload was created with (nil: a
	// browser session, or a recipient's upload).
	CreatorTokenID *int64
	LinkHash       []byte // recipient uploads: the link it was created through
	FileID         uuid.UUID
	Filename       string
	ContentType    string
	Length         int64
	Offset         int64
	ObjectKey      string
	S3UploadID     string // "" until the first part is sent
	Parts          []TusPart
	TailKey        string // "" when no tail is stored
	TailSize       int64
	SHA256State    []byte // the digest of the first Offset bytes (encoding.BinaryMarshaler)
	Completed      bool
	CreatedAt      time.Time
	ExpiresAt      time.Time
	// Held says a running request held its lease when it was read (GetUpload).
	Held bool
	// Manifest is the upload's own encrypted manifest entry (an encrypted file
	// request's uploads; app.ParseFileManifest), nil for none.
	Manifest []byte
}

// TusPart is a part of an upload's S3 multipart upload.
type TusPart struct {
	Number int    `json:"n"`
	ETag   string `json:"etag"`
	CRC32C string `json:"crc,omitempty"`
	Size   int64  `json:"size"`
}

// ErrUploadLocked is the answer to a request for an upload that another request
// holds and did not let go within TusConfig.LockWait: a holder that cannot be reached
// (its gateway was killed) until its lease lapses.
var ErrUploadLocked = &app.Error{Kind: app.KindLocked, Detail: "another request holds this upload and did not let go (its gateway may be gone); retry once its lease lapses"}

// TusOwner is whom an upload belongs to: its package, and the user who created it
// (owner uploads) or the link it was created through (recipient uploads).
type TusOwner struct {
	PackageID     uuid.UUID
	UploadedBy    app.Uploader
	CreatorUserID *int64
	LinkHash      []byte
}

// Owns says whether u belongs to o.
func (o TusOwner) Owns(u TusUpload) bool {
	if u.PackageID != o.PackageID || u.UploadedBy != o.UploadedBy {
		return false
	}
	if o.UploadedBy == app.ByOwner {
		return o.CreatorUserID != nil && u.CreatorUserID != nil && *u.CreatorUserID == *o.CreatorUserID
	}
	return len(o.LinkHash) > 0 && subtle.ConstantTimeCompare(u.LinkHash, o.LinkHash) == 1
}

// OpenUploads counts what a new upload is checked against, in the transaction that
// creates it.
type OpenUploads struct {
	Files     int // the package's files
	InPackage int // the package's unfinished uploads
	ByCreator int // the unfinished uploads of the same token, browser user or link
}

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
	// sending overlap. Every byte taken from r is kept in buf[:n], in order, whatever
	// happens. A part with its Size set was full and is stored; srcErr is r's error
	// (io.EOF when it ended), which comes without a part when r ended or failed inside
	// it, and may come with one. err is the store's.
	StreamPart(ctx context.Context, key, uploadID string, number int, r io.Reader, buf []byte, filled int) (part TusPart, n int, srcErr, err error)
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

// TusConfig tunes resumable uploads.
type TusConfig struct {
	// ResumeWindow is how long an unfinished upload lives after its last PATCH.
	ResumeWindow time.Duration
	// Lease is how long a PATCH's hold on an upload lasts without renewal; a crashed
	// gateway's PATCH holds its upload this long at most.
	Lease time.Duration
	// MinPartSize is the smallest part S3 takes before the last (5 MiB).
	MinPartSize int
	// OrphanGrace is the age after which an incomplete multipart upload under tus/
	// that no upload row names is aborted (a gateway died between starting it and
	// saving its id).
	OrphanGrace time.Duration
	// LockWait is how long a request for an upload that a running PATCH holds waits,
	// after asking that PATCH to let go, before it answers 423 (a holder that cannot
	// be reached).
	LockWait time.Duration
	// MaxOpen is how many unfinished uploads a token, a browser user or a link may
	// have at once (0: no limit).
	MaxOpen int
}

// openRetryAfter is the Retry-After of a creation refused for too many unfinished
// uploads: one of them has to be finished or ended first.
const openRetryAfter = 30 * time.Second

// Resumable is the tus upload service.
type Resumable struct {
	p       *packages.Packages
	links   *links.Links
	store   Store
	chunks  ChunkStore
	cfg     TusConfig
	log     *slog.Logger
	holders holders
}

// NewResumable returns the resumable upload service on the package service and its
// links (the recipient's uploads).
func NewResumable(p *packages.Packages, l *links.Links, store Store, chunks ChunkStore, cfg TusConfig, log *slog.Logger) *Resumable {
	if cfg.ResumeWindow <= 0 {
		cfg.ResumeWindow = 24 * time.Hour
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.MinPartSize <= 0 {
		cfg.MinPartSize = 5 << 20
	}
	if cfg.OrphanGrace <= 0 {
		cfg.OrphanGrace = time.Hour
	}
	if cfg.LockWait <= 0 {
		cfg.LockWait = 5 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Resumable{p: p, links: l, store: store, chunks: chunks, cfg: cfg, log: log, holders: holders{m: map[uuid.UUID]func(){}}}
	p.UseUploads(r.EndPackageUploads, store.OpenUploads)
	return r
}

// RunSweeper ends expired or orphaned uploads every interval until ctx ends.
func (r *Resumable) RunSweeper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := r.Sweep(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("upload sweep failed; the next one tries again", "ended", n, "err", err)
		} else if n > 0 {
			r.log.Info("upload sweep", "ended", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// MaxSize is the largest upload (the file size limit).
func (r *Resumable) MaxSize() int64 { return r.p.Limits().MaxFileSize }

// TusTarget is the package an upload request addresses and who asks.
type TusTarget struct {
	// Owner side: the signed-in user and the package id of the URL.
	User      *app.User
	PackageID uuid.UUID
	// TokenID is the API token of an owner's request (0: a browser session).
	TokenID int64
	// Recipient side: the raw link token of the URL.
	LinkToken string
	Client    app.Client
}

// NewTusUpload is a creation request.
type NewTusUpload struct {
	Length      int64
	Filename    string
	ContentType string
	// Manifest is the metadata entry manifest as sent ("" for none).
	Manifest string
}

// Chunk is the body of a PATCH (or of a POST with creation-with-upload).
type Chunk struct {
	Offset int64
	Body   io.Reader
	// Checksum is the Upload-Checksum header ("sha1 <base64>"), "" for none.
	Checksum string
	// Size is the body's length when the request says it (Content-Length), else -1.
	Size int64
	// Stop ends the reading of Body once what the client already sent is read: a
	// Read blocked on a client gone quiet returns at once, and later ones fail (the
	// transport moves the connection's read deadline). What a PATCH asked to hand its
	// upload over calls. nil: the PATCH stops at its next Read instead.
	Stop func()
}

// ChunkResult is where an upload stands after a chunk.
type ChunkResult struct {
	Upload TusUpload
	File   *app.File // set when the chunk completed the upload
}

// resolve checks the target's credential and package and returns the package, the
// operation the upload's completion needs, and the audit entry.
func (r *Resumable) resolve(ctx context.Context, t TusTarget) (app.Package, app.Op, app.AuditEntry, app.Uploader, error) {
	if t.User != nil {
		p, err := r.p.Visible(ctx, *t.User, t.PackageID)
		if err != nil {
			return app.Package{}, "", app.AuditEntry{}, "", err
		}
		return p, app.OpOwnerUpload, app.UserAudit(*t.User, t.Client, "file.upload", p.ID, nil), app.ByOwner, nil
	}
	p, err := r.links.ResolveLink(ctx, t.LinkToken, t.Client)
	if err != nil {
		return app.Package{}, "", app.AuditEntry{}, "", err
	}
	if p.Direction != app.Inbound {
		return app.Package{}, "", app.AuditEntry{}, "", app.Conflict("this package does not accept uploads")
	}
	return p, app.OpRecipientUpload, p.LinkAudit(t.Client, "file.upload", nil), app.ByRecipient, nil
}

// Create starts an upload. A zero-length upload is complete at once.
func (r *Resumable) Create(ctx context.Context, t TusTarget, in NewTusUpload) (ChunkResult, error) {
	p, op, _, by, err := r.resolve(ctx, t)
	if err != nil {
		return ChunkResult{}, err
	}
	probe := p
	if err := probe.Apply(op, r.p.Now()); err != nil {
		return ChunkResult{}, err
	}
	if in.Length < 0 {
		return ChunkResult{}, &app.Error{Kind: app.KindBadRequest, Detail: "Upload-Length must be a non-negative integer"}
	}
	if in.Length > r.p.Limits().MaxFileSize {
		return ChunkResult{}, &app.Error{Kind: app.KindTooLarge, Detail: fmt.Sprintf("file is larger than the limit of %d bytes", r.p.Limits().MaxFileSize)}
	}
	if p.FileCount >= r.p.Limits().MaxFiles {
		return ChunkResult{}, app.Conflict("package already has the maximum of %d files", r.p.Limits().MaxFiles)
	}
	var manifest []byte
	if in.Manifest != "" {
		if manifest, err = app.ParseFileManifest(in.Manifest); err != nil {
			return ChunkResult{}, err
		}
	}
	if err := app.CheckFileManifest(p, manifest); err != nil {
		return ChunkResult{}, err
	}
	if p.Encrypted() {
		// An age file is never shorter than its magic; the client's name and type are
		// not kept (app.AsRecorded).
		if in.Length < int64(len(app.AgeMagic)) {
			return ChunkResult{}, app.ErrNotAge
		}
		in.Filename, in.ContentType = "", "application/octet-stream"
	} else if in.Filename == "" {
		return ChunkResult{}, app.Invalid("Upload-Metadata needs a filename")
	} else if err := app.ValidateFilename(in.Filename); err != nil {
		return ChunkResult{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return ChunkResult{}, err
	}
	fileID, err := uuid.NewV7()
	if err != nil {
		return ChunkResult{}, err
	}
	state, err := sha256.New().(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return ChunkResult{}, err
	}
	now := r.p.Now().UTC().Truncate(time.Microsecond)
	u := TusUpload{
		ID: id, PackageID: p.ID, UploadedBy: by, FileID: fileID, Filename: in.Filename,
		ContentType: app.NormalizeContentType(in.ContentType), Length: in.Length,
		ObjectKey: tusObjectKey(p.ID, fileID), SHA256State: state, CreatedAt: now, ExpiresAt: now.Add(r.cfg.ResumeWindow),
		Manifest: manifest,
	}
	if t.User != nil {
		uid := t.User.ID
		u.CreatorUserID = &uid
		if t.TokenID > 0 {
			tid := t.TokenID
			u.CreatorTokenID = &tid
		}
	} else {
		u.LinkHash = p.LinkHash
	}
	if err := r.store.CreateUpload(ctx, u, r.checkOpen); err != nil {
		return ChunkResult{}, err
	}
	if in.Length > 0 {
		return ChunkResult{Upload: u}, nil
	}
	return r.Write(ctx, t, id, Chunk{Offset: 0, Body: strings.NewReader("")})
}

// checkOpen is the rule of a new upload's counts (SPEC "Hostile clients", unfinished
// uploads): unfinished uploads count toward the package's file limit, and a token, a
// browser user or a link has at most MaxOpen unfinished at once.
func (r *Resumable) checkOpen(o OpenUploads) error {
	if o.Files+o.InPackage >= r.p.Limits().MaxFiles {
		return app.Conflict("package already has the maximum of %d files, counting unfinished uploads", r.p.Limits().MaxFiles)
	}
	if r.cfg.MaxOpen > 0 && o.ByCreator >= r.cfg.MaxOpen {
		return &app.Error{Kind: app.KindTooMany, RetryAfter: openRetryAfter, Detail: fmt.Sprintf(
			"at most %d unfinished uploads at once; finish one, or end it with DELETE, first", r.cfg.MaxOpen)}
	}
	return nil
}

// tusObjectKey is where a resumable upload's file is stored. It is not under the
// "packages/" prefix whose incomplete multipart uploads the expiry service aborts by
// age: a resumable upload may run longer than that, and its own sweep ends it.
func tusObjectKey(packageID, fileID uuid.UUID) string {
	return tusPrefix + packageID.String() + "/" + fileID.String()
}

// tusPrefix is the prefix of every key of resumable uploads.
const tusPrefix = "tus/"

// tailPrefix is the prefix of an upload's tail objects.
func tailPrefix(u TusUpload) string { return u.ObjectKey + ".tail/" }

// get loads an upload and checks that it belongs to the target; anything else is
// not found (an upload URL says nothing to whoever does not own it).
func (r *Resumable) get(ctx context.Context, t TusTarget, id uuid.UUID) (TusUpload, app.Package, app.Op, app.AuditEntry, error) {
	p, op, audit, _, err := r.resolve(ctx, t)
	if err != nil {
		return TusUpload{}, app.Package{}, "", app.AuditEntry{}, err
	}
	u, err := r.store.GetUpload(ctx, id)
	if err != nil {
		return TusUpload{}, app.Package{}, "", app.AuditEntry{}, err
	}
	if !ownerOf(p, t).Owns(u) || !r.p.Now().Before(u.ExpiresAt) {
		return TusUpload{}, app.Package{}, "", app.AuditEntry{}, app.NotFound("upload")
	}
	return u, p, op, audit, nil
}

// ownerOf is whom the uploads a target may use belong to.
func ownerOf(p app.Package, t TusTarget) TusOwner {
	if t.User != nil {
		uid := t.User.ID
		return TusOwner{PackageID: p.ID, UploadedBy: app.ByOwner, CreatorUserID: &uid}
	}
	return TusOwner{PackageID: p.ID, UploadedBy: app.ByRecipient, LinkHash: p.LinkHash}
}

// Status answers HEAD: where the upload stands. An unfinished upload of a package that
// no longer takes it is ended and not found.
func (r *Resumable) Status(ctx context.Context, t TusTarget, id uuid.UUID) (TusUpload, error) {
	u, p, op, _, err := r.get(ctx, t, id)
	if err != nil {
		return TusUpload{}, err
	}
	if u.Held && !u.Completed {
		// A PATCH still runs (its client went away, or another client's): it is asked
		// to store what it has and let go, so the offset answered is where the next
		// PATCH succeeds.
		if u, err = r.awaitRelease(ctx, u); err != nil {
			return TusUpload{}, err
		}
	}
	if !u.Completed {
		if err := p.Apply(op, r.p.Now()); err != nil {
			r.endQuietly(ctx, u)
			return TusUpload{}, app.NotFound("upload")
		}
	}
	return u, nil
}

// Terminate ends an unfinished upload and removes what it stored.
func (r *Resumable) Terminate(ctx context.Context, t TusTarget, id uuid.UUID) error {
	u, _, _, _, err := r.get(ctx, t, id)
	if err != nil {
		return err
	}
	if u.Completed {
		return app.Conflict("the upload is complete; remove its file with DELETE on the file instead")
	}
	owner := uuid.New()
	who := TusOwner{PackageID: u.PackageID, UploadedBy: u.UploadedBy, CreatorUserID: u.CreatorUserID, LinkHash: u.LinkHash}
	locked, _, err := r.acquire(ctx, id, owner, &who)
	if err != nil {
		return err
	}
	if locked.Completed {
		_ = r.store.UnlockUpload(context.WithoutCancel(ctx), id, owner)
		return app.Conflict("the upload is complete; remove its file with DELETE on the file instead")
	}
	return r.end(ctx, locked)
}

// end removes what an unfinished upload stored and forgets it. The caller holds its
// lease, or no PATCH can run on it any more.
func (r *Resumable) end(ctx context.Context, u TusUpload) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	if u.S3UploadID != "" && !u.Completed {
		errs = append(errs, r.chunks.AbortMultipart(ctx, u.ObjectKey, u.S3UploadID))
	}
	errs = append(errs, r.chunks.RemovePrefix(ctx, tailPrefix(u)))
	if !u.Completed {
		// A completion that stored the object but failed to record it leaves it here.
		exists, err := r.store.FileExists(ctx, u.FileID)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !exists:
			errs = append(errs, r.chunks.Remove(ctx, u.ObjectKey))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("end upload %s: %w", u.ID, err)
	}
	return r.store.DeleteUpload(ctx, u.ID)
}

// endQuietly ends an upload when no PATCH holds it, logging a failure (the sweep tries
// again).
func (r *Resumable) endQuietly(ctx context.Context, u TusUpload) {
	owner := uuid.New()
	locked, err := r.store.LockUpload(ctx, u.ID, owner, r.cfg.Lease, nil)
	if err == nil {
		err = r.end(ctx, locked)
	}
	if err != nil && !errors.Is(err, ErrUploadLocked) && !errors.Is(err, app.ErrNotFound) {
		r.log.Warn("ending an upload failed; the sweep tries again", "upload_id", u.ID, "err", err)
	}
}

// EndPackageUploads ends the unfinished uploads of a package at once (it was deleted,
// revoked or expired). An upload a PATCH holds is left to the sweep.
func (r *Resumable) EndPackageUploads(ctx context.Context, packageID uuid.UUID) {
	ups, err := r.store.PackageUploads(ctx, packageID)
	if err != nil {
		r.log.Warn("listing a package's uploads failed; the sweep ends them", "package_id", packageID, "err", err)
		return
	}
	for _, u := range ups {
		if !u.Completed {
			r.endQuietly(ctx, u)
		}
	}
}

// Sweep ends uploads past their resume window, and those of packages that are gone or
// no longer take uploads, and returns how many it ended.
func (r *Resumable) Sweep(ctx context.Context) (int, error) {
	ups, err := r.store.UploadsToEnd(ctx, 500)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, u := range ups {
		owner := uuid.New()
		locked, err := r.store.LockUpload(ctx, u.ID, owner, r.cfg.Lease, nil)
		if errors.Is(err, ErrUploadLocked) || errors.Is(err, app.ErrNotFound) {
			continue
		}
		if err == nil {
			err = r.end(ctx, locked)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	orphans, err := r.abortOrphans(ctx)
	return n + orphans, errors.Join(append(errs, err)...)
}

// abortOrphans aborts the incomplete multipart uploads under tus/ older than
// OrphanGrace that no upload row names.
func (r *Resumable) abortOrphans(ctx context.Context) (int, error) {
	mps, err := r.chunks.ListMultipart(ctx, tusPrefix)
	if err != nil || len(mps) == 0 {
		return 0, err
	}
	ids := make([]string, len(mps))
	for i, m := range mps {
		ids[i] = m.UploadID
	}
	known, err := r.store.KnownMultipart(ctx, ids)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	cutoff := r.p.Now().Add(-r.cfg.OrphanGrace)
	for _, m := range mps {
		if known[m.UploadID] || !m.Initiated.Before(cutoff) {
			continue
		}
		if err := r.chunks.AbortMultipart(ctx, m.Key, m.UploadID); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// Write is a PATCH: it appends the chunk at its offset. Bytes go out part by part;
// without a checksum the state is saved after every part, so a broken request keeps
// what reached the gateway less at most one part. With a checksum nothing of the chunk
// counts until the whole chunk matches. The chunk that reaches the length completes the
// upload: the file is recorded as after a multipart upload.
//
// One request writes an upload at a time, under a lease in its row. A request that
// comes while an earlier PATCH holds it asks that PATCH to let go (see acquire): it
// stops reading, stores what it has, and answers 400. A PATCH whose lease is lost
// stops at once and stores nothing more.
func (r *Resumable) Write(ctx context.Context, t TusTarget, id uuid.UUID, c Chunk) (ChunkResult, error) {
	sum, err := parseChecksum(c.Checksum)
	if err != nil {
		return ChunkResult{}, err
	}
	p, op, audit, _, err := r.resolve(ctx, t)
	if err != nil {
		return ChunkResult{}, err
	}
	// The lease is taken only on an upload of this target's (the ownership is part of
	// the lock's statement: one round trip, and a stranger takes no lease and learns
	// nothing but "not found"). The row it returns is the state to go on from.
	owner := uuid.New()
	l := newLease(r.cfg.Lease, c.Stop)
	l.renew = func() (bool, error) {
		// Not cancelled with the request: a renewal under way finishes.
		return r.store.RenewLease(context.WithoutCancel(ctx), id, owner, r.cfg.Lease)
	}
	defer r.holders.add(owner, l.ask)()
	who := ownerOf(p, t)
	u, locked, err := r.acquire(ctx, id, owner, &who)
	if err != nil {
		return ChunkResult{}, err
	}
	l.renewed(locked)
	w := &chunkWriter{r: r, u: u, owner: owner, sum: sum, lease: l}
	defer func() {
		if !w.released {
			_ = r.store.UnlockUpload(context.WithoutCancel(ctx), id, owner)
		}
	}()
	if !r.p.Now().Before(u.ExpiresAt) {
		return ChunkResult{}, app.NotFound("upload")
	}
	if u.Completed {
		if c.Offset != u.Offset {
			return ChunkResult{}, app.Conflict("Upload-Offset %d does not match the upload's offset %d", c.Offset, u.Offset)
		}
		return ChunkResult{}, app.Conflict("the upload is already complete")
	}
	if err := p.Apply(op, r.p.Now()); err != nil {
		if endErr := r.end(ctx, u); endErr == nil {
			w.released = true // the row is gone
		}
		return ChunkResult{}, err
	}
	if c.Offset != u.Offset {
		return ChunkResult{}, app.Conflict("Upload-Offset %d does not match the upload's offset %d", c.Offset, u.Offset)
	}
	stop := r.keepLease(ctx, id, owner, l)
	defer stop() // before the unlock: deferred calls run last first
	defer func() {
		if w.unhold != nil {
			w.unhold()
		}
	}()
	w.size = c.Size
	body := io.Reader(&leaseBody{r: c.Body, l: l})
	if p.Encrypted() {
		// The bytes of the age magic are checked as they come, whichever chunk brings
		// them: an upload that is no age file ends here, and nothing of it is kept.
		if body, err = app.CheckAgeChunk(u.Offset, body); err != nil {
			if endErr := r.end(ctx, u); endErr == nil {
				w.released = true // the row is gone
			}
			return ChunkResult{}, err
		}
	}
	res, err := w.write(ctx, body)
	if err != nil || res.Upload.Offset < res.Upload.Length {
		return res, err
	}
	f, err := r.complete(ctx, w, op, audit)
	if err != nil {
		return ChunkResult{}, err
	}
	res.File = &f
	res.Upload.Completed = true
	return res, nil
}

// askAgain is how often a waiting request repeats its ask to let go (a new holder
// may have taken the lease meanwhile, or the ask's notification was missed), and
// maxPoll the longest pause between two looks at the lease.
const (
	askAgain = time.Second
	maxPoll  = 100 * time.Millisecond
)

// acquire takes the upload's lease for owner (only an upload who owns, when who is
// set). When a running request holds it, that request is asked to let go, on
// whichever gateway it runs, and acquire waits for it up to LockWait: a PATCH whose
// client went away, or a second client's, stores what it has and gives the lease
// back within that time. ErrUploadLocked is left for a holder that cannot be reached
// (a killed gateway's, until its lease lapses). It returns the row and when the lock
// statement was sent (the earliest the lease may have started).
func (r *Resumable) acquire(ctx context.Context, id, owner uuid.UUID, who *TusOwner) (TusUpload, time.Time, error) {
	deadline := time.Now().Add(r.cfg.LockWait)
	var askedAt time.Time
	pause := 5 * time.Millisecond
	for {
		start := time.Now()
		u, err := r.store.LockUpload(ctx, id, owner, r.cfg.Lease, who)
		if !errors.Is(err, ErrUploadLocked) {
			return u, start, err
		}
		if time.Since(askedAt) >= askAgain {
			if err := r.askRelease(ctx, id); err != nil {
				return TusUpload{}, start, err
			}
			askedAt = time.Now()
		}
		if err := sleepUntil(ctx, deadline, pause); err != nil {
			return TusUpload{}, start, err
		}
		pause = min(2*pause, maxPoll)
	}
}

// awaitRelease asks the request that holds u to let go and waits up to LockWait for
// it, then returns the upload as it stands (still held when its holder cannot be
// reached).
func (r *Resumable) awaitRelease(ctx context.Context, u TusUpload) (TusUpload, error) {
	deadline := time.Now().Add(r.cfg.LockWait)
	var askedAt time.Time
	pause := 5 * time.Millisecond
	for u.Held {
		if time.Since(askedAt) >= askAgain {
			if err := r.askRelease(ctx, u.ID); err != nil {
				return TusUpload{}, err
			}
			askedAt = time.Now()
		}
		if err := sleepUntil(ctx, deadline, pause); errors.Is(err, ErrUploadLocked) {
			return u, nil
		} else if err != nil {
			return TusUpload{}, err
		}
		pause = min(2*pause, maxPoll)
		next, err := r.store.GetUpload(ctx, u.ID)
		if err != nil {
			return TusUpload{}, err
		}
		u = next
	}
	return u, nil
}

// sleepUntil waits pause (cut to the deadline); ErrUploadLocked once the deadline has
// passed, ctx's error when it ends first.
func sleepUntil(ctx context.Context, deadline time.Time, pause time.Duration) error {
	left := time.Until(deadline)
	if left <= 0 {
		return ErrUploadLocked
	}
	t := time.NewTimer(min(pause, left))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// askRelease asks the holder of the upload's lease to let go: through the store (the
// row and a notification that reaches every gateway), and directly when it runs here.
func (r *Resumable) askRelease(ctx context.Context, id uuid.UUID) error {
	holder, ok, err := r.store.AskRelease(ctx, id)
	if err != nil || !ok {
		return err
	}
	r.holders.ask(holder)
	return nil
}

// AskRelease is what the store's listener calls when a request asked the lease
// holder holder to let go: a PATCH of this gateway holding it stops reading, stores
// what it has and gives the lease back.
func (r *Resumable) AskRelease(holder uuid.UUID) { r.holders.ask(holder) }

// holders are the requests of this gateway that hold (or are about to take) a lease,
// by lease owner, each with the function that asks it to let go.
type holders struct {
	mu sync.Mutex
	m  map[uuid.UUID]func()
}

// add registers owner's ask until the returned function is called.
func (h *holders) add(owner uuid.UUID, ask func()) (remove func()) {
	h.mu.Lock()
	h.m[owner] = ask
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.m, owner)
		h.mu.Unlock()
	}
}

// ask asks owner to let go when it runs here.
func (h *holders) ask(owner uuid.UUID) {
	h.mu.Lock()
	ask := h.m[owner]
	h.mu.Unlock()
	if ask != nil {
		ask()
	}
}

// Why a PATCH stops before its body ends.
var (
	// errHandedOver: another request for the upload asked it to let go.
	errHandedOver = &app.Error{Kind: app.KindBadRequest, Detail: "another request for this upload took it over; what reached the gateway is kept: ask HEAD for the offset"}
	// errLeaseLost: its lease could not be renewed; another request may hold the
	// upload now, so it stores nothing more.
	errLeaseLost = &app.Error{Kind: app.KindLocked, Detail: "this request lost its hold on the upload and stopped; ask HEAD for the offset"}
)

// lease is a running PATCH's hold on its upload, as its renewals find it.
type lease struct {
	length time.Duration
	stop   func() // interrupts the body; nil: the next Read stops instead
	// renew extends the lease now and says whether another request asked for it
	// (ErrUploadLocked: lost).
	renew func() (asked bool, err error)

	mu       sync.Mutex
	until    time.Time // the lease surely runs until then (local clock)
	asked    bool
	lost     error // why the lease is lost; nil while it holds
	stopOnce sync.Once
}

func newLease(length time.Duration, stop func()) *lease {
	return &lease{length: length, stop: stop}
}

// renewed records a renewal (or the lock) sent at start that found the lease held.
func (l *lease) renewed(start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = start.Add(l.length)
}

// ask records that another request asked for the upload, and interrupts the body.
func (l *lease) ask() {
	l.mu.Lock()
	l.asked = true
	l.mu.Unlock()
	l.interrupt()
}

// lose records that the lease is gone (or cannot be known to hold), and interrupts
// the body.
func (l *lease) lose(err error) {
	l.mu.Lock()
	if l.lost == nil {
		l.lost = err
	}
	l.mu.Unlock()
	l.interrupt()
}

func (l *lease) interrupt() {
	if l.stop != nil {
		l.stopOnce.Do(l.stop)
	}
}

// holds returns nil while the PATCH may still write: its lease is not lost and holds
// now. When the renewals are late (the lease may have lapsed since the last one that
// held it), it renews first: a PATCH writes nothing on a lease it cannot be sure of.
func (l *lease) holds() error {
	l.mu.Lock()
	lost, until := l.lost, l.until
	l.mu.Unlock()
	if lost != nil || until.IsZero() || time.Now().Before(until) || l.renew == nil {
		return lost
	}
	l.renewNow(true)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// renewNow renews the lease and records what the renewal found. A failed renewal
// loses the lease when strict (the caller must know), else it is left to the next one
// (or to holds, once the lease may have lapsed).
func (l *lease) renewNow(strict bool) {
	start := time.Now()
	asked, err := l.renew()
	switch {
	case errors.Is(err, ErrUploadLocked):
		l.lose(errLeaseLost)
	case err != nil:
		if strict {
			l.lose(fmt.Errorf("renew an upload's lease: %w", err))
		}
	default:
		l.renewed(start)
		if asked {
			l.ask()
		}
	}
}

// lostErr says why the lease is lost, nil while it is not known to be.
func (l *lease) lostErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// wasAsked says whether another request asked for the upload.
func (l *lease) wasAsked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.asked
}

// interrupted says why the body must not be read on: errLeaseLost (or the renewal's
// failure), errHandedOver, or nil.
func (l *lease) interrupted() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.lost
	}
	if l.asked {
		return errHandedOver
	}
	return nil
}

// leaseBody is a PATCH's body that stops as soon as its lease is lost, and once it is
// asked for.
type leaseBody struct {
	r io.Reader
	l *lease
}

// Asked to let go, it still reads what the client has already sent, as long as the
// transport's Stop lets it (see Chunk.Stop): those bytes reached the gateway and are
// kept. Without a Stop it ends at once.
func (b *leaseBody) Read(p []byte) (int, error) {
	if err := b.l.lostErr(); err != nil {
		return 0, err
	}
	if b.l.stop == nil && b.l.wasAsked() {
		return 0, errHandedOver
	}
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		if why := b.l.interrupted(); why != nil {
			err = why // the interruption made the read fail
		}
	}
	return n, err
}

// keepLease renews the upload's lease while a PATCH runs, until the returned function
// is called. A renewal that finds another request's ask to let go interrupts the PATCH
// like the ask's notification (which may have been missed); one that finds the lease
// gone stops it at once. (One that fails is left to the next; before writing, the
// PATCH renews itself once the lease may have lapsed: lease.holds.)
func (r *Resumable) keepLease(ctx context.Context, id, owner uuid.UUID, l *lease) func() {
	return packages.RenewEvery(ctx, r.cfg.Lease/3, func(context.Context) { l.renewNow(false) })
}

// complete stores the last bytes, completes the multipart upload and records the file
// in the package's transaction, which checks the package's state again; when that
// fails nothing is kept.
func (r *Resumable) complete(ctx context.Context, w *chunkWriter, op app.Op, audit app.AuditEntry) (app.File, error) {
	ctx = context.WithoutCancel(ctx) // the bytes are all here: finish even if the client goes
	u := w.u
	digest, err := restoreDigest(u.SHA256State)
	if err != nil {
		return app.File{}, err
	}
	f := app.File{
		ID: u.FileID, PackageID: u.PackageID, Filename: u.Filename, ContentType: u.ContentType,
		ObjectKey: u.ObjectKey, UploadedBy: u.UploadedBy, Size: u.Length, Scan: app.ScanPending, Manifest: u.Manifest,
		SHA256:    fmt.Sprintf("%x", digest.Sum(nil)),
		CreatedAt: r.p.Now().UTC().Truncate(time.Microsecond),
	}
	if f.UploadedBy == app.ByRecipient {
		f.RecipientID = audit.RecipientID // the link it came through
	}
	f, err = r.p.RecordFile(ctx, f, op, audit, func(ctx context.Context, f app.File, change func(p *app.Package) (app.Effects, error)) (app.Package, error) {
		return r.store.CompleteUpload(ctx, u, w.owner, f, change)
	})
	if err != nil {
		r.log.Info("a completed upload could not be recorded; removing it", "upload_id", u.ID, "err", err)
		if endErr := r.end(ctx, u); endErr != nil {
			r.log.Warn("removing a failed upload", "upload_id", u.ID, "err", endErr)
		}
		return app.File{}, err
	}
	w.released = true
	_ = r.chunks.RemovePrefix(ctx, tailPrefix(u))
	if u.UploadedBy == app.ByRecipient {
		_ = r.links.RecordLinkUse(ctx, u.LinkHash, app.Effects{})
	}
	return f, nil
}

// chunkWriter is one PATCH's work on an upload it holds.
type chunkWriter struct {
	r     *Resumable
	u     TusUpload // the saved state
	owner uuid.UUID
	lease *lease
	sum   *checksum
	// released: the last save gave the lease back (no unlock needed).
	released bool
	// size is the body's announced length (-1: unknown): once that much is read, the
	// save of the last part can give the lease back (one round trip less a PATCH).
	size int64
	// unhold ends the hold on the object key of the file being completed (nil when
	// none is held): the key is reserved from before the object exists until its row
	// commits, as for multipart uploads, so an orphan object is found and removed.
	unhold func()
}

// write reads the body into the part buffer (after the stored tail), sends every full
// buffer as a part, and saves the state; see Write.
func (w *chunkWriter) write(ctx context.Context, body io.Reader) (ChunkResult, error) {
	r := w.r
	buf, release, err := r.chunks.Buffer()
	if err != nil {
		return ChunkResult{}, err
	}
	defer release()
	digest, err := restoreDigest(w.u.SHA256State)
	if err != nil {
		return ChunkResult{}, err
	}

	next := w.u // the state as the chunk goes on
	n := 0      // bytes in buf
	if next.TailSize > 0 {
		if n, err = r.chunks.ReadSmall(ctx, next.TailKey, buf); err != nil {
			return ChunkResult{}, fmt.Errorf("read tail of upload %s: %w", next.ID, err)
		}
		if int64(n) != next.TailSize {
			return ChunkResult{}, fmt.Errorf("tail of upload %s has %d bytes, want %d", next.ID, n, next.TailSize)
		}
	}
	left := next.Length - next.Offset
	lim := &io.LimitedReader{R: body, N: left + 1}
	var bodyErr error
	var read int64 // bytes of this body
	oldTail := next.TailKey
	// took counts b, the body's bytes just read into buf[n:], in the digests and the state.
	took := func(b []byte) {
		digest.Write(b)
		if w.sum != nil {
			w.sum.h.Write(b)
		}
		n += len(b)
		read += int64(len(b))
		left -= int64(len(b))
		next.Offset += int64(len(b))
	}
	for bodyErr == nil {
		if n == 0 && left > int64(len(buf)) && (w.size < 0 || w.size-read >= int64(len(buf))) {
			// A whole part that is not the upload's last: sent while it arrives, once its
			// first bytes did. A body that announces less than a part, or ends before its
			// first byte, starts nothing in the store.
			m, srcErr := 0, error(nil)
			for m == 0 && srcErr == nil {
				m, srcErr = lim.Read(buf)
			}
			var part TusPart
			var err error
			if srcErr == nil {
				part, m, srcErr, err = w.streamPart(ctx, &next, lim, buf, m)
			}
			took(buf[:m])
			if err != nil {
				return ChunkResult{Upload: w.u}, err
			}
			if srcErr != nil {
				bodyErr = srcErr
				if errors.Is(srcErr, io.EOF) || errors.Is(srcErr, io.ErrUnexpectedEOF) {
					bodyErr = io.EOF
				}
			}
			if part.Size == 0 {
				// The body ended or broke off inside the part: buf[:n] is dealt with
				// below, as a read that ended short is.
				break
			}
			next.Parts = append(append([]TusPart(nil), next.Parts...), part)
			n = 0
			next.TailKey, next.TailSize = "", 0
			if w.sum == nil {
				if err := w.save(ctx, next, digest, w.size >= 0 && read == w.size); err != nil {
					return ChunkResult{Upload: w.u}, err
				}
			}
			continue
		}
		m, err := io.ReadFull(lim, buf[n:])
		if int64(m) > left {
			return ChunkResult{Upload: w.u}, &app.Error{Kind: app.KindTooLarge, Detail: "the chunk goes past Upload-Length"}
		}
		took(buf[n : n+m])
		switch {
		case err == nil:
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			if lim.N > 0 { // the body ended, not the limit
				bodyErr = io.EOF
			}
		default:
			bodyErr = err
		}
		if n < len(buf) || next.Offset == next.Length {
			break
		}
		// A full buffer that is not the upload's end goes out as a part.
		if err := w.putPart(ctx, &next, buf[:n]); err != nil {
			return ChunkResult{Upload: w.u}, err
		}
		n = 0
		next.TailKey, next.TailSize = "", 0
		if w.sum == nil {
			if err := w.save(ctx, next, digest, w.size >= 0 && read == w.size); err != nil {
				return ChunkResult{Upload: w.u}, err
			}
		}
	}
	if bodyErr == io.EOF {
		bodyErr = nil
	}
	if err := w.lease.holds(); err != nil {
		// Another request may hold the upload now: nothing more is stored.
		return ChunkResult{Upload: w.u}, err
	}
	if w.sum != nil {
		if bodyErr == errHandedOver {
			return ChunkResult{Upload: w.u}, &app.Error{Kind: app.KindBadRequest, Detail: "another request for this upload took it over; the chunk is discarded"}
		}
		if bodyErr != nil {
			return ChunkResult{Upload: w.u}, &app.Error{Kind: app.KindBadRequest, Detail: "the upload broke off; the chunk is discarded: " + bodyErr.Error()}
		}
		if !w.sum.matches() {
			return ChunkResult{Upload: w.u}, &app.Error{Kind: app.KindChecksumMismatch, Detail: "Upload-Checksum does not match the chunk; the chunk is discarded"}
		}
	}
	// Whatever reached the gateway is kept, even when the body broke off: the client's
	// HEAD then tells it where to go on. It outlives a cancelled request.
	sctx := context.WithoutCancel(ctx)
	if next.Offset == next.Length {
		unhold, err := r.p.HoldObjectKey(sctx, next.ObjectKey)
		if err != nil {
			return ChunkResult{Upload: w.u}, err
		}
		w.unhold = unhold
		if err := w.finish(sctx, &next, buf[:n]); err != nil {
			return ChunkResult{Upload: w.u}, err
		}
		if next.SHA256State, err = digest.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
			return ChunkResult{Upload: w.u}, err
		}
		w.u = next
		return ChunkResult{Upload: next}, nil
	}
	if next.Offset != w.u.Offset {
		if n >= r.cfg.MinPartSize {
			if err := w.putPart(sctx, &next, buf[:n]); err != nil {
				return ChunkResult{Upload: w.u}, err
			}
			next.TailKey, next.TailSize = "", 0
		} else if n > 0 {
			if err := w.lease.holds(); err != nil {
				return ChunkResult{Upload: w.u}, err
			}
			key := fmt.Sprintf("%s%d", tailPrefix(next), next.Offset)
			if err := r.chunks.PutSmall(sctx, key, buf[:n], "application/octet-stream"); err != nil {
				return ChunkResult{Upload: w.u}, err
			}
			next.TailKey, next.TailSize = key, int64(n)
		}
		if err := w.save(sctx, next, digest, bodyErr == nil); err != nil {
			return ChunkResult{Upload: w.u}, err
		}
	}
	if oldTail != "" && oldTail != w.u.TailKey {
		_ = r.chunks.Remove(sctx, oldTail)
	}
	if bodyErr == errHandedOver {
		return ChunkResult{Upload: w.u}, errHandedOver
	}
	if bodyErr != nil {
		return ChunkResult{Upload: w.u}, &app.Error{Kind: app.KindBadRequest, Detail: "the upload broke off: " + bodyErr.Error()}
	}
	return ChunkResult{Upload: w.u}, nil
}

// streamPart sends the next part, whose first filled bytes are in buf, while reading
// the rest from body into buf (ChunkStore's StreamPart), starting the multipart upload
// first if needed.
func (w *chunkWriter) streamPart(ctx context.Context, next *TusUpload, body io.Reader, buf []byte, filled int) (TusPart, int, error, error) {
	if err := w.startPart(ctx, next); err != nil {
		return TusPart{}, filled, nil, err
	}
	return w.r.chunks.StreamPart(ctx, next.ObjectKey, next.S3UploadID, len(next.Parts)+1, body, buf, filled)
}

// putPart sends data as the next part, starting the multipart upload first if needed.
func (w *chunkWriter) putPart(ctx context.Context, next *TusUpload, data []byte) error {
	if err := w.startPart(ctx, next); err != nil {
		return err
	}
	part, err := w.r.chunks.PutPart(ctx, next.ObjectKey, next.S3UploadID, len(next.Parts)+1, data)
	if err != nil {
		return err
	}
	next.Parts = append(append([]TusPart(nil), next.Parts...), part)
	return nil
}

// startPart checks the lease before a part is sent, and starts the multipart upload
// when this is its first part.
func (w *chunkWriter) startPart(ctx context.Context, next *TusUpload) error {
	// A PATCH that lost its lease writes no part: another may write the same numbers.
	if err := w.lease.holds(); err != nil {
		return err
	}
	if next.S3UploadID == "" {
		id, err := w.r.chunks.StartMultipart(ctx, next.ObjectKey, next.ContentType)
		if err != nil {
			return err
		}
		next.S3UploadID = id
		// Saved at once, so a chunk discarded later cannot leave the multipart upload
		// unknown to the sweep.
		saved := w.u
		saved.S3UploadID = id
		if err := w.r.store.SaveUpload(ctx, saved, w.owner, w.r.cfg.Lease, false); err != nil {
			_ = w.r.chunks.AbortMultipart(context.WithoutCancel(ctx), next.ObjectKey, id)
			return err
		}
		w.u = saved
	}
	return nil
}

// finish stores the upload's last bytes: a multipart upload gets them as its last
// part and is completed; an upload that never filled a part is one PUT.
func (w *chunkWriter) finish(ctx context.Context, next *TusUpload, data []byte) error {
	r := w.r
	if err := w.lease.holds(); err != nil {
		return err
	}
	if len(next.Parts) == 0 {
		if next.S3UploadID != "" {
			_ = r.chunks.AbortMultipart(ctx, next.ObjectKey, next.S3UploadID)
			next.S3UploadID = ""
		}
		return r.chunks.PutSmall(ctx, next.ObjectKey, data, next.ContentType)
	}
	if len(data) > 0 {
		if err := w.putPart(ctx, next, data); err != nil {
			return err
		}
	}
	if err := w.lease.holds(); err != nil {
		return err
	}
	if err := r.chunks.CompleteMultipart(ctx, next.ObjectKey, next.S3UploadID, next.Parts); err != nil {
		return err
	}
	next.TailKey, next.TailSize = "", 0
	return nil
}

// save stores the state of next (with the digest of its first Offset bytes).
func (w *chunkWriter) save(ctx context.Context, next TusUpload, digest hash.Hash, final bool) error {
	state, err := digest.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return err
	}
	next.SHA256State = state
	next.ExpiresAt = w.r.p.Now().UTC().Truncate(time.Microsecond).Add(w.r.cfg.ResumeWindow)
	if err := w.r.store.SaveUpload(ctx, next, w.owner, w.r.cfg.Lease, final); err != nil {
		return err
	}
	w.u = next
	w.released = final
	return nil
}

func restoreDigest(state []byte) (hash.Hash, error) {
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
		return nil, fmt.Errorf("restore upload digest: %w", err)
	}
	return h, nil
}

// checksum is a chunk's Upload-Checksum being verified.
type checksum struct {
	h    hash.Hash
	want []byte
}

func (c *checksum) matches() bool { return subtle.ConstantTimeCompare(c.h.Sum(nil), c.want) == 1 }

// TusChecksumAlgorithms are the algorithms of the checksum extension.
const TusChecksumAlgorithms = "sha1,sha256"

// parseChecksum reads an Upload-Checksum header: "<algorithm> <base64 digest>".
func parseChecksum(header string) (*checksum, error) {
	if header == "" {
		return nil, nil
	}
	alg, enc, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok {
		return nil, &app.Error{Kind: app.KindBadRequest, Detail: "Upload-Checksum must be \"<algorithm> <base64 digest>\""}
	}
	want, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return nil, &app.Error{Kind: app.KindBadRequest, Detail: "Upload-Checksum's digest is not base64"}
	}
	var h hash.Hash
	switch strings.ToLower(alg) {
	case "sha1":
		h = sha1.New() //nolint:gosec // what the client asked for
	case "sha256":
		h = sha256.New()
	default:
		return nil, &app.Error{Kind: app.KindBadRequest, Detail: "Upload-Checksum algorithm must be one of " + TusChecksumAlgorithms}
	}
	if len(want) != h.Size() {
		return nil, &app.Error{Kind: app.KindBadRequest, Detail: "Upload-Checksum's digest has the wrong length"}
	}
	return &checksum{h: h, want: want}, nil
}
