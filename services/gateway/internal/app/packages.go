package app

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// Effects are what a change writes beside it, in the same database transaction: the
// events for the bus, mail jobs for the mailer, delivery jobs for the webhook
// dispatcher and audit entries.
type Effects struct {
	Events      []*eventsv1.Envelope
	Mail        []*eventsv1.MailJob
	WebhookJobs []WebhookJob
	Audit       []AuditEntry
}

// PackageStore is the persistence the package service needs. Every method that
// changes a package locks its row, runs the given change (which applies the state
// table and names the effects), saves the package and writes the effects in one
// transaction; an error from the change rolls everything back.
type PackageStore interface {
	CreatePackage(ctx context.Context, p Package, fx Effects) error
	GetPackage(ctx context.Context, id uuid.UUID) (Package, error)
	ListPackages(ctx context.Context, f PackageFilter) ([]Package, error)
	// ListFiles and GetFile read files with what the link that hashes to linkHash has
	// taken of their budgets and its downloads of them (nil: the owner's view, with
	// every link's downloads).
	ListFiles(ctx context.Context, packageID uuid.UUID, linkHash []byte) ([]File, error)
	GetFile(ctx context.Context, packageID, fileID uuid.UUID, linkHash []byte) (File, error)
	ChangePackage(ctx context.Context, id uuid.UUID, change func(p *Package) (Effects, error)) (Package, error)
	AddFile(ctx context.Context, f File, change func(p *Package) (Effects, error)) (Package, error)
	RemoveFile(ctx context.Context, packageID, fileID uuid.UUID, change func(p *Package, f File) (Effects, error)) error
	DeletePackage(ctx context.Context, id uuid.UUID, change func(p *Package) (Effects, error)) (objectKeys []string, err error)
	// PackageByLink returns the package with the link that hashes to hash, with Link
	// and LinkHash set to that link's.
	PackageByLink(ctx context.Context, hash []byte) (Package, error)
	// RecordLinkUse counts a use of the link that hashes to linkHash and writes fx.
	RecordLinkUse(ctx context.Context, linkHash []byte, fx Effects) error
	WriteEffects(ctx context.Context, fx Effects) error
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
	ObjectsDeleted(ctx context.Context, keys []string) error
	GetUser(ctx context.Context, id int64) (User, error)
	// TakeLinkBytes takes costs[i] from the budget of fileIDs[i] through the link
	// linkHash (SPEC "Download limit") where it is not spent and holds that much, in
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
	// ReserveObjectKey records (or renews) an object key before its bytes are stored;
	// AddFile ends the reservation. A reservation older than SHIPFILE_ORPHAN_GRACE
	// without a file row is an orphan the expiry service removes.
	ReserveObjectKey(ctx context.Context, key string) error
}

// Object is a stored file's bytes, seekable for ranges.
type Object interface {
	io.ReadSeekCloser
}

// ObjectStore keeps file bytes.
type ObjectStore interface {
	// Put streams r to key and returns the number of bytes stored. On error nothing
	// remains under key.
	Put(ctx context.Context, key string, r io.Reader, contentType string) (int64, error)
	Open(ctx context.Context, key string) (Object, error)
	Remove(ctx context.Context, key string) error
}

// Limits bound packages and uploads.
type Limits struct {
	MaxFileSize int64 // bytes per file
	MaxFiles    int   // files per package
}

// Packages is the package service: drafts, files, finalizing, links, revoking, deleting.
type Packages struct {
	store     PackageStore
	objects   ObjectStore
	limits    Limits
	publicURL string
	now       func() time.Time
	hasher    PasswordHasher
	// scan is the malware scanning mode the link routes follow (UseScanMode; scan.go).
	scan ScanMode
	// reservationRenewal is ObjectReservationRenewal (shorter in tests).
	reservationRenewal time.Duration
	// endUploads ends a package's unfinished resumable uploads (set by transfers.NewResumable).
	endUploads func(ctx context.Context, packageID uuid.UUID)
	// openUploads counts a package's unfinished resumable uploads (set by
	// transfers.NewResumable); they count toward its file limit.
	openUploads func(ctx context.Context, packageID uuid.UUID) (int, error)
}

// NewPackages returns the package service.
func NewPackages(store PackageStore, objects ObjectStore, limits Limits, publicURL string) *Packages {
	return &Packages{store: store, objects: objects, limits: limits, publicURL: strings.TrimRight(publicURL, "/"), now: time.Now,
		hasher: argon2idHasher{}, reservationRenewal: ObjectReservationRenewal}
}

// UseClock makes the package service read the time from now instead of time.Now (a
// test's gateway whose clock is off, say). Call it before the service is used.
func (s *Packages) UseClock(now func() time.Time) { s.now = now }

