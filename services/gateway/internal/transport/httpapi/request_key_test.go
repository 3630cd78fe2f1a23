package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/services/gateway/internal/agetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// TestEncryptedRequestKeepsItsKey: an encrypted file request keeps the public key it
// was created with. After the owner replaces the key, the request's link (the API's
// answer and the request page) still gives the old key, to a request finalized after
// the change too; a request created after the change gets the new key.
func TestEncryptedRequestKeepsItsKey(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	setKey := func() string {
		t.Helper()
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		pub := id.Recipient().String()
		r := a.do("PUT", "/api/v1/me/key", token, map[string]any{"public_key": pub, "sealed_identity": agetest.SealWithPassphrase(t, id, "a passphrase of the owner")})
		expect(t, r, http.StatusOK)
		return pub
	}
	request := func() string {
		t.Helper()
		p := a.createPackage(token, map[string]any{"title": "Send me the contract", "recipient_email": "carol@example.com", "direction": "inbound", "encryption": "age"})
		return p["id"].(string)
	}
	finalize := func(id string) string {
		t.Helper()
		r := a.do("POST", "/api/v1/packages/"+id+"/finalize", token, nil)
		expect(t, r, http.StatusOK)
		return linkToken(t, r.json(t)["magic_link"])
	}
	// gives checks the key both the link's answer and the request page hand out.
	gives := func(link, want, when string) {
		t.Helper()
		r := a.do("GET", "/api/v1/links/"+link, "", nil)
		expect(t, r, http.StatusOK)
		if got := r.json(t)["public_key"]; got != want {
			t.Errorf("%s: the link's public_key = %v, want %s", when, got, want)
		}
		page := a.do("GET", "/p/"+link, "", nil)
		expect(t, page, http.StatusOK)
		if attr := `data-public-key="` + want + `"`; !strings.Contains(string(page.body), attr) {
			t.Errorf("%s: the request page has no %s", when, attr)
		}
	}

	first := setKey()
	open := finalize(request())
	draft := request()
	gives(open, first, "before the change")

	second := setKey()
	gives(open, first, "an open request after the key changed")
	gives(finalize(draft), first, "a draft of the old key finalized after the change")
	gives(finalize(request()), second, "a request created after the change")

	// The row holds the key, whatever the owner's key is now.
	var n int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM packages WHERE public_key = $1`, first).Scan(&n); err != nil || n != 2 {
		t.Fatalf("packages with the first key = %d (%v), want 2", n, err)
	}
}

// TestRequestKeyMigration: 00030 gives every encrypted file request that takes uploads
// (draft or active) its owner's current key, and no other package a key.
func TestRequestKeyMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	if err := migrations.UpTo(ctx, url, 29); err != nil {
		t.Fatal(err)
	}
	pool, err := database.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	user := func(email string, key string) int64 {
		t.Helper()
		var id int64
		if err := pool.QueryRow(ctx, `INSERT INTO users (email, name, role) VALUES ($1, 'Owner', 'regular') RETURNING id`, email).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if key != "" {
			if _, err := pool.Exec(ctx, `INSERT INTO user_keys (user_id, public_key, sealed_identity) VALUES ($1, $2, 'sealed')`, id, key); err != nil {
				t.Fatal(err)
			}
		}
		return id
	}
	const key = "age1qyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqs3290gq"
	owner, keyless := user("owner@example.com", key), user("keyless@example.com", "")
	now := time.Now().UTC()
	mk := func(owner int64, state, direction, encryption string) uuid.UUID {
		t.Helper()
		id := uuid.New()
		expires := now.Add(24 * time.Hour)
		if state == "expired" {
			expires = now.Add(-time.Hour)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO packages (id, owner_user_id, title, recipient_email, recipient_name, direction, state,
			ttl_days, expires_at, encryption) VALUES ($1, $2, 'Old package', 'bob@example.com', 'Bob', $3, $4, 7, $5, $6)`,
			id, owner, direction, state, expires, encryption); err != nil {
			t.Fatal(err)
		}
		return id
	}
	want := map[uuid.UUID]string{
		mk(owner, "active", "inbound", "age"):   key,
		mk(owner, "draft", "inbound", "age"):    key,
		mk(owner, "revoked", "inbound", "age"):  "",
		mk(owner, "expired", "inbound", "age"):  "",
		mk(owner, "active", "outbound", "age"):  "",
		mk(owner, "active", "inbound", "none"):  "",
		mk(keyless, "active", "inbound", "age"): "",
	}
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	for id, k := range want {
		var got *string
		if err := pool.QueryRow(ctx, `SELECT public_key FROM packages WHERE id = $1`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if (got == nil) != (k == "") || (got != nil && *got != k) {
			t.Errorf("package %s: public_key = %v, want %q", id, got, k)
		}
	}
	// Only an encrypted file request holds a key.
	if _, err := pool.Exec(ctx, `UPDATE packages SET public_key = $1 WHERE direction = 'outbound'`, key); err == nil {
		t.Fatal("an outbound package took a public key")
	}
}
