// Package packages is the gateway's package domain: drafts, their files, finalizing,
// links, revoking and deleting, on the Store it declares. This file holds the service
// (Packages, NewPackages), its Store and its reads; the rest is split by what it does:
//
//   - lifecycle.go: creating, finalizing, revoking and deleting a package
//   - files.go: uploading (the commit every upload shares), opening and removing a file
//   - package_edit.go, fields.go: editing a draft; a package's field rules
//   - recipients.go: the recipients, adding and revoking one
//   - protection.go: link passwords, download limits, a new expiry
//   - encryption.go: encrypted packages' manifests and the users' keys
//   - scan.go, release.go: the malware scan mode; releasing a file the scanner could not judge
//   - preview.go: image previews
//   - policy.go, hold.go: the owners' policies; S3 object lock for held packages
//   - reservations.go: object key reservations of uploads in progress
//   - transfers.go: what app/transfers and app/links use of the service
//   - events.go: the events and mail jobs the service writes
package packages

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Store is the persistence the package service needs. Every method that
// changes a package locks its row, runs the given change (which applies the state
// table and names the effects), saves the package and writes the effects in one
// transaction; an error from the change rolls everything back.
type Store interface {
	// The encrypted packages' manifests and the users' keys.
	app.EncryptionStore
	CreatePackage(ctx context.Context, p app.Package, fx app.Effects) error
	GetPackage(ctx context.Context, id uuid.UUID) (app.Package, error)
	ListPackages(ctx context.Context, f app.PackageFilter) ([]app.Package, error)
	// ListFiles and GetFile read files with what the link that hashes to linkHash has
	// taken of their budgets and its downloads of them (nil: the owner's view, with
	// every link's downloads).
	ListFiles(ctx context.Context, packageID uuid.UUID, linkHash []byte) ([]app.File, error)
	GetFile(ctx context.Context, packageID, fileID uuid.UUID, linkHash []byte) (app.File, error)
	ChangePackage(ctx context.Context, id uuid.UUID, change func(p *app.Package) (app.Effects, error)) (app.Package, error)
	AddFile(ctx context.Context, f app.File, change func(p *app.Package) (app.Effects, error)) (app.Package, error)
	RemoveFile(ctx context.Context, packageID, fileID uuid.UUID, change func(p *app.Package, f app.File) (app.Effects, error)) error
	// ReleaseFile records that user released a file the scanner could not judge, once
	// check accepts the file (a file released already is returned as it is, check not
	// called), and writes check's effects, in the package's transaction.
	ReleaseFile(ctx context.Context, packageID, fileID uuid.UUID, user int64, check func(p *app.Package, f app.File) (app.Effects, error)) (app.File, error)
	DeletePackage(ctx context.Context, id uuid.UUID, change func(p *app.Package) (app.Effects, error)) (objectKeys []string, err error)
	WriteEffects(ctx context.Context, fx app.Effects) error
	ListAudit(ctx context.Context, f app.AuditFilter) ([]app.AuditEntry, error)
	ObjectsDeleted(ctx context.Context, keys []string) error
	GetUser(ctx context.Context, id int64) (app.User, error)
	// ReserveObjectKey records (or renews) an object key before its bytes are stored;
	// AddFile ends the reservation. A reservation older than SHIPFILE_ORPHAN_GRACE
	// without a file row is an orphan the expiry service removes.
	ReserveObjectKey(ctx context.Context, key string) error
	// QueueObjectDeletion queues key in object_deletions, whose objects the expiry
	// service removes at its next pass.
	QueueObjectDeletion(ctx context.Context, key string) error
}

// Packages is the package service: drafts, files, finalizing, links, revoking, deleting.
type Packages struct {
	store     Store
	objects   app.ObjectStore
	limits    app.Limits
	publicURL string
	now       func() time.Time
	hasher    app.PasswordHasher
	// scan is the malware scanning mode the link routes and the owner's download
	// follow (UseScanMode; app/scan.go).
	scan app.ScanMode
	// reservationRenewal is ObjectReservationRenewal (shorter in tests).
	reservationRenewal time.Duration
	// endUploads ends a package's unfinished resumable uploads (set by transfers.NewResumable).
	endUploads func(ctx context.Context, packageID uuid.UUID)
	// openUploads counts a package's unfinished resumable uploads (set by
	// transfers.NewResumable); they count toward its file limit.
	openUploads func(ctx context.Context, packageID uuid.UUID) (int, error)
	// policies is the owners' policies (WithPolicies; nil: none apply), meterStep the
	// least bytes an upload reserves at a time.
	policies  Policies
	meterStep int64
	// locker holds the objects of files recorded in held packages (WithObjectLock;
	// nil: no S3 object lock).
	locker ObjectLocker
}

// NewPackages returns the package service.
func NewPackages(store Store, objects app.ObjectStore, limits app.Limits, publicURL string, opts ...Option) *Packages {
	s := &Packages{store: store, objects: objects, limits: limits, publicURL: strings.TrimRight(publicURL, "/"), now: time.Now,
		hasher: app.DirectHasher{}, reservationRenewal: ObjectReservationRenewal}
	for _, o := range opts {
		o(s)
	}
	return s
}

// UseClock makes the package service read the time from now instead of time.Now (a
// test's gateway whose clock is off, say). Call it before the service is used.
func (s *Packages) UseClock(now func() time.Time) { s.now = now }

// Get returns a package the user may see, with its files.
func (s *Packages) Get(ctx context.Context, u app.User, id uuid.UUID) (app.Package, []app.File, error) {
	p, err := s.visible(ctx, u, id)
	if err != nil {
		return app.Package{}, nil, err
	}
	// With one recipient the owner sees the files through that link: its counts, and
	// what the link has taken of each budget.
	var through []byte
	if len(p.Recipients) == 1 {
		through = p.Recipients[0].LinkHash
	}
	files, err := s.store.ListFiles(ctx, id, through)
	return p, files, err
}

// List returns a page of the packages the user may see, newest first.
func (s *Packages) List(ctx context.Context, u app.User, f app.PackageFilter) ([]app.Package, error) {
	if !u.IsAdmin() {
		f.OwnerUserID = &u.ID
	}
	return s.store.ListPackages(ctx, f)
}

// Audit returns a page of the audit log (admins only; checked by the transport).
func (s *Packages) Audit(ctx context.Context, f app.AuditFilter) ([]app.AuditEntry, error) {
	return s.store.ListAudit(ctx, f)
}

// visible loads a package and checks that the user owns it or is an admin.
func (s *Packages) visible(ctx context.Context, u app.User, id uuid.UUID) (app.Package, error) {
	p, err := s.store.GetPackage(ctx, id)
	if err != nil {
		return app.Package{}, err
	}
	if err := mayManage(u, p); err != nil {
		return app.Package{}, err
	}
	return p, nil
}

func mayManage(u app.User, p app.Package) error {
	if p.OwnerUserID != u.ID && !u.IsAdmin() {
		return app.Forbidden("this package belongs to another user")
	}
	return nil
}
