package policies

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/bytesize"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Store keeps groups, members, the default policy, the running usage and the
// reservations.
type Store interface {
	CreateGroup(ctx context.Context, g Group) (Group, error)
	ListGroups(ctx context.Context) ([]Group, error)
	GetGroup(ctx context.Context, id int64) (Group, error)
	UpdateGroup(ctx context.Context, g Group) (Group, error)
	DeleteGroup(ctx context.Context, id int64) error
	// PutMember makes the user a member put by an admin; ErrNotFound for a group or
	// user that does not exist.
	PutMember(ctx context.Context, groupID, userID int64) error
	DeleteMember(ctx context.Context, groupID, userID int64) error
	// SyncOIDCMembers makes the user a member of exactly the groups whose oidc_groups
	// name one of claim, among the memberships taken from the claim (those an admin
	// put stay).
	SyncOIDCMembers(ctx context.Context, userID int64, claim []string) error
	DefaultPolicy(ctx context.Context) (Policy, error)
	SetDefaultPolicy(ctx context.Context, p Policy) error
	// UserPolicies returns the policies of the user's groups and the default policy,
	// in one round trip.
	UserPolicies(ctx context.Context, userID int64) (groups []Policy, def Policy, err error)
	Usage(ctx context.Context, userID int64) (Usage, error)
	ListUsage(ctx context.Context, sort UsageSort) ([]Usage, error)
	// Reserve records a hold of bytes for the user when they fit under quota (nil: no
	// quota) and, with cap > 0, all users' bytes under cap: a conditional update of the
	// running total, atomic across gateway instances. ok is false (and nothing held)
	// when they do not fit; u is the user's usage after (or as it stood), total all
	// users' held bytes when cap > 0. With grow the hold r.ID exists and grows by
	// bytes; else it is recorded (r.Hold, r.ExpiresAt when r.Hold names nothing).
	Reserve(ctx context.Context, r Reservation, bytes int64, quota *int64, cap int64, grow bool) (u Usage, total int64, ok bool, err error)
	// AttachHold ties a hold to its resumable upload (and ends its expiry).
	AttachHold(ctx context.Context, id, tusUploadID uuid.UUID) error
	// ReleaseHold deletes a hold, giving its bytes back.
	ReleaseHold(ctx context.Context, id uuid.UUID) error
	// SweepHolds deletes the holds past their expiry.
	SweepHolds(ctx context.Context) (int64, error)
	// LockCreations holds the user's package creations, on every gateway instance,
	// until unlock is called.
	LockCreations(ctx context.Context, userID int64) (unlock func(), err error)
	// MarkNotified records, when nearlyFull and no notice went out since usage last
	// fell below 90 %, the user's 90 % notice (an account notice the mailer sends,
	// naming detail) and the mark, in one transaction; without nearlyFull it clears the
	// mark. due is true once, when the notice is written.
	MarkNotified(ctx context.Context, userID int64, nearlyFull bool, detail string) (due bool, err error)
}

// Notifier tells webhooks of uploads refused for their owner's quota (the
// quota.exceeded event; OutboxNotifier).
type Notifier interface {
	// QuotaExceeded records that user was refused by limit with the numbers.
	QuotaExceeded(ctx context.Context, userID int64, limit string, used, quota, need int64) error
}

// Policies is the policies domain.
type Policies struct {
	store Store
	// cap bounds all users' bytes together (SHIPFILE_STORAGE_CAP; 0: no bound).
	cap    int64
	notify Notifier
	now    func() time.Time
}

// Option configures the policies domain.
type Option func(*Policies)

// WithStorageCap bounds all users' bytes together (0: no bound).
func WithStorageCap(n int64) Option { return func(p *Policies) { p.cap = n } }

// WithNotifier has quota refusals and the 90 % mark told through n.
func WithNotifier(n Notifier) Option { return func(p *Policies) { p.notify = n } }

// New returns the policies domain on store.
func New(store Store, opts ...Option) *Policies {
	p := &Policies{store: store, now: time.Now}
	for _, o := range opts {
		o(p)
	}
	return p
}

// StorageCap is SHIPFILE_STORAGE_CAP (0: none).
func (s *Policies) StorageCap() int64 { return s.cap }

// For returns the effective policy of the user.
func (s *Policies) For(ctx context.Context, userID int64) (Policy, error) {
	groups, def, err := s.store.UserPolicies(ctx, userID)
	if err != nil {
		return Policy{}, err
	}
	return Effective(groups, def), nil
}

// Usage returns the user's usage and effective policy.
func (s *Policies) Usage(ctx context.Context, userID int64) (Usage, Policy, error) {
	pol, err := s.For(ctx, userID)
	if err != nil {
		return Usage{}, Policy{}, err
	}
	u, err := s.store.Usage(ctx, userID)
	return u, pol, err
}

// ActivePackages returns how many of the user's packages are in draft or active.
func (s *Policies) ActivePackages(ctx context.Context, userID int64) (int, error) {
	u, err := s.store.Usage(ctx, userID)
	return u.ActivePackages, err
}

// creationWait bounds how long a package creation waits for the user's others.
const creationWait = 10 * time.Second

