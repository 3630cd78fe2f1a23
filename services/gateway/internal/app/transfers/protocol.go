// Package transfers is resumable uploads (tus 1.0.0). The protocol's state lives in
// PostgreSQL (Store) and its bytes in an S3 multipart upload (ChunkStore), so any
// gateway instance, or one restarted, answers HEAD and goes on with PATCH. A PATCH
// holds one part buffer: bytes go into it and out as a part each time it is full. What
// is left when a PATCH ends is made durable too: as a part when it reaches S3's minimum
// part size, else as a small tail object that the next PATCH reads back into its
// buffer first.
//
// protocol.go answers the requests (creation, HEAD, PATCH, DELETE) and holds the state
// rules; chunkwriter.go writes a PATCH's bytes part by part; lease.go keeps one request
// at a time on an upload (leases, and asking a holder to let go); sweep.go ends
// uploads; model.go and store.go hold the types and the stores the package needs;
// checksum.go reads the Upload-Checksum header.
package transfers

import (
	"context"
	"crypto/sha256"
	"encoding"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

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
	// Quotas reserves uploads' lengths against their owners' quotas (nil: none).
	Quotas Quotas
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

// MaxSize is the largest upload (the file size limit).
func (r *Resumable) MaxSize() int64 { return r.p.Limits().MaxFileSize }

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
	res, err := r.reserve(ctx, p, in.Length)
	if err != nil {
		return ChunkResult{}, err
	}
	if err := r.store.CreateUpload(ctx, u, r.checkOpen); err != nil {
		r.release(ctx, res)
		return ChunkResult{}, err
	}
	if err := r.attach(ctx, res, u); err != nil {
		return ChunkResult{}, err
	}
	if in.Length > 0 {
		return ChunkResult{Upload: u}, nil
	}
	return r.Write(ctx, t, id, Chunk{Offset: 0, Body: strings.NewReader("")})
}

// checkOpen is the rule of a new upload's counts (docs/UPLOADS.md): unfinished uploads
// count toward the package's file limit, and a token, a browser user or a link has at
// most MaxOpen unfinished at once.
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

// Write is a PATCH: it appends the chunk at its offset. Bytes go out part by part;
// without a checksum the state is saved after every part (while the next part goes
// out, and before the answer), so a broken request keeps what reached the gateway. With a checksum nothing of the chunk
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
	if err := r.checkSizes(ctx, p, u); err != nil {
		return ChunkResult{}, err
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
	r.committed(ctx, p)
	res.File = &f
	res.Upload.Completed = true
	return res, nil
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
