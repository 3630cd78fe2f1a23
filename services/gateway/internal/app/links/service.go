// Package links is the recipient's side of packages: what a magic link opens (the
// package's page, downloads, the archive, uploads to an inbound package), the grants of
// a password-protected link and the throttle of its unlock, and the per-IP rate of the
// anonymous routes (LinkRate). It is built on the package service (app/packages.Packages), whose
// checks, clock, scan mode and upload pipeline it shares.
package links

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// Store is the persistence the link routes need.
type Store interface {
	// PackageByLink returns the package with the link that hashes to hash, with Link
	// and LinkHash set to that link's.
	PackageByLink(ctx context.Context, hash []byte) (app.Package, error)
	// RecordLinkUse counts a use of the link that hashes to linkHash and writes fx.
	RecordLinkUse(ctx context.Context, linkHash []byte, fx app.Effects) error
	WriteEffects(ctx context.Context, fx app.Effects) error
	// TakeLinkBytes takes costs[i] from the budget of fileIDs[i] through the link
	// linkHash (docs/API.md, "Download limit") where it is not spent and holds that much, in
	// one conditional UPDATE, and returns the files taken; with counted, each of them
	// counts a download. Without a limit nothing is refused, but the bytes are still
	// recorded (a limit set later counts them).
	TakeLinkBytes(ctx context.Context, packageID uuid.UUID, linkHash []byte, fileIDs []uuid.UUID, costs []int64, counted bool) ([]uuid.UUID, error)
	// ReturnLinkBytes gives amounts[i] back to the budget of fileIDs[i].
	ReturnLinkBytes(ctx context.Context, linkHash []byte, fileIDs []uuid.UUID, amounts []int64) error
	// AddUnlockAttempt records an unlock attempt of the package's link (as a failure,
	// until DeleteUnlockAttempt) and returns its id, its time and the times of the
	// link's failures recorded before it within window, newest first. Attempts of one
	// link are serialised across gateways, and every time is the database's: one
	// clock for all gateways, whatever their own clocks say.
	AddUnlockAttempt(ctx context.Context, packageID, recipientID uuid.UUID, window time.Duration) (int64, time.Time, []time.Time, error)
	DeleteUnlockAttempt(ctx context.Context, id int64) error
}

// Files reads a package's files as a link sees them: with what the link that hashes
// to linkHash has taken of their budgets and its downloads of them. The package
// domain's store answers it, whose same statements (linkHash nil) read the owner's view.
type Files interface {
	ListFiles(ctx context.Context, packageID uuid.UUID, linkHash []byte) ([]app.File, error)
	GetFile(ctx context.Context, packageID, fileID uuid.UUID, linkHash []byte) (app.File, error)
}

// Links is the link routes' service.
type Links struct {
	p       *packages.Packages
	store   Store
	files   Files
	objects app.ObjectStore
}

// New returns the link service on the package service p, its store and the files
// read through the package store.
func New(p *packages.Packages, store Store, files Files) *Links {
	return &Links{p: p, store: store, files: files, objects: p.Objects()}
}

// now is the package service's clock.
func (s *Links) now() time.Time { return s.p.Now() }

// scanAllows says whether the package service's scan mode lets f out through a link.
func (s *Links) scanAllows(f app.File) error { return s.p.LinkScanCheck(f) }

// ResolveLink checks a link token and returns the package read through it (ErrLinkGone,
// or ErrLinkLocked without a valid grant of a protected link).
func (s *Links) ResolveLink(ctx context.Context, token string, client app.Client) (app.Package, error) {
	return s.resolveLink(ctx, token, client)
}

// RecordLinkUse counts a use of the link that hashes to linkHash and writes fx.
func (s *Links) RecordLinkUse(ctx context.Context, linkHash []byte, fx app.Effects) error {
	return s.store.RecordLinkUse(ctx, linkHash, fx)
}
