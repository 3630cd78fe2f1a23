package app

import (
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events"
)

// State is where a package is in its life.
type State string

// The package states.
const (
	StateDraft   State = "draft"
	StateActive  State = "active"
	StateRevoked State = "revoked"
	StateExpired State = "expired"
)

// Direction says who sends the files.
type Direction string

// The package directions.
const (
	Outbound Direction = "outbound" // the owner sends files to the recipient
	Inbound  Direction = "inbound"  // the owner asks the recipient for files
)

// Uploader is who added a file.
type Uploader string

// The uploaders.
const (
	ByOwner     Uploader = "owner"
	ByRecipient Uploader = "recipient"
)

// Package is a bundle of files exchanged through a magic link.
type Package struct {
	ID             uuid.UUID
	OwnerUserID    int64
	Title          string
	RecipientEmail string
	RecipientName  string
	Direction      Direction
	State          State
	TTLDays        int
	Note           string
	FileCount      int
	TotalSize      int64
	CreatedAt      time.Time
	FinalizedAt    *time.Time
	ExpiresAt      time.Time
	RevokedAt      *time.Time
	// LinkHash is the hash of the link the package was read through (PackageByLink),
	// nil otherwise; Link is that link's recipient.
	LinkHash []byte
	Link     *Recipient
	// LinkUseCount and LinkLastUsedAt sum up the uses of every recipient's link.
	LinkUseCount   int64
	LinkLastUsedAt *time.Time
	// Recipients are the package's recipients in order (docs/API.md, "Several recipients"):
	// RecipientEmail and RecipientName are the first's. Loaded for the owner's reads
	// and changes, not for reads through a link.
	Recipients []Recipient
	// PasswordHash is the argon2id hash of the link's password, "" when it has none.
	PasswordHash string
	// MaxDownloads is how many times each file may be downloaded through the link; nil:
	// no limit.
	MaxDownloads *int
	// NotifyOwner asks the mailer to tell the owner of downloads and uploads.
	NotifyOwner bool
	// OnHold: a legal hold covers the package (its own or its owner's); it is neither
	// deleted nor expired, nor are its files removed, until released.
	OnHold bool
	// UsedUp is set when the package is read through its link: it has a download limit
	// and every file has spent its budget through the link, so the link is dead.
	UsedUp bool
	// PackageFields are the events' package head beyond the fields above, held as the
	// head carries them (eventPackage copies them whole): a new head field is declared
	// there, in pkg/events, and the store fills it from its column.
	events.PackageFields
	// Encryption is fixed at creation (docs/ENCRYPTION.md); FileSeq
	// counts the files the package has recorded (the N of an encrypted file-N.age).
	Encryption Encryption
	FileSeq    int
	// OwnerPublicKey is an encrypted file request's age public key (age1…): its
	// owner's key when the request was created, kept with the package, to which every
	// upload is encrypted whatever key the owner has since; "" for other packages.
	OwnerPublicKey string
}

// LinkState is where a recipient's link is.
type LinkState string

// The link states: none before the package is finalized.
const (
	LinkNone    LinkState = "none"
	LinkActive  LinkState = "active"
	LinkRevoked LinkState = "revoked"
)

// Recipient is one addressee of a package, with a magic link of their own.
type Recipient struct {
	ID    uuid.UUID
	Email string
	Name  string
	// Language is the recipient's language (a code of pkg/i18n's Languages): their
	// e-mail and, unless they pick another, their page are written in it.
	Language string
	// LinkHash is the SHA-256 of the recipient's link; nil while LinkState is none.
	LinkHash      []byte
	LinkState     LinkState
	UseCount      int64
	LastUsedAt    *time.Time
	DownloadCount int64
	CreatedAt     time.Time
	RevokedAt     *time.Time
}

// Recipient returns the package's recipient with the id, if it has one.
func (p Package) Recipient(id uuid.UUID) (Recipient, bool) {
	for _, r := range p.Recipients {
		if r.ID == id {
			return r, true
		}
	}
	return Recipient{}, false
}

// RecipientEmails lists the recipients' addresses in order.
func (p Package) RecipientEmails() []string {
	out := make([]string, len(p.Recipients))
	for i, r := range p.Recipients {
		out[i] = r.Email
	}
	return out
}

// linkRecipientID is the id of the recipient whose link the package was read through.
func (p Package) linkRecipientID() *uuid.UUID {
	if p.Link == nil {
		return nil
	}
	id := p.Link.ID
	return &id
}

// PasswordProtected reports whether the link asks for a password.
func (p Package) PasswordProtected() bool { return p.PasswordHash != "" }

// File is one file of a package; its bytes live in object storage under ObjectKey.
type File struct {
	ID          uuid.UUID
	PackageID   uuid.UUID
	Filename    string
	Size        int64
	ContentType string
	SHA256      string
	ObjectKey   string
	UploadedBy  Uploader
	CreatedAt   time.Time
	// RecipientID is the recipient whose link the file was uploaded through.
	RecipientID *uuid.UUID
	// DownloadCount is the number of answers through the links that started at byte 0
	// (whole files, ranges from byte 0, archive entries); read through a link, that
	// link's alone.
	DownloadCount int
	// Scan is the malware scan's state (ScanPending …), ScanSignature what clamd found
	// when infected or unscannable, ScannedAt when the verdict was recorded.
	Scan          ScanState
	ScanSignature string
	ScannedAt     *time.Time
	// ScanReleasedBy and ScanReleasedAt: the user who released a file the scanner could
	// not judge, and when (nil: not released).
	ScanReleasedBy *int64
	ScanReleasedAt *time.Time
	// PreviewKey is the object key of the file's image preview ("" when it has none),
	// PreviewWidth and PreviewHeight its size (internal/app/previews).
	PreviewKey                  string
	PreviewWidth, PreviewHeight int
	// LinkTaken is what answers through the link have taken of the file's budget
	// there (docs/API.md, "Download limit"): bytes, or whole copies of an empty file.
	LinkTaken int64
	// Encrypted: the file is an age file of an encrypted package; Manifest is the
	// encrypted manifest entry its uploader sent with it (request uploads), or nil.
	Encrypted bool
	Manifest  []byte
}

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	ID          int64
	CreatedAt   time.Time
	Actor       string // "user", "link" or "system"
	ActorUserID *int64
	Action      string
	PackageID   *uuid.UUID
	FileID      *uuid.UUID
	// RecipientID is the recipient whose link was used (actor "link").
	RecipientID *uuid.UUID
	IP          string
	UserAgent   string
	// Detail says more than the action, e.g. an e-mail's recipient or an SMTP
	// server's rejection (written by the mailer).
	Detail string
	// Hourly: the entry is counted in the one row of its action, IP and hour (Hits
	// says how many), for anonymous failures (docs/API.md, "Hostile clients").
	Hourly bool
	Hits   int
}

// Client is who is calling, for the audit log.
type Client struct {
	IP        string
	UserAgent string
	// Grant is the link grant the caller presents (header Shipfile-Link-Grant or the
	// shipfile_link cookie); a password-protected link needs a valid one.
	Grant string
}

// PackageFilter selects and pages packages for a list.
type PackageFilter struct {
	OwnerUserID *int64 // nil: every owner (admins)
	State       *State
	Direction   *Direction
	Limit       int
	After       *PackageCursor
}

// PackageCursor is the keyset position after which a page starts (newest first).
type PackageCursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// AuditFilter selects and pages audit entries (newest first).
type AuditFilter struct {
	PackageID *uuid.UUID
	Limit     int
	BeforeID  int64 // 0: from the newest
}
