package packages

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
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

// Create validates and stores a draft package, with its package.created event.
func (s *Packages) Create(ctx context.Context, owner app.User, client app.Client, in NewPackage) (app.Package, error) {
	p := newDraft(owner.ID)
	if errs := in.fill(&p, false); len(errs) > 0 {
		return app.Package{}, errs[0]
	}
	var err error
	if p.Encrypted() && p.Direction == app.Inbound {
		if p.OwnerPublicKey, err = s.requestKey(ctx, owner); err != nil {
			return app.Package{}, err
		}
	}
	if in.Password != nil {
		if err := ValidateLinkPassword(*in.Password); err != nil {
			return app.Package{}, err
		}
		if p.PasswordHash, err = s.hasher.Hash(ctx, *in.Password); err != nil {
			return app.Package{}, err
		}
	}
	p.ID, err = uuid.NewV7()
	if err != nil {
		return app.Package{}, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	p.CreatedAt = now
	p.ExpiresAt = now.Add(time.Duration(p.TTLDays) * 24 * time.Hour)
	recipients, err := withIDs(p.Recipients, now)
	if err != nil {
		return app.Package{}, err
	}
	p.SetRecipients(recipients)
	unlock, err := s.checkNew(ctx, p)
	if err != nil {
		return app.Package{}, err
	}
	defer unlock()
	fx := app.Effects{
		Events: []*eventsv1.Envelope{packageCreated(p)},
		Audit:  []app.AuditEntry{app.UserAudit(owner, client, "package.create", p.ID, nil)},
	}
	if err := s.store.CreatePackage(ctx, p, fx); err != nil {
		return app.Package{}, err
	}
	return p, nil
}

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

// Finalize seals a draft, mints one magic link per recipient and queues each their
// e-mail. It returns the package and the links (the first recipient's first), which
// are never available again.
func (s *Packages) Finalize(ctx context.Context, u app.User, client app.Client, id uuid.UUID) (app.Package, []app.LinkMint, error) {
	current, err := s.visible(ctx, u, id)
	if err != nil {
		return app.Package{}, nil, err
	}
	// The owner is read before the package's transaction: a read through the store
	// inside it would need a second pool connection while holding the first, and
	// enough concurrent finalizes would then wait on each other for good.
	owner, err := s.store.GetUser(ctx, current.OwnerUserID)
	if err != nil {
		return app.Package{}, nil, err
	}
	// Tokens for as many recipients as the package may have by the time its row is
	// locked (a draft's recipients may change until then).
	type minted struct {
		token string
		hash  []byte
	}
	var tokens []minted
	mint := func(n int) error {
		for len(tokens) < n {
			token, hash, err := newLinkToken()
			if err != nil {
				return err
			}
			tokens = append(tokens, minted{token, hash})
		}
		return nil
	}
	if err := mint(max(len(current.Recipients), 1)); err != nil {
		return app.Package{}, nil, err
	}
	terms, err := s.termsCheck(ctx, current.OwnerUserID)
	if err != nil {
		return app.Package{}, nil, err
	}
	var links []app.LinkMint
	p, err := s.store.ChangePackage(ctx, id, func(p *app.Package) (app.Effects, error) {
		if err := p.Apply(app.OpFinalize, s.now()); err != nil {
			return app.Effects{}, err
		}
		if terms != nil {
			if err := terms(*p, false); err != nil {
				return app.Effects{}, err
			}
		}
		if p.Direction == app.Outbound && p.FileCount == 0 {
			return app.Effects{}, app.Conflict("package has no files")
		}
		if err := mint(len(p.Recipients)); err != nil {
			return app.Effects{}, err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		p.FinalizedAt = &now
		p.ExpiresAt = now.Add(time.Duration(p.TTLDays) * 24 * time.Hour)
		fx := app.Effects{
			Events: []*eventsv1.Envelope{packageFinalized(*p)},
			Audit:  []app.AuditEntry{app.UserAudit(u, client, "package.finalize", id, nil)},
		}
		links = links[:0]
		for i := range p.Recipients {
			r := &p.Recipients[i]
			r.LinkHash, r.LinkState = tokens[i].hash, app.LinkActive
			link := s.publicURL + "/p/" + tokens[i].token
			links = append(links, app.LinkMint{RecipientID: r.ID, Email: r.Email, MagicLink: link})
			fx.Mail = append(fx.Mail, mailJob(*p, *r, owner, link))
		}
		return fx, nil
	})
	if err != nil {
		return app.Package{}, nil, err
	}
	return p, links, nil
}

// Revoke kills the active link of a package at once.
func (s *Packages) Revoke(ctx context.Context, u app.User, client app.Client, id uuid.UUID) (app.Package, error) {
	if _, err := s.visible(ctx, u, id); err != nil {
		return app.Package{}, err
	}
	p, err := s.store.ChangePackage(ctx, id, func(p *app.Package) (app.Effects, error) {
		if err := p.Apply(app.OpRevoke, s.now()); err != nil {
			return app.Effects{}, err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		p.RevokedAt = &now
		for i := range p.Recipients {
			if r := &p.Recipients[i]; r.LinkState == app.LinkActive {
				r.LinkState, r.RevokedAt = app.LinkRevoked, &now
			}
		}
		return app.Effects{
			Events: []*eventsv1.Envelope{packageRevoked(*p, u.ID)},
			Audit:  []app.AuditEntry{app.UserAudit(u, client, "package.revoke", id, nil)},
		}, nil
	})
	if err == nil && s.endUploads != nil {
		s.endUploads(ctx, id)
	}
	return p, err
}

// Delete removes a package, its files and their objects for good.
func (s *Packages) Delete(ctx context.Context, u app.User, client app.Client, id uuid.UUID) error {
	if _, err := s.visible(ctx, u, id); err != nil {
		return err
	}
	keys, err := s.store.DeletePackage(ctx, id, func(p *app.Package) (app.Effects, error) {
		return app.Effects{
			Events: []*eventsv1.Envelope{packageDeleted(*p, u.ID)},
			Audit:  []app.AuditEntry{app.UserAudit(u, client, "package.delete", id, nil)},
		}, nil
	})
	if err != nil {
		return err
	}
	s.removeObjects(ctx, keys)
	if s.endUploads != nil {
		s.endUploads(ctx, id)
	}
	return nil
}

// removeObjects deletes objects whose rows are gone. Their keys were queued in the
// same transaction, so one that fails here stays queued for a later sweep.
func (s *Packages) removeObjects(ctx context.Context, keys []string) {
	ctx = context.WithoutCancel(ctx)
	var done []string
	for _, k := range keys {
		if err := s.objects.Remove(ctx, k); err == nil {
			done = append(done, k)
		}
	}
	if len(done) > 0 {
		_ = s.store.ObjectsDeleted(ctx, done)
	}
}

// SweepDeletedObjects removes objects still queued for deletion, after a failure
// between a row's deletion and its object's.
func (s *Packages) SweepDeletedObjects(ctx context.Context, keys []string) {
	s.removeObjects(ctx, keys)
}

// Audit returns a page of the audit log (admins only; checked by the transport).
func (s *Packages) Audit(ctx context.Context, f app.AuditFilter) ([]app.AuditEntry, error) {
	return s.store.ListAudit(ctx, f)
}

func objectKey(packageID, fileID uuid.UUID) string {
	return "packages/" + packageID.String() + "/" + fileID.String()
}

func newLinkToken() (token string, hash []byte, err error) {
	b := make([]byte, linkTokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	token = base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(token))
	return token, sum[:], nil
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

// UseScanMode sets the scanning mode the link routes and the owner's download follow
// (default off). Call it before the service is used.
func (s *Packages) UseScanMode(m app.ScanMode) { s.scan = m }

// scanAllows is the one check of the link's download routes (a file, the archive):
// nil when f may be served through the link under the service's scanning mode.
func (s *Packages) scanAllows(f app.File) error { return app.ScanAllows(s.scan, f) }

// ScanOmitted lists the files of package id that the archive of its link leaves out
// because of the scan (pending, or unscannable or failed and not released, in block
// mode; infected in any mode), with why, so the archive can say so. Files uploaded
// through the link are not listed (they are never in it).
func (s *Packages) ScanOmitted(ctx context.Context, id uuid.UUID) ([]string, error) {
	files, err := s.store.ListFiles(ctx, id, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		if !app.LinkMayDownload(f) {
			continue
		}
		switch err := s.scanAllows(f); {
		case err == nil:
		case f.Scan == app.ScanInfected:
			out = append(out, f.Filename+" (malware found)")
		case f.Scan == app.ScanPending:
			out = append(out, f.Filename+" (being checked for malware)")
		default:
			out = append(out, f.Filename+" (could not be checked for malware)")
		}
	}
	return out, nil
}

// LinkScanCheck is scanAllows for the recipient's page: nil when the link serves f now,
// else why not (ErrInfected, or a *app.ScanHeldError naming the file's state).
func (s *Packages) LinkScanCheck(f app.File) error { return s.scanAllows(f) }

// linkTokenBytes is the size of a magic link's random token.
const linkTokenBytes = 32
