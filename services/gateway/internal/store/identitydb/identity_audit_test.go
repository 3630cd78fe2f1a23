package identitydb_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/store/identitydb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/storetest"
)

// The rechecks of sessions begun through the provider: gateway instances claiming due
// sessions at once each get different ones, every due session once per interval, and
// never a password session, one not due, or one that ended.
func TestClaimDueOIDCSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	db := identitydb.NewStore(sqldb.NewDB(pool))
	user := storetest.InsertUser(t, pool, "r@example.com", "R")
	now := time.Now().Truncate(time.Microsecond)
	add := func(i int, o *identity.SessionOIDC, expires time.Time) {
		t.Helper()
		s := identity.Session{IDHash: []byte(fmt.Sprintf("session-%03d", i)), UserID: user, CreatedAt: now, LastSeenAt: now, ExpiresAt: expires, OIDC: o}
		if err := db.CreateSession(ctx, s, identity.AccountChange{}); err != nil {
			t.Fatal(err)
		}
	}
	const due = 120
	for i := range due {
		add(i, &identity.SessionOIDC{Issuer: "https://id", Subject: "s", SealedRefresh: "sbx1:x", CheckAt: now.Add(-time.Second)}, now.Add(time.Hour))
	}
	add(due, nil, now.Add(time.Hour))                                                                                            // a password session
	add(due+1, &identity.SessionOIDC{Issuer: "https://id", Subject: "s", CheckAt: now.Add(time.Hour)}, now.Add(2*time.Hour))     // not due
	add(due+2, &identity.SessionOIDC{Issuer: "https://id", Subject: "s", CheckAt: now.Add(-time.Second)}, now.Add(-time.Minute)) // ended

	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for {
				got, err := db.ClaimDueOIDCSessions(ctx, now, now.Add(time.Minute), 7)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, s := range got {
					seen[string(s.IDHash)]++
					if s.OIDC == nil || s.OIDC.Subject != "s" || !s.OIDC.CheckAt.Equal(now.Add(time.Minute)) {
						t.Errorf("claimed %+v", s.OIDC)
					}
				}
				mu.Unlock()
				if len(got) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != due {
		t.Fatalf("%d sessions claimed, want %d", len(seen), due)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s claimed %d times", id, n)
		}
	}
}

// Ending a user's sessions from one identity leaves their other sessions, and its
// audit entry is written with it; unlinking refuses a user without a password.
func TestEndAndUnlinkOIDC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	db := identitydb.NewStore(sqldb.NewDB(pool))
	u, err := db.CreateOIDCUser(ctx, app.NewUser{Email: "u@example.com", Name: "U", Role: app.RoleRegular}, "https://id", "s")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, o := range []*identity.SessionOIDC{{Issuer: "https://id", Subject: "s", CheckAt: now}, nil, {Issuer: "https://other", Subject: "s", CheckAt: now}} {
		s := identity.Session{IDHash: []byte{byte(i)}, UserID: u.ID, CreatedAt: now, LastSeenAt: now, ExpiresAt: now.Add(time.Hour), OIDC: o}
		if err := db.CreateSession(ctx, s, identity.AccountChange{}); err != nil {
			t.Fatal(err)
		}
	}
	ch := identity.AccountChange{Audit: []app.AuditEntry{identity.System.Audit(identity.ActionSessionEnded, "test")}}
	if err := db.EndOIDCSessions(ctx, u.ID, "https://id", "s", ch); err != nil {
		t.Fatal(err)
	}
	var sessions, audited int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM web_sessions WHERE user_id = $1`, u.ID).Scan(&sessions)
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'session.ended'`).Scan(&audited)
	if sessions != 2 || audited != 1 {
		t.Fatalf("%d sessions left (want 2), %d audit entries (want 1)", sessions, audited)
	}
	if _, err := db.UnlinkUserOIDC(ctx, u.ID, "https://id", "s", ch); !errors.Is(err, app.ErrConflict) {
		t.Fatalf("unlink without a password: %v, want conflict", err)
	}
	if got, _ := db.GetUser(ctx, u.ID); got.OIDCSubject != "s" {
		t.Fatalf("unlinked: %+v", got)
	}
	if _ = pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'session.ended'`).Scan(&audited); audited != 1 {
		t.Fatalf("a refused unlink wrote its audit entry: %d", audited)
	}
}
