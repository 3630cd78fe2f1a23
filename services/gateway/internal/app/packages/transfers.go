package packages

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// What the domains built on the package service (app/transfers: resumable tus uploads;
// app/links: what a magic link opens) need of it: the same checks, clock, limits, file
// recording and audit entries that its own routes use.

// AddFileFunc records a stored file in its package's transaction (see RecordFile).
type AddFileFunc = addFileFunc

// UseUploads hooks the resumable uploads into the package service: end ends a package's
// unfinished uploads (on revoke and delete), open counts them (toward its file limit).
func (s *Packages) UseUploads(end func(ctx context.Context, packageID uuid.UUID), open func(ctx context.Context, packageID uuid.UUID) (int, error)) {
	s.endUploads, s.openUploads = end, open
}

// Visible returns the package u may see, as the owner's routes do.
func (s *Packages) Visible(ctx context.Context, u app.User, id uuid.UUID) (app.Package, error) {
	return s.visible(ctx, u, id)
}

// Limits returns the package service's limits.
func (s *Packages) Limits() app.Limits { return s.limits }

// Now is the package service's clock.
func (s *Packages) Now() time.Time { return s.now() }

// RecordFile records a stored file with add in its package's transaction, which applies
// op to the package again and writes the audit entry and the events.
// It returns the file as recorded (AsRecorded).
func (s *Packages) RecordFile(ctx context.Context, f app.File, op app.Op, audit app.AuditEntry, add AddFileFunc) (app.File, error) {
	return s.recordFile(ctx, f, op, audit, add)
}

// RenewEvery calls renew every interval until the returned stop is called (see renewEvery).
func RenewEvery(ctx context.Context, interval time.Duration, renew func(context.Context)) (stop func()) {
	return renewEvery(ctx, interval, renew)
}

// StoreUpload streams an upload into p as by: the checks, the object and the file's row
// of every multipart upload, the owner's and the recipient's.
func (s *Packages) StoreUpload(ctx context.Context, p app.Package, up app.Upload, by app.Uploader, op app.Op, audit app.AuditEntry) (app.File, error) {
	return s.upload(ctx, p, up, by, op, audit)
}

// Objects returns the object store of the package service.
func (s *Packages) Objects() app.ObjectStore { return s.objects }

// Hasher returns what hashes and checks link passwords (UseHasher).
func (s *Packages) Hasher() app.PasswordHasher { return s.hasher }

// PackageDownloaded is the package.downloaded event of a download through p's link.
func PackageDownloaded(p app.Package, fileID, filename string) *eventsv1.Envelope {
	return packageDownloaded(p, fileID, filename)
}
