// Package policiesdb is the policies domain's store on PostgreSQL (policies.Store):
// groups and their members, the default policy, usage and quota holds. Its SQL is
// queries.sql, compiled by sqlc; the running totals it reads are kept by the triggers
// of migration 00032.
package policiesdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/policies"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

// Store implements policies.Store.
type Store struct {
	sql *sqldb.DB
	q   *Queries
}

var _ policies.Store = (*Store)(nil)

// NewStore returns the store on d's pool.
func NewStore(d *sqldb.DB) *Store { return &Store{sql: d, q: New(d.Pool)} }

// CreateGroup inserts a group; a name taken (case-insensitively) is a conflict.
func (s *Store) CreateGroup(ctx context.Context, g policies.Group) (policies.Group, error) {
	pol, err := json.Marshal(g.Policy)
	if err != nil {
		return policies.Group{}, err
	}
	row, err := s.q.CreatePolicyGroup(ctx, CreatePolicyGroupParams{Name: g.Name, Policy: pol, OidcGroups: orEmpty(g.OIDCGroups)})
	if err != nil {
		return policies.Group{}, groupErr(err)
	}
	return toGroup(row.ID, row.Name, row.Policy, row.OidcGroups, nil, row.CreatedAt, row.UpdatedAt)
}

// ListGroups returns every group with its members, by name.
func (s *Store) ListGroups(ctx context.Context) ([]policies.Group, error) {
	rows, err := s.q.ListPolicyGroups(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]policies.Group, 0, len(rows))
	for _, r := range rows {
		g, err := toGroup(r.ID, r.Name, r.Policy, r.OidcGroups, r.Members, r.CreatedAt, r.UpdatedAt)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// GetGroup returns a group with its members.
func (s *Store) GetGroup(ctx context.Context, id int64) (policies.Group, error) {
	r, err := s.q.GetPolicyGroup(ctx, id)
	if err != nil {
		return policies.Group{}, sqldb.NotFound(err, "group")
	}
	return toGroup(r.ID, r.Name, r.Policy, r.OidcGroups, r.Members, r.CreatedAt, r.UpdatedAt)
}

// UpdateGroup writes a group's name, policy and oidc_groups.
func (s *Store) UpdateGroup(ctx context.Context, g policies.Group) (policies.Group, error) {
	pol, err := json.Marshal(g.Policy)
	if err != nil {
		return policies.Group{}, err
	}
	row, err := s.q.UpdatePolicyGroup(ctx, UpdatePolicyGroupParams{ID: g.ID, Name: g.Name, Policy: pol, OidcGroups: orEmpty(g.OIDCGroups)})
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return policies.Group{}, app.NotFound("group")
		}
		return policies.Group{}, groupErr(err)
	}
	return s.GetGroup(ctx, row.ID)
}

// DeleteGroup deletes a group and its memberships.
func (s *Store) DeleteGroup(ctx context.Context, id int64) error {
	n, err := s.q.DeletePolicyGroup(ctx, id)
	if err == nil && n == 0 {
		return app.NotFound("group")
	}
	return err
}

// PutMember makes the user a member of the group, put by an admin.
func (s *Store) PutMember(ctx context.Context, groupID, userID int64) error {
	err := s.q.PutPolicyGroupMember(ctx, PutPolicyGroupMemberParams{GroupID: groupID, UserID: userID})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqldb.ForeignKeyViolation {
		return app.NotFound("group or user")
	}
	return err
}

// DeleteMember ends a membership.
func (s *Store) DeleteMember(ctx context.Context, groupID, userID int64) error {
	n, err := s.q.DeletePolicyGroupMember(ctx, DeletePolicyGroupMemberParams{GroupID: groupID, UserID: userID})
	if err == nil && n == 0 {
		return app.NotFound("membership")
	}
	return err
}

// SyncOIDCMembers makes the claim's memberships of the user those its groups name.
func (s *Store) SyncOIDCMembers(ctx context.Context, userID int64, claim []string) error {
	claim = orEmpty(claim)
	return s.sql.InTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.DropOIDCMemberships(ctx, DropOIDCMembershipsParams{UserID: userID, Claim: claim}); err != nil {
			return err
		}
		return q.AddOIDCMemberships(ctx, AddOIDCMembershipsParams{UserID: userID, Claim: claim})
	})
}

// DefaultPolicy returns the policy of users in no group.
func (s *Store) DefaultPolicy(ctx context.Context) (policies.Policy, error) {
	raw, err := s.q.GetDefaultPolicy(ctx)
	if err != nil {
		return policies.Policy{}, err
	}
	var p policies.Policy
	return p, json.Unmarshal(raw, &p)
}

// SetDefaultPolicy writes the policy of users in no group.
func (s *Store) SetDefaultPolicy(ctx context.Context, p policies.Policy) error {
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.q.SetDefaultPolicy(ctx, raw)
}

