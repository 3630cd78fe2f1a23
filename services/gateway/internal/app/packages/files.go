package packages

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// UploadAsOwner streams a file into a draft package the user may manage.
func (s *Packages) UploadAsOwner(ctx context.Context, u app.User, client app.Client, id uuid.UUID, up app.Upload) (app.File, error) {
	p, err := s.visible(ctx, u, id)
	if err != nil {
		return app.File{}, err
	}
	return s.upload(ctx, p, up, app.ByOwner, app.OpOwnerUpload, app.UserAudit(u, client, "file.upload", id, nil))
}

// upload checks what it can before taking the bytes, streams them to storage, then
// records the file in one transaction that checks the state again. When the
// transaction fails the stored object is removed, so no object outlives a failed
// upload.
func (s *Packages) upload(ctx context.Context, p app.Package, up app.Upload, by app.Uploader, op app.Op, audit app.AuditEntry) (app.File, error) {
	probe := p
	if err := probe.Apply(op, s.now()); err != nil {
		return app.File{}, err
	}
	if p.FileCount >= s.limits.MaxFiles {
		return app.File{}, app.Conflict("package already has the maximum of %d files", s.limits.MaxFiles)
	}
	if s.openUploads != nil {
		open, err := s.openUploads(ctx, p.ID)
		if err != nil {
			return app.File{}, err
		}
		if p.FileCount+open >= s.limits.MaxFiles {
			return app.File{}, app.Conflict("package already has the maximum of %d files, counting unfinished uploads", s.limits.MaxFiles)
		}
	}
	var manifest []byte
	if up.Manifest != "" {
		m, err := app.ParseFileManifest(up.Manifest)
		if err != nil {
			return app.File{}, err
		}
		manifest = m
	}
	if err := app.CheckFileManifest(p, manifest); err != nil {
		return app.File{}, err
	}
	body := up.Body
	if p.Encrypted() {
		// The client's name and type are not kept (AsRecorded), and the bytes must be
		// an age file: checked before anything is stored.
		var err error
		if body, err = app.CheckAgeUpload(body); err != nil {
			return app.File{}, err
		}
	} else if err := app.ValidateFilename(up.Filename); err != nil {
		return app.File{}, err
	}
	fileID, err := uuid.NewV7()
	if err != nil {
		return app.File{}, err
	}
	f := app.File{
		ID:          fileID,
		PackageID:   p.ID,
		Filename:    up.Filename,
		ContentType: app.NormalizeContentType(up.ContentType),
		ObjectKey:   objectKey(p.ID, fileID),
		UploadedBy:  by,
		Scan:        app.ScanPending, // the column's default: the scanner records the verdict
		Manifest:    manifest,
	}
	if p.Encrypted() {
		f.Filename, f.ContentType = "", "application/octet-stream" // named when recorded
	}
	if by == app.ByRecipient {
		f.RecipientID = audit.RecipientID // the link it comes through
	}

	h := sha256.New()
	limited := &limitedReader{r: io.TeeReader(body, h), left: s.limits.MaxFileSize}
	body = limited
	release, err := s.HoldObjectKey(ctx, f.ObjectKey)
	if err != nil {
		return app.File{}, err
	}
	m, err := s.meter(ctx, p, f.ObjectKey)
	if err != nil {
		release()
		return app.File{}, err
	}
	var metered *meteredReader
	if m != nil {
		metered = &meteredReader{ctx: ctx, r: body, m: m}
		body = metered
	}
	size, err := s.objects.Put(ctx, f.ObjectKey, body, f.ContentType)
	release()
	// A step the meter was reserving ahead ends before the file's commit gives the hold back.
	m.Settle()
	if metered != nil && metered.err != nil {
		// Refused by the owner's policy: nothing of it is kept, its bytes go back.
		m.Release(ctx)
		if rmErr := s.discardObject(ctx, f.ObjectKey); rmErr != nil {
			return app.File{}, errors.Join(metered.err, rmErr)
		}
		return app.File{}, metered.err
	}
	bodyFailed := limited.over || limited.readErr != nil
	switch {
	case err == nil && bodyFailed:
		// The store may take a short read for the end of the stream (minio-go treats
		// io.ErrUnexpectedEOF so); the body's own failure decides.
		err = errors.Join(errBodyFailed, s.discardObject(ctx, f.ObjectKey))
	case err != nil && !bodyFailed:
		s.storeFailed(ctx, f.ObjectKey)
	}
	if err != nil {
		m.Release(ctx)
		if limited.over {
			return app.File{}, &app.Error{Kind: app.KindTooLarge, Detail: fmt.Sprintf("file is larger than the limit of %d bytes", s.limits.MaxFileSize)}
		}
		if limited.readErr != nil {
			return app.File{}, &app.Error{Kind: app.KindBadRequest, Detail: "the upload broke off or is malformed: " + limited.readErr.Error()}
		}
		var ae *app.Error
		if errors.As(err, &ae) {
			return app.File{}, err
		}
		return app.File{}, fmt.Errorf("store object: %w", err)
	}
	f.Size = size
	f.SHA256 = fmt.Sprintf("%x", h.Sum(nil))
	f.CreatedAt = s.now().UTC().Truncate(time.Microsecond)

	recorded, err := s.recordFile(ctx, f, op, audit, s.store.AddFile)
	if err != nil {
		// The row was not written: the object must not stay behind.
		m.Release(ctx)
		if rmErr := s.discardObject(ctx, f.ObjectKey); rmErr != nil {
			err = errors.Join(err, rmErr)
		}
		return app.File{}, err
	}
	// The file's commit gave its reservation back (the object key's, ON DELETE CASCADE).
	if m != nil {
		s.policies.Committed(ctx, p.OwnerUserID)
	}
	return recorded, nil
}