// Field limits of a package.
const (
	MaxTitleLen     = 200
	MaxNoteLen      = 2000
	MaxRecipientLen = 200
	MinTTLDays      = 1
	MaxTTLDays      = 90
	DefaultTTLDays  = 7
	MaxFilenameLen  = 255
	linkTokenBytes  = 32
)

// NewPackage is the input of Create. Nil fields take their defaults.
type NewPackage struct {
	Title          *string
	RecipientEmail *string
	RecipientName  *string
	Recipients     *[]RecipientInput // nil: the one recipient of RecipientEmail
	Direction      *string
	TTLDays        *int
	Note           *string
	Password       *string // the link's password; nil: none
	MaxDownloads   *int    // nil: no limit
	NotifyOwner    *bool   // default true
	Encryption     *string // none (default) or age
}

// Create validates and stores a draft package, with its package.created event.
func (s *Packages) Create(ctx context.Context, owner User, client Client, in NewPackage) (Package, error) {
	p := Package{
		OwnerUserID: owner.ID,
		Direction:   Outbound,
		State:       StateDraft,
		TTLDays:     DefaultTTLDays,
	}
	if in.Title == nil {
		return Package{}, Invalid("title is required")
	}
	p.Title = *in.Title
	if err := ValidateTitle(p.Title); err != nil {
		return Package{}, err
	}
	if in.RecipientEmail == nil && in.Recipients == nil {
		return Package{}, Invalid("recipient_email is required")
	}
	recipients, err := ResolveRecipients(in.Recipients, in.RecipientEmail, in.RecipientName)
	if err != nil {
		return Package{}, err
	}
	if in.Direction != nil {
		p.Direction = Direction(*in.Direction)
		if p.Direction != Outbound && p.Direction != Inbound {
			return Package{}, Invalid("direction must be outbound or inbound")
		}
	}
	if in.TTLDays != nil {
		p.TTLDays = *in.TTLDays
		if p.TTLDays < MinTTLDays || p.TTLDays > MaxTTLDays {
			return Package{}, Invalid("ttl_days must be between %d and %d", MinTTLDays, MaxTTLDays)
		}
	}
	if in.Note != nil {
		p.Note = *in.Note
		if err := ValidateNote(p.Note); err != nil {
			return Package{}, err
		}
	}
	if err := ValidateMaxDownloads(in.MaxDownloads); err != nil {
		return Package{}, err
	}
	p.MaxDownloads = in.MaxDownloads
	p.NotifyOwner = in.NotifyOwner == nil || *in.NotifyOwner
	p.Encryption = EncryptionNone
	if in.Encryption != nil {
		if p.Encryption, err = ValidateEncryption(*in.Encryption); err != nil {
			return Package{}, err
		}
	}
	if p.Encrypted() && p.Direction == Inbound {
		if err := s.requireKey(ctx, owner); err != nil {
			return Package{}, err
		}
	}
	if in.Password != nil {
		if err := ValidateLinkPassword(*in.Password); err != nil {
			return Package{}, err
		}
		if p.PasswordHash, err = s.hasher.Hash(ctx, *in.Password); err != nil {
			return Package{}, err
		}
	}
	p.ID, err = uuid.NewV7()
	if err != nil {
		return Package{}, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	p.CreatedAt = now
	p.ExpiresAt = now.Add(time.Duration(p.TTLDays) * 24 * time.Hour)
	if recipients, err = withIDs(recipients, now); err != nil {
		return Package{}, err
	}
	p.setRecipients(recipients)
	fx := Effects{
		Events: []*eventsv1.Envelope{packageCreated(p)},
		Audit:  []AuditEntry{userAudit(owner, client, "package.create", p.ID, nil)},
	}
	if err := s.store.CreatePackage(ctx, p, fx); err != nil {
		return Package{}, err
	}
	return p, nil
}

// Get returns a package the user may see, with its files.
func (s *Packages) Get(ctx context.Context, u User, id uuid.UUID) (Package, []File, error) {
	p, err := s.visible(ctx, u, id)
	if err != nil {
		return Package{}, nil, err
	}
	// With one recipient the owner sees the files through that link, as before there
	// were several: the same counts, and what the link has taken of each budget.
	var through []byte
	if len(p.Recipients) == 1 {
		through = p.Recipients[0].LinkHash
	}
	files, err := s.store.ListFiles(ctx, id, through)
	return p, files, err
}

// List returns a page of the packages the user may see, newest first.
func (s *Packages) List(ctx context.Context, u User, f PackageFilter) ([]Package, error) {
	if !u.IsAdmin() {
		f.OwnerUserID = &u.ID
	}
	return s.store.ListPackages(ctx, f)
}

// visible loads a package and checks that the user owns it or is an admin.
func (s *Packages) visible(ctx context.Context, u User, id uuid.UUID) (Package, error) {
	p, err := s.store.GetPackage(ctx, id)
	if err != nil {
		return Package{}, err
	}
	if err := mayManage(u, p); err != nil {
		return Package{}, err
	}
	return p, nil
}

func mayManage(u User, p Package) error {
	if p.OwnerUserID != u.ID && !u.IsAdmin() {
		return Forbidden("this package belongs to another user")
	}
	return nil
}

// Upload is a file arriving as a stream.
type Upload struct {
	Filename    string
	ContentType string
	Body        io.Reader
	// Manifest is the upload's own encrypted manifest entry as sent (the multipart
	// field manifest: base64 of an age file), "" for none.
	Manifest string
}

// UploadAsOwner streams a file into a draft package the user may manage.
func (s *Packages) UploadAsOwner(ctx context.Context, u User, client Client, id uuid.UUID, up Upload) (File, error) {
	p, err := s.visible(ctx, u, id)
	if err != nil {
		return File{}, err
	}
	return s.upload(ctx, p, up, ByOwner, OpOwnerUpload, userAudit(u, client, "file.upload", id, nil))
}

// upload checks what it can before taking the bytes, streams them to storage, then
// records the file in one transaction that checks the state again. When the
// transaction fails the stored object is removed, so no object outlives a failed
// upload.
func (s *Packages) upload(ctx context.Context, p Package, up Upload, by Uploader, op Op, audit AuditEntry) (File, error) {
	probe := p
	if err := probe.apply(op, s.now()); err != nil {
		return File{}, err
	}
	if p.FileCount >= s.limits.MaxFiles {
		return File{}, Conflict("package already has the maximum of %d files", s.limits.MaxFiles)
	}
	if s.openUploads != nil {
		open, err := s.openUploads(ctx, p.ID)
		if err != nil {
			return File{}, err
		}
		if p.FileCount+open >= s.limits.MaxFiles {
			return File{}, Conflict("package already has the maximum of %d files, counting unfinished uploads", s.limits.MaxFiles)
		}
	}
	var manifest []byte
	if up.Manifest != "" {
		m, err := ParseFileManifest(up.Manifest)
		if err != nil {
			return File{}, err
		}
		manifest = m
	}
	if err := checkFileManifest(p, manifest); err != nil {
		return File{}, err
	}
	body := up.Body
	if p.Encrypted() {
		// The client's name and type are not kept (AsRecorded), and the bytes must be
		// an age file: checked before anything is stored.
		var err error
		if body, err = checkAgeUpload(body); err != nil {
			return File{}, err
		}
	} else if err := ValidateFilename(up.Filename); err != nil {
		return File{}, err
	}
	fileID, err := uuid.NewV7()
	if err != nil {
		return File{}, err
	}
	f := File{
		ID:          fileID,
		PackageID:   p.ID,
		Filename:    up.Filename,
		ContentType: NormalizeContentType(up.ContentType),
		ObjectKey:   objectKey(p.ID, fileID),
		UploadedBy:  by,
		Scan:        ScanPending, // the column's default: the scanner records the verdict
		Manifest:    manifest,
	}
	if p.Encrypted() {
		f.Filename, f.ContentType = "", "application/octet-stream" // named when recorded
	}
	if by == ByRecipient {
		f.RecipientID = audit.RecipientID // the link it comes through
	}

	h := sha256.New()
	limited := &limitedReader{r: io.TeeReader(body, h), left: s.limits.MaxFileSize}
	body = limited
	release, err := s.HoldObjectKey(ctx, f.ObjectKey)
	if err != nil {
		return File{}, err
	}
	size, err := s.objects.Put(ctx, f.ObjectKey, body, f.ContentType)
	release()
	if err == nil && (limited.over || limited.readErr != nil) {
		// The store may take a short read for the end of the stream (minio-go treats
		// io.ErrUnexpectedEOF so); the body's own failure decides.
		err = errors.Join(errBodyFailed, s.objects.Remove(context.WithoutCancel(ctx), f.ObjectKey))
	}
	if err != nil {
		if limited.over {
			return File{}, &Error{Kind: KindTooLarge, Detail: fmt.Sprintf("file is larger than the limit of %d bytes", s.limits.MaxFileSize)}
		}
		if limited.readErr != nil {
			return File{}, &Error{Kind: KindBadRequest, Detail: "the upload broke off or is malformed: " + limited.readErr.Error()}
		}
		var ae *Error
		if errors.As(err, &ae) {
			return File{}, err
		}
		return File{}, fmt.Errorf("store object: %w", err)
	}
	f.Size = size
	f.SHA256 = fmt.Sprintf("%x", h.Sum(nil))
	f.CreatedAt = s.now().UTC().Truncate(time.Microsecond)

	recorded, err := s.recordFile(ctx, f, op, audit, s.store.AddFile)
	if err != nil {
		// The row was not written: the object must not stay behind.
		if rmErr := s.objects.Remove(context.WithoutCancel(ctx), f.ObjectKey); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("remove object after failed upload: %w", rmErr))
		}
		return File{}, err
	}
	return recorded, nil
}