// CheckActive holds the user's package creations and checks that one more fits under
// max_active_packages (a 422 naming the numbers); the caller creates the package, then
// calls unlock. So parallel creations, through any gateway, never pass the limit.
func (s *Policies) CheckActive(ctx context.Context, userID int64, pol Policy) (unlock func(), err error) {
	if pol.MaxActivePackages == nil {
		return func() {}, nil
	}
	lctx, cancel := context.WithTimeout(ctx, creationWait)
	defer cancel()
	unlock, err = s.store.LockCreations(lctx, userID)
	if err != nil {
		return nil, err
	}
	n, err := s.ActivePackages(ctx, userID)
	if err == nil {
		err = CheckActive(pol, n)
	}
	if err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// ListUsage returns every user's usage in the order asked.
func (s *Policies) ListUsage(ctx context.Context, sort UsageSort) ([]Usage, error) {
	switch sort {
	case "":
		sort = SortUsed
	case SortUsed, SortReserved, SortActive, SortEmail:
	default:
		return nil, app.Invalid("sort must be one of used_bytes, reserved_bytes, active_packages, email")
	}
	return s.store.ListUsage(ctx, sort)
}

// Reservation is a hold of bytes against a user's quota for an upload under way.
type Reservation struct {
	ID     uuid.UUID
	UserID int64
	// Bytes is what the hold holds.
	Bytes int64
	Hold  Hold
	// ExpiresAt is when an unattached hold lapses.
	ExpiresAt time.Time
	quota     *int64
	policy    Policy
	active    bool
	// held: a quota or the cap applies, so bytes are held in a quota_holds row.
	held bool
}

// Active reports whether the reservation holds anything (false: no quota or cap
// applies, and nothing was recorded).
func (r *Reservation) Active() bool { return r != nil && r.active }

// holdGrace is how long a hold not yet tied to its upload lasts.
const holdGrace = 15 * time.Minute

// Reserve holds bytes of the user's quota for an upload into a package that holds
// packageSize bytes: max_file_size and max_package_size first, then the storage quota
// and the storage cap. With neither quota nor cap nothing is recorded. A refusal is a
// 413 naming the limit and the numbers (and a quota.exceeded event).
func (s *Policies) Reserve(ctx context.Context, userID, bytes, packageSize int64, hold Hold) (*Reservation, error) {
	r, err := s.prepare(ctx, userID, bytes, packageSize, hold)
	if err != nil || !r.held {
		return r, err
	}
	if err := s.take(ctx, r, bytes, false, true); err != nil {
		return nil, err
	}
	return r, nil
}

// prepare reads the user's policy, checks the sizes and names the reservation, which
// holds nothing yet.
func (s *Policies) prepare(ctx context.Context, userID, bytes, packageSize int64, hold Hold) (*Reservation, error) {
	pol, err := s.For(ctx, userID)
	if err != nil {
		return nil, err
	}
	if err := CheckFileSize(pol, bytes, packageSize); err != nil {
		return nil, err
	}
	r := &Reservation{UserID: userID, Hold: hold, quota: pol.StorageQuotaBytes, policy: pol,
		held: pol.StorageQuotaBytes != nil || s.cap > 0}
	if !r.held {
		return r, nil
	}
	if r.ID, err = uuid.NewV7(); err != nil {
		return nil, err
	}
	r.ExpiresAt = s.now().Add(holdGrace)
	return r, nil
}

// take holds bytes more for r, or answers the 413 of the limit that refused them (and,
// with tell, writes its quota.exceeded).
func (s *Policies) take(ctx context.Context, r *Reservation, bytes int64, grow, tell bool) error {
	u, total, ok, err := s.store.Reserve(ctx, *r, bytes, r.quota, s.cap, grow)
	if err != nil {
		return err
	}
	if !ok {
		limit, held, quota := LimitQuota, u.Held(), int64(0)
		if r.quota != nil && u.Held()+bytes > *r.quota {
			quota = *r.quota
		} else {
			limit, held, quota = LimitCap, total, s.cap
		}
		if tell && s.notify != nil {
			// The refusal stands whether or not its event is written.
			_ = s.notify.QuotaExceeded(context.WithoutCancel(ctx), r.UserID, limit, held, quota, bytes)
		}
		return QuotaError(limit, held, quota, bytes)
	}
	r.Bytes += bytes
	r.active = true
	return nil
}

// Attach ties r to its resumable upload: it lasts until the upload completes or ends.
func (s *Policies) Attach(ctx context.Context, r *Reservation, tusUploadID uuid.UUID) error {
	if !r.Active() {
		return nil
	}
	return s.store.AttachHold(ctx, r.ID, tusUploadID)
}

// Release gives r's bytes back (an upload that failed or was refused).
func (s *Policies) Release(ctx context.Context, r *Reservation) error {
	if !r.Active() {
		return nil
	}
	r.active = false
	return s.store.ReleaseHold(context.WithoutCancel(ctx), r.ID)
}

// Sweep gives back the holds of uploads that never started (a gateway that stopped
// between the reservation and the upload's record).
func (s *Policies) Sweep(ctx context.Context) (int64, error) { return s.store.SweepHolds(ctx) }

// Committed is called after a file of the user was recorded: when the bytes the
// user's packages hold reach 90 % of the quota, the 90 % e-mail is queued (an account
// notice), once until usage falls below 90 % again.
func (s *Policies) Committed(ctx context.Context, userID int64) {
	u, pol, err := s.Usage(ctx, userID)
	if err != nil || pol.StorageQuotaBytes == nil {
		return
	}
	full := NearlyFull(pol.StorageQuotaBytes, u.UsedBytes)
	if !full && u.NotifiedAt == nil {
		return
	}
	// A failure leaves the mark as it was: the next upload tries again.
	_, _ = s.store.MarkNotified(context.WithoutCancel(ctx), userID, full, fmt.Sprintf("%s of %s", bytesize.IEC(u.UsedBytes), bytesize.IEC(*pol.StorageQuotaBytes)))
}

// RunSweeper gives back the lapsed holds every interval until ctx ends.
func (s *Policies) RunSweeper(ctx context.Context, every time.Duration, onErr func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				onErr(err)
			}
		}
	}
}
