package app

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"mime"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// What the package service (app/packages) takes and gives, shared with the domains
// built on it and the transports: its inputs, effects, objects and audit entries.

// Effects are what a change writes beside it, in the same database transaction: the
// events for the bus, mail jobs for the mailer, delivery jobs for the webhook
// dispatcher and audit entries.
type Effects struct {
	Events      []*eventsv1.Envelope
	Mail        []*eventsv1.MailJob
	WebhookJobs []WebhookJob
	Audit       []AuditEntry
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

// Field limits of a package.
const (
	MaxTitleLen     = 200
	MaxNoteLen      = 2000
	MaxRecipientLen = 200
	MinTTLDays      = 1
	MaxTTLDays      = 90
	DefaultTTLDays  = 7
	MaxFilenameLen  = 255
)

// Upload is a file arriving as a stream.
type Upload struct {
	Filename    string
	ContentType string
	Body        io.Reader
	// Manifest is the upload's own encrypted manifest entry as sent (the multipart
	// field manifest: base64 of an age file), "" for none.
	Manifest string
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

// Nullable is a field of an edit that may be absent (Set false), null (Set, Value
// nil) or a value.
type Nullable[T any] struct {
	Set   bool
	Value *T
}

// Bounds of a package's recipient list (docs/API.md, "Several recipients").
const (
	MinRecipients = 1
	MaxRecipients = 50
)

// RecipientInput is one entry of the recipients of a create or an edit.
type RecipientInput struct {
	Email *string `json:"email"`
	Name  *string `json:"name"`
	// Language is the recipient's language (a code of pkg/i18n's Languages); nil:
	// English.
	Language *string `json:"language"`
}

// NewRecipient is the input of AddRecipient.
type NewRecipient = RecipientInput

// LinkMint is one recipient's freshly minted magic link, shown once.
type LinkMint struct {
	RecipientID uuid.UUID
	Email       string
	MagicLink   string
}

// SetRecipients makes rs the package's recipients (the first is its recipient_email
// and recipient_name).
func (p *Package) SetRecipients(rs []Recipient) {
	p.Recipients = rs
	if len(rs) > 0 {
		p.RecipientEmail, p.RecipientName = rs[0].Email, rs[0].Name
	}
}

// Several reports whether the package has more than one recipient: only then do its
// events carry the recipients' list and all_links (one recipient publishes as
// before).
func (p Package) Several() bool { return len(p.Recipients) > 1 }

// WebhookJob asks the dispatcher to (re)try a delivery; MsgID is its Nats-Msg-Id.
type WebhookJob struct {
	Job   *eventsv1.WebhookJob
	MsgID string
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

// LinkHash hashes a raw link token, refusing anything that is not 43 base64url
// characters without touching the database.
func LinkHash(token string) ([]byte, bool) { return linkHash(token) }

// LinkAudit is the audit entry of an action through a link, pkg nil when the link
// named none.
func LinkAudit(c Client, action string, pkg, file *uuid.UUID) AuditEntry {
	return linkAudit(c, action, pkg, file)
}

// LinkRecipientID is the id of the recipient whose link the package was read through.
func (p Package) LinkRecipientID() *uuid.UUID { return p.linkRecipientID() }