// addFileFunc records a stored file in its package's transaction (PackageStore.AddFile,
// or a store that also marks a resumable upload complete in it).
type addFileFunc func(ctx context.Context, f File, change func(p *Package) (Effects, error)) (Package, error)

// recordFile is the commit of every upload, multipart or resumable: in the package's
// transaction it checks the state and the file count again, counts the file and writes
// its audit entry and package.file_uploaded event.
// The file as recorded (AsRecorded: an encrypted package's neutral name) is returned.
func (s *Packages) recordFile(ctx context.Context, f File, op Op, audit AuditEntry, add addFileFunc) (File, error) {
	audit.FileID = &f.ID
	if f.UploadedBy == ByRecipient && f.RecipientID == nil {
		f.RecipientID = audit.RecipientID // the link it came through
	}
	recorded := f
	_, err := add(ctx, f, func(p *Package) (Effects, error) {
		if err := p.apply(op, s.now()); err != nil {
			return Effects{}, err
		}
		if p.FileCount >= s.limits.MaxFiles {
			return Effects{}, Conflict("package already has the maximum of %d files", s.limits.MaxFiles)
		}
		p.FileCount++
		p.FileSeq++
		p.TotalSize += f.Size
		recorded = AsRecorded(f, *p)
		return Effects{Events: []*eventsv1.Envelope{fileUploaded(*p, recorded)}, Audit: []AuditEntry{audit}}, nil
	})
	if err != nil {
		return File{}, err
	}
	return recorded, nil
}

