package identitydb_test

import (
	"context"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/store/identitydb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/storetest"
)

// TestTouchTokens: one call writes the last use of every token of the batch (the two
// arrays zipped in order, whatever order the uses come in), and never moves a
// last_used_at back.
func TestTouchTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	user := storetest.InsertUser(t, pool, "u@example.com", "U")
	db := identitydb.NewStore(sqldb.NewDB(pool))
	var ids []int64
	for _, name := range []string{"a", "b", "c"} {
		tok, err := db.CreateToken(ctx, app.NewToken{UserID: user, Name: name, Prefix: name, Hash: []byte(name)}, identity.AccountChange{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tok.ID)
	}
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	lastUsed := func() map[int64]*time.Time {
		t.Helper()
		toks, err := db.ListTokens(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]*time.Time{}
		for _, tok := range toks {
			out[tok.ID] = tok.LastUsedAt
		}
		return out
	}
	check := func(step string, want map[int64]*time.Time) {
		t.Helper()
		got := lastUsed()
		for id, w := range want {
			g := got[id]
			if (g == nil) != (w == nil) || (g != nil && !g.Equal(*w)) {
				t.Errorf("%s: token %d last used %v, want %v", step, id, g, w)
			}
		}
	}
	at := func(d time.Duration) *time.Time { x := base.Add(d); return &x }

	// Out of id order, and the third token untouched.
	if err := db.TouchTokens(ctx, []identity.TokenUse{{TokenID: ids[1], At: *at(2 * time.Second)}, {TokenID: ids[0], At: *at(time.Second)}}); err != nil {
		t.Fatal(err)
	}
	check("first batch", map[int64]*time.Time{ids[0]: at(time.Second), ids[1]: at(2 * time.Second), ids[2]: nil})

	// An older use moves nothing back; a newer one moves on.
	if err := db.TouchTokens(ctx, []identity.TokenUse{{TokenID: ids[0], At: *at(-time.Hour)}, {TokenID: ids[1], At: *at(time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	check("second batch", map[int64]*time.Time{ids[0]: at(time.Second), ids[1]: at(time.Minute), ids[2]: nil})
}
