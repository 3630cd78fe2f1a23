package audit

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// ErrOnHold answers a change a legal hold forbids: deleting or expiring a held package,
// removing one of its files.
var ErrOnHold = app.Conflict("on legal hold")

// MaxReasonLen bounds a hold's reason, in characters.
const MaxReasonLen = 1000

// Hold is a legal hold on one package or on every package of a user.
type Hold struct {
	ID         uuid.UUID
	PackageID  *uuid.UUID
	UserID     *int64
	Reason     string
	CreatedBy  *int64
	CreatedAt  time.Time
	ReleasedBy *int64
	ReleasedAt *time.Time
}

// NewHold is what an admin asks to hold: a package or a user, and why.
type NewHold struct {
	PackageID *uuid.UUID
	UserID    *int64
	Reason    string
}

// Validate checks that exactly one of package and user is named, with a reason: not
// blank, at most MaxReasonLen characters, without the control characters and bidi
// overrides a note may not hold either.
func (n NewHold) Validate() error {
	if (n.PackageID == nil) == (n.UserID == nil) {
		return app.Invalid("name either package_id or user_id")
	}
	if strings.TrimSpace(n.Reason) == "" {
		return app.Invalid("reason is required")
	}
	if utf8.RuneCountInString(n.Reason) > MaxReasonLen {
		return app.Invalid("reason is longer than %d characters", MaxReasonLen)
	}
	if !utf8.ValidString(n.Reason) || app.HasHiddenText(n.Reason) {
		return app.Invalid("reason must be text without control characters (but line breaks and tabs) or bidi overrides")
	}
	return nil
}

// HoldStore keeps the holds. Placing and releasing write their audit entry in the
// same transaction, and return the object keys whose S3 legal hold changes: every
// object of the packages the hold covers, each file's and its preview's (on release, of
// those no other hold covers).
type HoldStore interface {
	// CreateLegalHold stores h; a package or user that does not exist is app.ErrNotFound.
	CreateLegalHold(ctx context.Context, h Hold, a app.AuditEntry) (keys []string, err error)
	LegalHolds(ctx context.Context) ([]Hold, error)
	// ReleaseLegalHold marks the hold released by by at at; a hold released before is
	// app.ErrConflict, an unknown one app.ErrNotFound.
	ReleaseLegalHold(ctx context.Context, id uuid.UUID, by int64, at time.Time, a app.AuditEntry) (Hold, []string, error)
}

// ObjectLocker puts or lifts S3's legal hold on an object.
type ObjectLocker interface {
	SetLegalHold(ctx context.Context, key string, on bool) error
}

// Holds places and releases legal holds.
type Holds struct {
	store  HoldStore
	locker ObjectLocker
	log    *slog.Logger
	now    func() time.Time
}

// NewHolds returns the holds kept in store; locker (nil: no S3 object lock) also
// holds the objects in S3.
func NewHolds(store HoldStore, locker ObjectLocker, log *slog.Logger) *Holds {
	return &Holds{store: store, locker: locker, log: log, now: time.Now}
}

func holdAudit(u app.User, c app.Client, action string, h Hold) app.AuditEntry {
	id := u.ID
	detail := h.Reason
	if h.UserID != nil {
		detail = fmt.Sprintf("user %d: %s", *h.UserID, h.Reason)
	}
	return app.AuditEntry{Actor: "user", ActorUserID: &id, Action: action, PackageID: h.PackageID, IP: c.IP, UserAgent: c.UserAgent,
		Detail: fmt.Sprintf("hold %s: %s", h.ID, detail)}
}

// Place records a hold asked by the admin u and, with object lock, holds its objects.
func (s *Holds) Place(ctx context.Context, u app.User, c app.Client, n NewHold) (Hold, error) {
	if err := n.Validate(); err != nil {
		return Hold{}, err
	}
	by := u.ID
	h := Hold{ID: uuid.Must(uuid.NewV7()), PackageID: n.PackageID, UserID: n.UserID, Reason: n.Reason, CreatedBy: &by, CreatedAt: s.now().UTC()}
	keys, err := s.store.CreateLegalHold(ctx, h, holdAudit(u, c, "hold.create", h))
	if err != nil {
		return Hold{}, err
	}
	return h, s.lock(ctx, keys, true)
}

// Release releases a hold and, with object lock, lifts the S3 hold of the objects no
// other hold covers.
func (s *Holds) Release(ctx context.Context, u app.User, c app.Client, id uuid.UUID) (Hold, error) {
	h, keys, err := s.store.ReleaseLegalHold(ctx, id, u.ID, s.now().UTC(), holdAudit(u, c, "hold.release", Hold{ID: id}))
	if err != nil {
		return Hold{}, err
	}
	return h, s.lock(ctx, keys, false)
}

// List is every hold, released ones included, newest first.
func (s *Holds) List(ctx context.Context) ([]Hold, error) { return s.store.LegalHolds(ctx) }

func (s *Holds) lock(ctx context.Context, keys []string, on bool) error {
	if s.locker == nil {
		return nil
	}
	for _, k := range keys {
		if err := s.locker.SetLegalHold(ctx, k, on); err != nil {
			return err
		}
	}
	return nil
}