// UserPolicies returns the policies of the user's groups and the default policy.
func (s *Store) UserPolicies(ctx context.Context, userID int64) ([]policies.Policy, policies.Policy, error) {
	row, err := s.q.UserPolicies(ctx, userID)
	if err != nil {
		return nil, policies.Policy{}, err
	}
	var def policies.Policy
	var groups []policies.Policy
	if err := json.Unmarshal(row.DefaultPolicy, &def); err != nil {
		return nil, policies.Policy{}, fmt.Errorf("default policy: %w", err)
	}
	if err := json.Unmarshal(row.GroupPolicies, &groups); err != nil {
		return nil, policies.Policy{}, fmt.Errorf("group policies: %w", err)
	}
	return groups, def, nil
}

// Usage returns the user's running usage.
func (s *Store) Usage(ctx context.Context, userID int64) (policies.Usage, error) {
	r, err := s.q.GetUsage(ctx, userID)
	if err != nil {
		return policies.Usage{}, sqldb.NotFound(err, "user")
	}
	return policies.Usage{UserID: r.UserID, Email: r.Email, Name: r.Name, UsedBytes: r.UsedBytes, ReservedBytes: r.ReservedBytes,
		ActivePackages: int(r.ActivePackages), NotifiedAt: r.NotifiedAt}, nil
}

// ListUsage returns every user's usage in the order asked.
func (s *Store) ListUsage(ctx context.Context, sort policies.UsageSort) ([]policies.Usage, error) {
	rows, err := s.q.ListUsage(ctx, string(sort))
	if err != nil {
		return nil, err
	}
	out := make([]policies.Usage, 0, len(rows))
	for _, r := range rows {
		out = append(out, policies.Usage{UserID: r.UserID, Email: r.Email, Name: r.Name, UsedBytes: r.UsedBytes,
			ReservedBytes: r.ReservedBytes, ActivePackages: int(r.ActivePackages), NotifiedAt: r.NotifiedAt})
	}
	return out, nil
}

// Reserve holds bytes of the user's quota, and of the cap when cap > 0, in one
// transaction: the conditional update of the user's running total and the hold's row.
func (s *Store) Reserve(ctx context.Context, r policies.Reservation, bytes int64, quota *int64, cap int64, grow bool) (policies.Usage, int64, bool, error) {
	var (
		u     policies.Usage
		total int64
		ok    bool
	)
	if cap == 0 {
		return s.reserveAlone(ctx, r, bytes, quota, grow)
	}
	err := s.sql.InTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if cap > 0 {
			if err := q.LockStorageCap(ctx); err != nil {
				return err
			}
			held, err := q.StorageHeld(ctx)
			if err != nil {
				return err
			}
			total = held
			if held+bytes > cap {
				cur, err := q.GetUsage(ctx, r.UserID)
				if err != nil {
					return sqldb.NotFound(err, "user")
				}
				u = policies.Usage{UserID: cur.UserID, UsedBytes: cur.UsedBytes, ReservedBytes: cur.ReservedBytes, ActivePackages: int(cur.ActivePackages)}
				return nil
			}
		}
		row, err := q.ReserveUsage(ctx, ReserveUsageParams{Bytes: bytes, UserID: r.UserID, Quota: quota})
		if errors.Is(err, pgx.ErrNoRows) {
			cur, err := q.GetUsage(ctx, r.UserID)
			if err != nil {
				return sqldb.NotFound(err, "user")
			}
			u = policies.Usage{UserID: cur.UserID, UsedBytes: cur.UsedBytes, ReservedBytes: cur.ReservedBytes, ActivePackages: int(cur.ActivePackages)}
			return nil
		}
		if err != nil {
			return err
		}
		u = policies.Usage{UserID: row.UserID, UsedBytes: row.UsedBytes, ReservedBytes: row.ReservedBytes, ActivePackages: int(row.ActivePackages)}
		if grow {
			n, err := q.GrowQuotaHold(ctx, GrowQuotaHoldParams{Bytes: bytes, ID: r.ID})
			if err != nil {
				return err
			}
			if n == 0 {
				return app.Conflict("the upload's reservation is gone")
			}
		} else {
			obj, expires := holdColumns(r)
			if err := q.InsertQuotaHold(ctx, InsertQuotaHoldParams{ID: r.ID, UserID: r.UserID, Bytes: bytes,
				TusUploadID: r.Hold.TusUploadID, ObjectKey: obj, ExpiresAt: expires}); err != nil {
				return err
			}
		}
		ok = true
		return nil
	})
	return u, total, ok, err
}

// holdColumns are a new hold's object key and expiry columns: the key when the hold is an
// object's (nil otherwise), and an expiry only for a hold tied to neither a tus upload nor
// an object, which nothing else would ever give back.
func holdColumns(r policies.Reservation) (obj *string, expires *time.Time) {
	if r.Hold.ObjectKey != "" {
		obj = &r.Hold.ObjectKey
	}
	if r.Hold.TusUploadID == nil && obj == nil {
		expires = &r.ExpiresAt
	}
	return obj, expires
}

