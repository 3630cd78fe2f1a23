package app

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// What the transfers domain (app/transfers: resumable tus uploads) needs of the package
// service: the same checks, clock, limits and file recording that a plain upload uses.

// AddFileFunc records a stored file in its package's transaction (see RecordFile).
type AddFileFunc = addFileFunc

// UseUploads hooks the resumable uploads into the package service: end ends a package's
// unfinished uploads (on revoke and delete), open counts them (toward its file limit).
func (s *Packages) UseUploads(end func(ctx context.Context, packageID uuid.UUID), open func(ctx context.Context, packageID uuid.UUID) (int, error)) {
	s.endUploads, s.openUploads = end, open
}

// Visible returns the package u may see, as the owner's routes do.
func (s *Packages) Visible(ctx context.Context, u User, id uuid.UUID) (Package, error) {
	return s.visible(ctx, u, id)
}

// ResolveLink checks a link token and returns the package read through it.
func (s *Packages) ResolveLink(ctx context.Context, token string, client Client) (Package, error) {
	return s.resolveLink(ctx, token, client)
}

// Limits returns the package service's limits.
func (s *Packages) Limits() Limits { return s.limits }

// Now is the package service's clock.
func (s *Packages) Now() time.Time { return s.now() }

// RecordFile records a stored file with add in its package's transaction, which applies
// op to the package again and writes the audit entry and the events.
// It returns the file as recorded (AsRecorded).
func (s *Packages) RecordFile(ctx context.Context, f File, op Op, audit AuditEntry, add AddFileFunc) (File, error) {
	return s.recordFile(ctx, f, op, audit, add)
}

// RecordLinkUse counts a use of the link that hashes to linkHash and writes fx.
func (s *Packages) RecordLinkUse(ctx context.Context, linkHash []byte, fx Effects) error {
	return s.store.RecordLinkUse(ctx, linkHash, fx)
}

// Apply moves the package by op at now (the state table), or says why it may not.
func (p *Package) Apply(op Op, now time.Time) error { return p.apply(op, now) }

// LinkAudit is the audit entry of an action through the package's link.
func (p Package) LinkAudit(c Client, action string, file *uuid.UUID) AuditEntry {
	return p.linkAudit(c, action, file)
}

// UserAudit is the audit entry of a signed-in user's action on a package.
func UserAudit(u User, c Client, action string, pkg uuid.UUID, file *uuid.UUID) AuditEntry {
	return userAudit(u, c, action, pkg, file)
}

// RenewEvery calls renew every interval until the returned stop is called (see renewEvery).
func RenewEvery(ctx context.Context, interval time.Duration, renew func(context.Context)) (stop func()) {
	return renewEvery(ctx, interval, renew)
}
