package webhookadmindb_test

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/shipfile/shipfile/pkg/secretbox"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/storetest"
	"github.com/shipfile/shipfile/services/gateway/internal/store/webhookadmindb"
)

// TestResealWebhookSecrets: secrets stored in clear (before encryption) or under the
// previous key are sealed under the current key at start, by several instances at once,
// and a second pass changes nothing; a secret under an unknown key is left and reported.
func TestResealWebhookSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	key := func(b byte) []byte { return bytes.Repeat([]byte{b}, secretbox.KeySize) }
	mustRing := func(cur, prev []byte) *secretbox.Keyring {
		r, err := secretbox.New(cur, prev)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	oldRing, ring, strangerRing := mustRing(key(1), nil), mustRing(key(2), key(1)), mustRing(key(9), nil)
	seal := func(r *secretbox.Keyring, s string) string {
		v, err := r.Seal(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	insert := func(secret string, previous *string) int64 {
		var id int64
		if err := pool.QueryRow(ctx, `INSERT INTO webhook_subscriptions (url, events, secret, previous_secret, previous_secret_until)
			VALUES ('https://hooks.example.com/x', '{package.created}', $1, $2, CASE WHEN $2::text IS NULL THEN NULL ELSE now() END) RETURNING id`,
			secret, previous).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	prevPlain := "whsec_previous-in-clear"
	want := map[int64][2]string{} // id → plaintext secret, previous
	want[insert("whsec_plain", nil)] = [2]string{"whsec_plain", ""}
	want[insert("whsec_plain2", &prevPlain)] = [2]string{"whsec_plain2", prevPlain}
	prevOld := seal(oldRing, "whsec_prev-old")
	want[insert(seal(oldRing, "whsec_old"), &prevOld)] = [2]string{"whsec_old", "whsec_prev-old"}
	current := seal(ring, "whsec_current")
	currentID := insert(current, nil)
	want[currentID] = [2]string{"whsec_current", ""}
	for i := range 600 { // more than one page
		s := "whsec_bulk" + string(rune('a'+i%26))
		want[insert(s, nil)] = [2]string{s, ""}
	}
	strangerID := insert(seal(strangerRing, "whsec_stranger"), nil)

	db := webhookadmindb.NewStore(sqldb.NewDB(pool))
	var wg sync.WaitGroup
	reports := make([]webhookadmindb.ResealReport, 3)
	errs := make([]error, 3)
	for i := range reports {
		wg.Go(func() { reports[i], errs[i] = db.ResealWebhookSecrets(ctx, ring) })
	}
	wg.Wait()
	resealed := 0
	for i, rep := range reports {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		resealed += rep.Resealed
		if !slices.Equal(rep.Unknown, []int64{strangerID}) {
			t.Fatalf("unknown = %v, want [%d]", rep.Unknown, strangerID)
		}
	}
	if resealed != len(want)-1 {
		t.Fatalf("%d rows resealed by the three instances together, want %d (each row once)", resealed, len(want)-1)
	}

	rows, err := pool.Query(ctx, `SELECT id, secret, coalesce(previous_secret, '') FROM webhook_subscriptions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var secret, previous string
		if err := rows.Scan(&id, &secret, &previous); err != nil {
			t.Fatal(err)
		}
		if id == strangerID {
			continue
		}
		if !ring.Current(secret) || (previous != "" && !ring.Current(previous)) {
			t.Fatalf("subscription %d is not sealed under the current key", id)
		}
		if id == currentID && secret != current {
			t.Fatal("a secret already under the current key was sealed again")
		}
		s, err1 := ring.Open(secret)
		p := ""
		var err2 error
		if previous != "" {
			p, err2 = ring.Open(previous)
		}
		if err1 != nil || err2 != nil || [2]string{s, p} != want[id] {
			t.Fatalf("subscription %d opens to other secrets than it had (%v %v)", id, err1, err2)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	again, err := db.ResealWebhookSecrets(ctx, ring)
	if err != nil || again.Resealed != 0 {
		t.Fatalf("a second pass resealed %d rows (%v), want 0", again.Resealed, err)
	}
}