// addFileFunc records a stored file in its package's transaction (Store.AddFile,
// or a store that also marks a resumable upload complete in it).
type addFileFunc func(ctx context.Context, f app.File, change func(p *app.Package) (app.Effects, error)) (app.Package, error)

// recordFile is the commit of every upload, multipart or resumable: in the package's
// transaction it checks the state and the file count again, counts the file and writes
// its audit entry and package.file_uploaded event; with object lock, a held package's
// new object gets S3's legal hold there (holdObject).
// The file as recorded (AsRecorded: an encrypted package's neutral name) is returned.
func (s *Packages) recordFile(ctx context.Context, f app.File, op app.Op, audit app.AuditEntry, add addFileFunc) (app.File, error) {
	audit.FileID = &f.ID
	if f.UploadedBy == app.ByRecipient && f.RecipientID == nil {
		f.RecipientID = audit.RecipientID // the link it came through
	}
	recorded := f
	_, err := add(ctx, f, func(p *app.Package) (app.Effects, error) {
		if err := p.Apply(op, s.now()); err != nil {
			return app.Effects{}, err
		}
		if p.FileCount >= s.limits.MaxFiles {
			return app.Effects{}, app.Conflict("package already has the maximum of %d files", s.limits.MaxFiles)
		}
		p.FileCount++
		p.FileSeq++
		p.TotalSize += f.Size
		recorded = app.AsRecorded(f, *p)
		if err := s.holdObject(ctx, p, f.ObjectKey); err != nil {
			return app.Effects{}, err
		}
		return app.Effects{Events: []*eventsv1.Envelope{fileUploaded(*p, recorded)}, Audit: []app.AuditEntry{audit}}, nil
	})
	if err != nil {
		return app.File{}, err
	}
	return recorded, nil
}

// OpenFile opens a file of a package the user may see, for the owner's download.
func (s *Packages) OpenFile(ctx context.Context, u app.User, id, fileID uuid.UUID) (app.File, app.Object, error) {
	p, err := s.visible(ctx, u, id)
	if err != nil {
		return app.File{}, nil, err
	}
	if err := p.Apply(app.OpOwnerDownload, s.now()); err != nil {
		return app.File{}, nil, err
	}
	return s.open(ctx, id, fileID)
}

func (s *Packages) open(ctx context.Context, id, fileID uuid.UUID) (app.File, app.Object, error) {
	f, err := s.store.GetFile(ctx, id, fileID, nil)
	if err != nil {
		return app.File{}, nil, err
	}
	if f.Scan == app.ScanInfected {
		return app.File{}, nil, app.ErrInfectedRemoved
	}
	if err := app.OwnerScanAllows(s.scan, f); err != nil {
		return app.File{}, nil, err
	}
	obj, err := s.objects.Open(ctx, f.ObjectKey)
	if err != nil {
		return app.File{}, nil, err
	}
	return f, obj, nil
}

// RemoveFile removes a file from a draft package.
func (s *Packages) RemoveFile(ctx context.Context, u app.User, client app.Client, id, fileID uuid.UUID) error {
	if _, err := s.visible(ctx, u, id); err != nil {
		return err
	}
	var keys []string
	err := s.store.RemoveFile(ctx, id, fileID, func(p *app.Package, f app.File) (app.Effects, error) {
		if err := p.Apply(app.OpRemoveFile, s.now()); err != nil {
			return app.Effects{}, err
		}
		p.FileCount--
		p.TotalSize -= f.Size
		keys = append(keys, f.ObjectKey)
		if f.PreviewKey != "" {
			keys = append(keys, f.PreviewKey)
		}
		return app.Effects{Audit: []app.AuditEntry{app.UserAudit(u, client, "file.remove", id, &fileID)}}, nil
	})
	if err != nil {
		return err
	}
	s.removeObjects(ctx, keys)
	return nil
}

func objectKey(packageID, fileID uuid.UUID) string {
	return "packages/" + packageID.String() + "/" + fileID.String()
}

// limitedReader fails once more than left bytes have been read, and remembers that it
// did, so the caller can tell "too large" from other failures.
type limitedReader struct {
	r       io.Reader
	left    int64
	over    bool
	readErr error // a failure of the body itself, not of storage
}

// errBodyFailed marks an upload whose body failed after the store accepted it.
var errBodyFailed = errors.New("upload body failed")

// ErrTooLarge is the read error of a body over its limit.
var ErrTooLarge = &app.Error{Kind: app.KindTooLarge, Detail: "file too large"}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		l.over = true
		return 0, ErrTooLarge
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	if err != nil && err != io.EOF {
		l.readErr = err
	}
	l.left -= int64(n)
	if l.left < 0 {
		l.over = true
		return n, ErrTooLarge
	}
	return n, err
}
