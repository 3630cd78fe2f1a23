package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// oldLink is a package as a gateway before 00019 left it, with its link's token.
type oldLink struct {
	id, token, state, direction string
	hash                        []byte
}

// TestRecipientsMigration: a database with packages in every state, written by the
// schema before 00019 (the link a column of the package), takes 00019 without a user
// noticing: every link handed out keeps working or stays dead as it was, with its
// counts, its download budget and its grants; a draft finalizes as before.
func TestRecipientsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	if err := migrations.UpTo(ctx, url, 18); err != nil {
		t.Fatal(err)
	}
	pool, err := database.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var owner int64
	if err := pool.QueryRow(ctx, `INSERT INTO users (email, name, role) VALUES ('owner@example.com', 'Owner', 'regular') RETURNING id`).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	pw, err := app.NewHasher(1, time.Second).Hash(ctx, "open sesame")
	if err != nil {
		t.Fatal(err)
	}
	mk := func(state, direction string, withLink bool, password *string, maxDownloads *int) oldLink {
		t.Helper()
		l := oldLink{id: uuid.NewString(), state: state, direction: direction}
		var finalized, revoked *time.Time
		expires := now.Add(24 * time.Hour)
		if withLink {
			b := make([]byte, 32)
			_, _ = rand.Read(b)
			l.token = base64.RawURLEncoding.EncodeToString(b)
			sum := sha256.Sum256([]byte(l.token))
			l.hash = sum[:]
			finalized = &now
		}
		if state == "revoked" {
			revoked = &now
		}
		if state == "expired" {
			expires = now.Add(-time.Hour)
		}
		_, err := pool.Exec(ctx, `INSERT INTO packages (id, owner_user_id, title, recipient_email, recipient_name, direction, state,
			ttl_days, expires_at, finalized_at, revoked_at, link_hash, link_use_count, link_last_used_at, password_hash, max_downloads)
			VALUES ($1, $2, 'Old package', 'bob@example.com', 'Bob', $4, $3, 7, $5, $6, $7, $8, 3, $6, $9, $10)`,
			l.id, owner, state, direction, expires, finalized, revoked, l.hash, password, maxDownloads)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	two := 2
	draft := mk("draft", "outbound", false, nil, nil)
	active := mk("active", "outbound", true, nil, &two)
	protected := mk("active", "inbound", true, &pw, nil)
	revoked := mk("revoked", "outbound", true, nil, nil)
	expired := mk("expired", "outbound", true, nil, nil)
	expiredDraft := mk("expired", "outbound", false, nil, nil)

	// The active package's file was downloaded once through its link (00013's budget)
	// and its inbound sibling got a recipient upload.
	fileID, content := uuid.NewString(), []byte("old bytes")
	if _, err := pool.Exec(ctx, `INSERT INTO files (id, package_id, filename, size, content_type, sha256, object_key, uploaded_by, download_count)
		VALUES ($1, $2, 'old.txt', $3, 'text/plain', 'x', $4, 'owner', 1)`, fileID, active.id, len(content), "packages/"+active.id+"/"+fileID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE packages SET file_count = 1, total_size = $2 WHERE id = $1`, active.id, len(content)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO link_budgets (file_id, link_hash, taken) VALUES ($1, $2, $3)`, fileID, active.hash, len(content)); err != nil {
		t.Fatal(err)
	}
	upID := uuid.NewString()
	if _, err := pool.Exec(ctx, `INSERT INTO files (id, package_id, filename, size, content_type, sha256, object_key, uploaded_by)
		VALUES ($1, $2, 'sent.txt', 1, 'text/plain', 'x', $3, 'recipient')`, upID, protected.id, "packages/"+protected.id+"/"+upID); err != nil {
		t.Fatal(err)
	}
	// A grant handed out before the migration.
	pid := uuid.MustParse(protected.id)
	grant, _ := links.NewGrant(app.Package{ID: pid, LinkHash: protected.hash, PasswordHash: pw}, time.Now())

	if err := migrations.Up(ctx, url); err != nil {
		t.Fatalf("00019 on a database with packages: %v", err)
	}
	a := newTestAPI(t, defaultConfig(), onDatabase(url))
	if _, err := a.objects.Client.PutObject(ctx, a.objects.Bucket, "packages/"+active.id+"/"+fileID, bytes.NewReader(content), int64(len(content)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	_, token, err := a.identity.CreateToken(ctx, owner, "test", nil, identity.System)
	if err != nil {
		t.Fatal(err)
	}

	// The active link: its budget and its count came along (1 of 2 copies taken).
	f := a.linkFiles(active.token)["old.txt"]
	if f["download_count"] != float64(1) || f["downloads_left"] != float64(1) {
		t.Fatalf("migrated link's file: %v", f)
	}
	expect(t, a.do("GET", "/api/v1/links/"+active.token+"/files/"+fileID, "", nil), http.StatusOK)
	expect(t, a.do("GET", "/api/v1/links/"+active.token+"/files/"+fileID, "", nil), http.StatusGone)
	d := a.do("GET", "/api/v1/packages/"+active.id, token, nil).json(t)
	rs := d["recipients"].([]any)
	r0 := rs[0].(map[string]any)
	if len(rs) != 1 || r0["email"] != "bob@example.com" || r0["name"] != "Bob" || r0["link_state"] != "active" || r0["download_count"] != float64(2) {
		t.Fatalf("migrated recipient: %v", rs)
	}
	if d["link_use_count"].(float64) < 3 || d["link_last_used_at"] == nil {
		t.Fatalf("migrated use count: %v %v", d["link_use_count"], d["link_last_used_at"])
	}

	// The protected link: locked, its old grant still opens it, its password too; the
	// recipient's upload is theirs.
	expect(t, a.do("GET", "/api/v1/links/"+protected.token, "", nil), http.StatusUnauthorized)
	expect(t, a.do("GET", "/api/v1/links/"+protected.token, "", nil, "Shipfile-Link-Grant", grant), http.StatusOK)
	expect(t, a.unlock(protected.token, "open sesame"), http.StatusOK)
	pd := a.do("GET", "/api/v1/packages/"+protected.id, token, nil).json(t)
	rid := pd["recipients"].([]any)[0].(map[string]any)["id"]
	if up := pd["files"].([]any)[0].(map[string]any); up["recipient_id"] != rid || rid == nil {
		t.Fatalf("migrated recipient upload: %v (recipient %v)", up, rid)
	}

	// Dead links stay dead; the owner sees why.
	for _, l := range []oldLink{revoked, expired} {
		expect(t, a.do("GET", "/api/v1/links/"+l.token, "", nil), http.StatusGone)
	}
	want := map[string]string{draft.id: "none", revoked.id: "revoked", expiredDraft.id: "none", expired.id: "active"}
	for id, state := range want {
		p := a.do("GET", "/api/v1/packages/"+id, token, nil).json(t)
		if got := p["recipients"].([]any)[0].(map[string]any)["link_state"]; got != state {
			t.Fatalf("package %s (%v): link_state %v, want %s", id, p["state"], got, state)
		}
	}

	// The draft finalizes as before, with one link.
	expect(t, a.upload("/api/v1/packages/"+draft.id+"/files", token, "new.txt", []byte("new")), http.StatusCreated)
	r := a.do("POST", "/api/v1/packages/"+draft.id+"/finalize", token, nil)
	expect(t, r, http.StatusOK)
	fin := r.json(t)
	if links := fin["links"].([]any); len(links) != 1 {
		t.Fatalf("links = %v", links)
	}
	expect(t, a.do("GET", "/api/v1/links/"+linkToken(t, fin["magic_link"]), "", nil), http.StatusOK)
}