// OpenFile opens a file of a package the user may see, for the owner's download.
func (s *Packages) OpenFile(ctx context.Context, u User, id, fileID uuid.UUID) (File, Object, error) {
	p, err := s.visible(ctx, u, id)
	if err != nil {
		return File{}, nil, err
	}
	if err := p.apply(OpOwnerDownload, s.now()); err != nil {
		return File{}, nil, err
	}
	return s.open(ctx, id, fileID)
}

func (s *Packages) open(ctx context.Context, id, fileID uuid.UUID) (File, Object, error) {
	f, err := s.store.GetFile(ctx, id, fileID, nil)
	if err != nil {
		return File{}, nil, err
	}
	if f.Scan == ScanInfected {
		return File{}, nil, ErrInfectedRemoved
	}
	obj, err := s.objects.Open(ctx, f.ObjectKey)
	if err != nil {
		return File{}, nil, err
	}
	return f, obj, nil
}

// RemoveFile removes a file from a draft package.
func (s *Packages) RemoveFile(ctx context.Context, u User, client Client, id, fileID uuid.UUID) error {
	if _, err := s.visible(ctx, u, id); err != nil {
		return err
	}
	var key string
	err := s.store.RemoveFile(ctx, id, fileID, func(p *Package, f File) (Effects, error) {
		if err := p.apply(OpRemoveFile, s.now()); err != nil {
			return Effects{}, err
		}
		p.FileCount--
		p.TotalSize -= f.Size
		key = f.ObjectKey
		return Effects{Audit: []AuditEntry{userAudit(u, client, "file.remove", id, &fileID)}}, nil
	})
	if err != nil {
		return err
	}
	s.removeObjects(ctx, []string{key})
	return nil
}