// reserveAlone is Reserve without a storage cap: one statement, no transaction.
func (s *Store) reserveAlone(ctx context.Context, r policies.Reservation, bytes int64, quota *int64, grow bool) (policies.Usage, int64, bool, error) {
	var (
		uid, used, reserved int64
		active              int32
		err                 error
	)
	if grow {
		var row ReserveGrowHoldRow
		row, err = s.q.ReserveGrowHold(ctx, ReserveGrowHoldParams{Bytes: bytes, UserID: r.UserID, ID: r.ID, Quota: quota})
		uid, used, reserved, active = row.UserID, row.UsedBytes, row.ReservedBytes, row.ActivePackages
	} else {
		obj, expires := holdColumns(r)
		var row ReserveNewHoldRow
		row, err = s.q.ReserveNewHold(ctx, ReserveNewHoldParams{Bytes: bytes, UserID: r.UserID, ID: r.ID, Quota: quota,
			TusUploadID: r.Hold.TusUploadID, ObjectKey: obj, ExpiresAt: expires})
		uid, used, reserved, active = row.UserID, row.UsedBytes, row.ReservedBytes, row.ActivePackages
	}
	if errors.Is(err, pgx.ErrNoRows) {
		cur, err := s.Usage(ctx, r.UserID)
		if err == nil && grow {
			if exists, xerr := s.holdExists(ctx, r.ID); xerr == nil && !exists {
				return policies.Usage{}, 0, false, app.Conflict("the upload's reservation is gone")
			}
		}
		return cur, 0, false, err
	}
	if err != nil {
		return policies.Usage{}, 0, false, err
	}
	return policies.Usage{UserID: uid, UsedBytes: used, ReservedBytes: reserved, ActivePackages: int(active)}, 0, true, nil
}

// holdExists reports whether the hold id is still there.
func (s *Store) holdExists(ctx context.Context, id uuid.UUID) (bool, error) {
	return s.q.QuotaHoldExists(ctx, id)
}

// AttachHold ties a hold to its resumable upload.
func (s *Store) AttachHold(ctx context.Context, id, tusUploadID uuid.UUID) error {
	return s.q.AttachQuotaHold(ctx, AttachQuotaHoldParams{ID: id, TusUploadID: &tusUploadID})
}

// ReleaseHold deletes a hold; its trigger gives the bytes back.
func (s *Store) ReleaseHold(ctx context.Context, id uuid.UUID) error {
	return s.q.DeleteQuotaHold(ctx, id)
}

// SweepHolds deletes the holds past their expiry.
func (s *Store) SweepHolds(ctx context.Context) (int64, error) { return s.q.SweepQuotaHolds(ctx) }

// MarkNotified sets or clears the user's 90 % mark (see policies.Store).
func (s *Store) MarkNotified(ctx context.Context, userID int64, nearlyFull bool, detail string) (bool, error) {
	due, err := s.q.MarkUsageNotified(ctx, MarkUsageNotifiedParams{NearlyFull: nearlyFull, UserID: userID, Detail: detail})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return due, err
}

func toGroup(id int64, name string, raw []byte, oidc []string, members []int64, created, updated time.Time) (policies.Group, error) {
	g := policies.Group{ID: id, Name: name, OIDCGroups: orEmpty(oidc), Members: members, CreatedAt: created, UpdatedAt: updated}
	if g.Members == nil {
		g.Members = []int64{}
	}
	if err := json.Unmarshal(raw, &g.Policy); err != nil {
		return policies.Group{}, fmt.Errorf("group %d policy: %w", id, err)
	}
	return g, nil
}

func groupErr(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqldb.UniqueViolation {
		return app.Conflict("a group with that name exists")
	}
	return err
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// LockCreations holds the user's package creations (a session advisory lock, on a
// connection of its own) until unlock is called, across gateway instances. It waits
// without holding a connection, trying again every few milliseconds, so waiters never
// starve the holder of connections; ctx bounds the wait.
func (s *Store) LockCreations(ctx context.Context, userID int64) (unlock func(), err error) {
	for wait := time.Millisecond; ; wait = min(wait*2, 50*time.Millisecond) {
		conn, err := s.sql.Pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		q := New(conn)
		ok, err := q.TryLockUserCreations(ctx, userID)
		if err != nil {
			conn.Release()
			return nil, err
		}
		if ok {
			return func() {
				if err := q.UnlockUserCreations(context.WithoutCancel(ctx), userID); err != nil {
					// A connection that may still hold the lock is closed, not reused.
					_ = conn.Conn().Close(context.WithoutCancel(ctx))
				}
				conn.Release()
			}, nil
		}
		conn.Release()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}