// Finalize seals a draft, mints one magic link per recipient and queues each their
// e-mail. It returns the package and the links (the first recipient's first), which
// are never available again.
func (s *Packages) Finalize(ctx context.Context, u User, client Client, id uuid.UUID) (Package, []LinkMint, error) {
	current, err := s.visible(ctx, u, id)
	if err != nil {
		return Package{}, nil, err
	}
	// The owner is read before the package's transaction: a read through the store
	// inside it would need a second pool connection while holding the first, and
	// enough concurrent finalizes would then wait on each other for good.
	owner, err := s.store.GetUser(ctx, current.OwnerUserID)
	if err != nil {
		return Package{}, nil, err
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
		return Package{}, nil, err
	}
	var links []LinkMint
	p, err := s.store.ChangePackage(ctx, id, func(p *Package) (Effects, error) {
		if err := p.apply(OpFinalize, s.now()); err != nil {
			return Effects{}, err
		}
		if p.Direction == Outbound && p.FileCount == 0 {
			return Effects{}, Conflict("package has no files")
		}
		if err := mint(len(p.Recipients)); err != nil {
			return Effects{}, err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		p.FinalizedAt = &now
		p.ExpiresAt = now.Add(time.Duration(p.TTLDays) * 24 * time.Hour)
		fx := Effects{
			Events: []*eventsv1.Envelope{packageFinalized(*p)},
			Audit:  []AuditEntry{userAudit(u, client, "package.finalize", id, nil)},
		}
		links = links[:0]
		for i := range p.Recipients {
			r := &p.Recipients[i]
			r.LinkHash, r.LinkState = tokens[i].hash, LinkActive
			link := s.publicURL + "/p/" + tokens[i].token
			links = append(links, LinkMint{RecipientID: r.ID, Email: r.Email, MagicLink: link})
			fx.Mail = append(fx.Mail, mailJob(*p, *r, owner, link))
		}
		return fx, nil
	})
	if err != nil {
		return Package{}, nil, err
	}
	return p, links, nil
}

// Revoke kills the active link of a package at once.
func (s *Packages) Revoke(ctx context.Context, u User, client Client, id uuid.UUID) (Package, error) {
	if _, err := s.visible(ctx, u, id); err != nil {
		return Package{}, err
	}
	p, err := s.store.ChangePackage(ctx, id, func(p *Package) (Effects, error) {
		if err := p.apply(OpRevoke, s.now()); err != nil {
			return Effects{}, err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		p.RevokedAt = &now
		for i := range p.Recipients {
			if r := &p.Recipients[i]; r.LinkState == LinkActive {
				r.LinkState, r.RevokedAt = LinkRevoked, &now
			}
		}
		return Effects{
			Events: []*eventsv1.Envelope{packageRevoked(*p, u.ID)},
			Audit:  []AuditEntry{userAudit(u, client, "package.revoke", id, nil)},
		}, nil
	})
	if err == nil && s.endUploads != nil {
		s.endUploads(ctx, id)
	}
	return p, err
}

// Delete removes a package, its files and their objects for good.
func (s *Packages) Delete(ctx context.Context, u User, client Client, id uuid.UUID) error {
	if _, err := s.visible(ctx, u, id); err != nil {
		return err
	}
	keys, err := s.store.DeletePackage(ctx, id, func(p *Package) (Effects, error) {
		return Effects{
			Events: []*eventsv1.Envelope{packageDeleted(*p, u.ID)},
			Audit:  []AuditEntry{userAudit(u, client, "package.delete", id, nil)},
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
func (s *Packages) Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	return s.store.ListAudit(ctx, f)
}

// ErrLinkGone is the one answer for an unknown, revoked, expired or deleted link: it
// gives no hint which.
var ErrLinkGone = &Error{Kind: KindGone, Detail: "this link is no longer valid"}

// CheckLink answers ErrLinkGone (and audits the attempt) unless token is the link of
// an active package. The link routes call it before they look at anything else of
// the request, so a dead link is 410 whatever else is wrong (a password, if the link
// has one, is checked after); the package it found is put in the returned context,
// where the request's own resolve finds it again without a second query.
func (s *Packages) CheckLink(ctx context.Context, token string, client Client) (context.Context, error) {
	p, err := s.liveLink(ctx, token, client)
	if err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, resolvedLinkKey{}, resolvedLink{token: token, pkg: p}), nil
}

type resolvedLinkKey struct{}

type resolvedLink struct {
	token string
	pkg   Package
}

// resolveLink finds the active package of a raw link token and checks the caller's
// grant when the link has a password (ErrLinkLocked without a valid one). Invalid
// attempts are audited.
func (s *Packages) resolveLink(ctx context.Context, token string, client Client) (Package, error) {
	p, err := s.liveLink(ctx, token, client)
	if err != nil {
		return Package{}, err
	}
	if p.PasswordProtected() && !CheckGrant(p, client.Grant, s.now()) {
		return Package{}, ErrLinkLocked
	}
	return p, nil
}

// liveLink finds the active package of a raw link token: unknown, revoked, expired,
// deleted and used-up links are all ErrLinkGone, before any password is asked.
func (s *Packages) liveLink(ctx context.Context, token string, client Client) (Package, error) {
	if r, ok := ctx.Value(resolvedLinkKey{}).(resolvedLink); ok && r.token == token {
		return r.pkg, nil
	}
	hash, ok := linkHash(token)
	if ok {
		p, err := s.store.PackageByLink(ctx, hash)
		if err == nil && !p.UsedUp && p.Link != nil && p.Link.LinkState == LinkActive && p.apply(OpUseLink, s.now()) == nil {
			return p, nil
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Package{}, err
		}
	}
	// One row per IP and hour, however many links a guesser tries.
	invalid := linkAudit(client, "link.invalid", nil, nil)
	invalid.Hourly = true
	_ = s.store.WriteEffects(ctx, Effects{Audit: []AuditEntry{invalid}})
	return Package{}, ErrLinkGone
}

// ViewLink returns the package and files behind a link, recording the visit.
func (s *Packages) ViewLink(ctx context.Context, token string, client Client) (Package, []File, error) {
	p, err := s.resolveLink(ctx, token, client)
	if err != nil {
		return Package{}, nil, err
	}
	files, err := s.store.ListFiles(ctx, p.ID, p.LinkHash)
	if err != nil {
		return Package{}, nil, err
	}
	// A recipient sees the owner's files and their own uploads, never another
	// recipient's.
	files = slices.DeleteFunc(files, func(f File) bool {
		if f.UploadedBy != ByRecipient || f.RecipientID == nil || p.Link == nil || *f.RecipientID == p.Link.ID {
			return false
		}
		p.FileCount--
		p.TotalSize -= f.Size
		return true
	})
	if p.OwnerPublicKey, err = s.ownerPublicKey(ctx, p); err != nil {
		return Package{}, nil, err
	}
	err = s.store.RecordLinkUse(ctx, p.LinkHash, Effects{Audit: []AuditEntry{p.linkAudit(client, "link.view", nil)}})
	return p, files, err
}

// Finish ends an answer through a link: what it took and did not send goes back to
// the budget.
type Finish func(Sent)

// DownloadViaLink opens a file through a link for an answer of the span plan picks
// (a RangeNotSatisfiableError for a range the file cannot satisfy). A file whose
// budget is spent answers ErrFileUsedUp, HEAD included; otherwise the answer takes the
// bytes it will send (none without a body) from the budget, or is ErrFileUsedUp when
// they are more than what is left. An answer with a body from byte 0 counts a download
// and fires package.downloaded. The caller calls finish with what it sent.
func (s *Packages) DownloadViaLink(ctx context.Context, token string, client Client, fileID uuid.UUID, plan func(File) (Span, error)) (File, Span, Object, Finish, error) {
	p, err := s.resolveLink(ctx, token, client)
	if err != nil {
		return File{}, Span{}, nil, nil, err
	}
	f, err := s.store.GetFile(ctx, p.ID, fileID, p.LinkHash)
	if err != nil {
		return File{}, Span{}, nil, nil, err
	}
	if !LinkMayDownload(f) {
		return File{}, Span{}, nil, nil, ErrRecipientFile
	}
	if err := s.scanAllows(f); err != nil {
		return File{}, Span{}, nil, nil, err
	}
	if f.BudgetSpent(p.MaxDownloads) {
		return File{}, Span{}, nil, nil, ErrFileUsedUp
	}
	span, err := plan(f)
	if err != nil {
		return File{}, Span{}, nil, nil, err
	}
	cost := AnswerCost(f.Size, span)
	counted := span.Counted()
	finish := func(Sent) {}
	if cost > 0 || counted {
		taken, err := s.store.TakeLinkBytes(ctx, p.ID, p.LinkHash, []uuid.UUID{f.ID}, []int64{cost}, counted)
		if err != nil {
			return File{}, Span{}, nil, nil, err
		}
		if len(taken) == 0 {
			return File{}, Span{}, nil, nil, ErrFileUsedUp
		}
		if counted {
			f.DownloadCount++
		}
		f.LinkTaken += cost
		finish = func(sent Sent) { s.giveBack(ctx, p.LinkHash, map[uuid.UUID]int64{f.ID: GiveBack(cost, sent)}) }
	}
	// Open first: a download that cannot start is not recorded as one.
	obj, err := s.objects.Open(ctx, f.ObjectKey)
	if err != nil {
		finish(Sent{})
		return File{}, Span{}, nil, nil, err
	}
	fx := Effects{Audit: []AuditEntry{p.linkAudit(client, "file.download", &f.ID)}}
	if counted {
		fx.Events = []*eventsv1.Envelope{packageDownloaded(p, f.ID.String(), f.Filename)}
	}
	if err := s.store.RecordLinkUse(ctx, p.LinkHash, fx); err != nil {
		obj.Close()
		finish(Sent{})
		return File{}, Span{}, nil, nil, err
	}
	return f, span, obj, finish, nil
}

// giveBack returns to the budgets of the link what answers took and did not send.
func (s *Packages) giveBack(ctx context.Context, linkHash []byte, amounts map[uuid.UUID]int64) {
	var ids []uuid.UUID
	var ns []int64
	for id, n := range amounts {
		if n > 0 {
			ids, ns = append(ids, id), append(ns, n)
		}
	}
	if len(ids) > 0 {
		_ = s.store.ReturnLinkBytes(context.WithoutCancel(ctx), linkHash, ids, ns)
	}
}

// ArchiveFinish ends an archive through a link: sent says what went out of each
// file's entry (a file missing from it sent nothing). What the entries took and did
// not send goes back to the budgets; entries sent whole keep what they took.
type ArchiveFinish func(sent map[uuid.UUID]Sent)

// ArchiveViaLink returns the files of a link's package for a zip of them all,
// recording the download, and a function to open each file's bytes. Each entry takes
// a whole copy of its file from the file's budget (and counts a download); files whose
// budget does not hold one are left out (ErrFileUsedUp when that is every file). The
// caller calls finish with what it sent of each entry.
func (s *Packages) ArchiveViaLink(ctx context.Context, token string, client Client) (Package, []File, func(File) (Object, error), ArchiveFinish, error) {
	p, err := s.resolveLink(ctx, token, client)
	if err != nil {
		return Package{}, nil, nil, nil, err
	}
	if p.Encrypted() {
		return Package{}, nil, nil, nil, ErrEncryptedArchive
	}
	all, err := s.store.ListFiles(ctx, p.ID, p.LinkHash)
	if err != nil {
		return Package{}, nil, nil, nil, err
	}
	files := make([]File, 0, len(all))
	for _, f := range all {
		if LinkMayDownload(f) && s.scanAllows(f) == nil {
			files = append(files, f)
		}
	}
	finish := func(map[uuid.UUID]Sent) {}
	if len(files) > 0 {
		ids := make([]uuid.UUID, len(files))
		costs := make([]int64, len(files))
		for i, f := range files {
			ids[i], costs[i] = f.ID, AnswerCost(f.Size, WholeFile(f))
		}
		taken, err := s.store.TakeLinkBytes(ctx, p.ID, p.LinkHash, ids, costs, true)
		if err != nil {
			return Package{}, nil, nil, nil, err
		}
		if len(taken) == 0 {
			return Package{}, nil, nil, nil, ErrFileUsedUp
		}
		files = slices.DeleteFunc(files, func(f File) bool { return !slices.Contains(taken, f.ID) })
		finish = func(sent map[uuid.UUID]Sent) {
			back := make(map[uuid.UUID]int64, len(files))
			for _, f := range files {
				back[f.ID] = GiveBack(AnswerCost(f.Size, WholeFile(f)), sent[f.ID])
			}
			s.giveBack(ctx, p.LinkHash, back)
		}
	}
	fx := Effects{
		Events: []*eventsv1.Envelope{packageDownloaded(p, "", ArchiveName(p))},
		Audit:  []AuditEntry{p.linkAudit(client, "archive.download", nil)},
	}
	if err := s.store.RecordLinkUse(ctx, p.LinkHash, fx); err != nil {
		finish(nil)
		return Package{}, nil, nil, nil, err
	}
	open := func(f File) (Object, error) { return s.objects.Open(ctx, f.ObjectKey) }
	return p, files, open, finish, nil
}

// ErrRecipientFile answers a download through a link of a file that was uploaded
// through it.
var ErrRecipientFile = Forbidden("files uploaded through this link cannot be downloaded through it")

// LinkMayDownload reports whether a file may be downloaded through its package's
// link: files the owner put in may, files uploaded through the link never (whoever
// holds a forwarded request link must not read what the recipient sent).
func LinkMayDownload(f File) bool { return f.UploadedBy != ByRecipient }

// UploadViaLink streams a recipient's file into an active inbound package.
func (s *Packages) UploadViaLink(ctx context.Context, token string, client Client, up Upload) (File, error) {
	p, err := s.resolveLink(ctx, token, client)
	if err != nil {
		return File{}, err
	}
	if p.Direction != Inbound {
		return File{}, Conflict("this package does not accept uploads")
	}
	f, err := s.upload(ctx, p, up, ByRecipient, OpRecipientUpload, p.linkAudit(client, "file.upload", nil))
	if err != nil {
		return File{}, err
	}
	if err := s.store.RecordLinkUse(ctx, p.LinkHash, Effects{}); err != nil {
		return File{}, err
	}
	return f, nil
}

// ArchiveName is the file name of the zip of a package's files.
func ArchiveName(p Package) string {
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || IsControl(r) || r == '"' {
			return '_'
		}
		return r
	}, strings.TrimSpace(p.Title))
	if name == "" {
		name = "package"
	}
	return name + ".zip"
}

// ValidateFilename accepts a plain file name: no path separators, no "." or "..", no
// control characters, at most 255 bytes.
func ValidateFilename(name string) error {
	switch {
	case name == "" || strings.TrimSpace(name) == "":
		return Invalid("the file part needs a filename")
	case len(name) > MaxFilenameLen:
		return Invalid("filename must be at most %d bytes", MaxFilenameLen)
	case !utf8.ValidString(name):
		return Invalid("filename must be valid UTF-8")
	case strings.ContainsAny(name, `/\`) || name == "." || name == "..":
		return Invalid("filename must not contain a path")
	case strings.ContainsFunc(name, isHiddenRune):
		return Invalid("filename must not contain control characters or Unicode format characters (such as bidi overrides)")
	}
	return nil
}

// isHiddenRune reports control characters and Unicode format characters (category
// Cf: bidi overrides such as U+202E, zero-width joiners, the BOM), which make a name
// display as something other than what it is ("invoice\u202Efdp.exe").
func isHiddenRune(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// MaxContentTypeLen is the longest content type stored with a file.
const MaxContentTypeLen = 127

// NormalizeContentType is the content type stored for a file sent as ct: its
// type/subtype in lower case, with its charset parameter if it has one and nothing
// else, at most MaxContentTypeLen characters; anything else is
// application/octet-stream.
func NormalizeContentType(ct string) string {
	const fallback = "application/octet-stream"
	if ct == "" || len(ct) > 4096 {
		return fallback
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || !strings.Contains(mt, "/") {
		return fallback
	}
	keep := map[string]string{}
	if cs, ok := params["charset"]; ok && cs != "" {
		keep["charset"] = strings.ToLower(cs)
	}
	out := mime.FormatMediaType(mt, keep)
	if out == "" || len(out) > MaxContentTypeLen {
		if out = mime.FormatMediaType(mt, nil); out == "" || len(out) > MaxContentTypeLen {
			return fallback
		}
	}
	return out
}

// MaxUserAgentLen is the most of a User-Agent header kept in the audit log.
const MaxUserAgentLen = 512

// NewClient describes a request's client for the audit log: its IP address and its
// User-Agent cut to MaxUserAgentLen bytes (at a character boundary), so a client
// cannot make every audit row it causes arbitrarily large.
func NewClient(ip, userAgent string) Client {
	userAgent = strings.ToValidUTF8(userAgent, "\uFFFD")
	if len(userAgent) > MaxUserAgentLen {
		cut := MaxUserAgentLen
		for cut > 0 && !utf8.RuneStart(userAgent[cut]) {
			cut--
		}
		userAgent = userAgent[:cut]
	}
	return Client{IP: ip, UserAgent: userAgent}
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

// linkHash hashes a raw link token, refusing anything that is not 43 base64url
// characters without touching the database.
func linkHash(token string) ([]byte, bool) {
	if len(token) != 43 {
		return nil, false
	}
	if _, err := base64.RawURLEncoding.DecodeString(token); err != nil {
		return nil, false
	}
	sum := sha256.Sum256([]byte(token))
	return sum[:], true
}

// IsNoteControl reports a control character other than a line break or a tab: what a
// note or a description must not contain.
func IsNoteControl(r rune) bool { return IsControl(r) && r != '\n' && r != '\r' && r != '\t' }

func userAudit(u User, c Client, action string, pkg uuid.UUID, file *uuid.UUID) AuditEntry {
	id := u.ID
	return AuditEntry{Actor: "user", ActorUserID: &id, Action: action, PackageID: &pkg, FileID: file, IP: c.IP, UserAgent: c.UserAgent}
}

func linkAudit(c Client, action string, pkg, file *uuid.UUID) AuditEntry {
	return AuditEntry{Actor: "link", Action: action, PackageID: pkg, FileID: file, IP: c.IP, UserAgent: c.UserAgent}
}

// linkAudit is an audit entry of a use of the link p was read through: it names the
// link's recipient, so each link has audit entries of its own.
func (p Package) linkAudit(c Client, action string, file *uuid.UUID) AuditEntry {
	a := linkAudit(c, action, &p.ID, file)
	a.RecipientID = p.linkRecipientID()
	return a
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
var ErrTooLarge = &Error{Kind: KindTooLarge, Detail: "file too large"}

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
