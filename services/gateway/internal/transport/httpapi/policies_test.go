package httpapi_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

// setDefaultPolicy sets the default policy through the admin API.
func (a *testAPI) setDefaultPolicy(admin string, pol map[string]any) {
	a.t.Helper()
	expect(a.t, a.do("PUT", "/api/v1/admin/policies/default", admin, pol), http.StatusOK)
}

// usage returns the caller's GET /api/v1/me/usage.
func (a *testAPI) usage(token string) map[string]any {
	a.t.Helper()
	r := a.do("GET", "/api/v1/me/usage", token, nil)
	expect(a.t, r, http.StatusOK)
	return r.json(a.t)
}

// wantDetail fails unless r has status want and its detail holds every part.
func wantDetail(t *testing.T, r response, want int, parts ...string) {
	t.Helper()
	expect(t, r, want)
	d := r.json(t)["detail"].(string)
	for _, p := range parts {
		if !strings.Contains(d, p) {
			t.Fatalf("detail %q, want it to name %q", d, p)
		}
	}
}

func TestPolicyAdminAPI(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	bob, bobToken := a.user("bob@example.com", app.RoleRegular)

	t.Run("the default policy has no limit out of the box", func(t *testing.T) {
		r := a.do("GET", "/api/v1/admin/policies/default", admin, nil)
		expect(t, r, http.StatusOK)
		for k, v := range r.json(t) {
			if v != nil {
				t.Fatalf("default policy %s = %v, want null", k, v)
			}
		}
		u := a.usage(bobToken)
		if u["quota_bytes"] != nil || u["used_bytes"] != float64(0) || u["reserved_bytes"] != float64(0) || u["active_packages"] != float64(0) {
			t.Fatalf("usage = %v", u)
		}
	})
	t.Run("regular users may not", func(t *testing.T) {
		expect(t, a.do("GET", "/api/v1/admin/groups", bobToken, nil), http.StatusForbidden)
		expect(t, a.do("PUT", "/api/v1/admin/policies/default", bobToken, map[string]any{}), http.StatusForbidden)
		expect(t, a.do("GET", "/api/v1/admin/usage", bobToken, nil), http.StatusForbidden)
	})
	t.Run("invalid", func(t *testing.T) {
		expect(t, a.do("POST", "/api/v1/admin/groups", admin, map[string]any{"policy": map[string]any{}}), http.StatusUnprocessableEntity)
		expect(t, a.do("POST", "/api/v1/admin/groups", admin, map[string]any{"name": "x", "policy": map[string]any{"max_ttl_days": 0}}), http.StatusUnprocessableEntity)
		expect(t, a.do("POST", "/api/v1/admin/groups", admin, map[string]any{"name": "x", "policy": map[string]any{"bogus": 1}}), http.StatusUnprocessableEntity)
		expect(t, a.do("PUT", "/api/v1/admin/policies/default", admin, map[string]any{"storage_quota_bytes": -1}), http.StatusUnprocessableEntity)
	})

	r := a.do("POST", "/api/v1/admin/groups", admin, map[string]any{
		"name": "contractors", "policy": map[string]any{"storage_quota_bytes": 5000, "max_ttl_days": 3}, "oidc_groups": []string{"ext"}})
	expect(t, r, http.StatusCreated)
	g := r.json(t)
	gid := strconv.FormatInt(int64(g["id"].(float64)), 10)
	expect(t, a.do("POST", "/api/v1/admin/groups", admin, map[string]any{"name": "Contractors"}), http.StatusConflict)

	a.setDefaultPolicy(admin, map[string]any{"storage_quota_bytes": 1000, "max_ttl_days": 30})
	if u := a.usage(bobToken); u["quota_bytes"] != float64(1000) {
		t.Fatalf("quota of a user in no group = %v, want the default's 1000", u["quota_bytes"])
	}
	member := "/api/v1/admin/groups/" + gid + "/members/" + strconv.FormatInt(bob.ID, 10)
	expect(t, a.do("PUT", member, admin, nil), http.StatusNoContent)
	expect(t, a.do("PUT", "/api/v1/admin/groups/"+gid+"/members/999999", admin, nil), http.StatusNotFound)
	u := a.usage(bobToken)
	if u["quota_bytes"] != float64(5000) || u["policy"].(map[string]any)["max_ttl_days"] != float64(3) {
		t.Fatalf("usage of a member = %v, want the group's policy", u)
	}
	got := a.do("GET", "/api/v1/admin/groups/"+gid, admin, nil)
	expect(t, got, http.StatusOK)
	if m := got.json(t)["members"].([]any); len(m) != 1 || m[0] != float64(bob.ID) {
		t.Fatalf("members = %v", m)
	}

	// A second group: limit by limit the most generous.
	r = a.do("POST", "/api/v1/admin/groups", admin, map[string]any{"name": "staff", "policy": map[string]any{"storage_quota_bytes": 2000, "max_ttl_days": 14}})
	expect(t, r, http.StatusCreated)
	staff := strconv.FormatInt(int64(r.json(t)["id"].(float64)), 10)
	expect(t, a.do("PUT", "/api/v1/admin/groups/"+staff+"/members/"+strconv.FormatInt(bob.ID, 10), admin, nil), http.StatusNoContent)
	if u := a.usage(bobToken); u["quota_bytes"] != float64(5000) || u["policy"].(map[string]any)["max_ttl_days"] != float64(14) {
		t.Fatalf("usage in two groups = %v, want quota 5000 and max_ttl_days 14", u)
	}
	p := a.do("PATCH", "/api/v1/admin/groups/"+gid, admin, map[string]any{"policy": map[string]any{"storage_quota_bytes": nil}})
	expect(t, p, http.StatusOK)
	if u := a.usage(bobToken); u["quota_bytes"] != nil {
		t.Fatalf("quota with a group of no quota = %v, want null", u["quota_bytes"])
	}
	list := a.do("GET", "/api/v1/admin/groups", admin, nil)
	expect(t, list, http.StatusOK)
	if n := len(list.json(t)["items"].([]any)); n != 2 {
		t.Fatalf("%d groups, want 2", n)
	}
	expect(t, a.do("DELETE", member, admin, nil), http.StatusNoContent)
	expect(t, a.do("DELETE", member, admin, nil), http.StatusNotFound)
	expect(t, a.do("DELETE", "/api/v1/admin/groups/"+staff, admin, nil), http.StatusNoContent)
	expect(t, a.do("GET", "/api/v1/admin/groups/"+staff, admin, nil), http.StatusNotFound)
	if u := a.usage(bobToken); u["quota_bytes"] != float64(1000) {
		t.Fatalf("quota after leaving every group = %v, want the default's", u["quota_bytes"])
	}

	// Usage per user, sorted, and as CSV.
	id := a.createPackage(bobToken, map[string]any{"title": "t", "recipient_email": "r@example.com"})["id"].(string)
	expect(t, a.upload("/api/v1/packages/"+id+"/files", bobToken, "a.txt", []byte("0123456789")), http.StatusCreated)
	us := a.do("GET", "/api/v1/admin/usage?sort=used_bytes", admin, nil)
	expect(t, us, http.StatusOK)
	first := us.json(t)["items"].([]any)[0].(map[string]any)
	if first["email"] != "bob@example.com" || first["used_bytes"] != float64(10) || first["active_packages"] != float64(1) || first["quota_bytes"] != float64(1000) {
		t.Fatalf("first usage row = %v, want bob's 10 bytes in 1 package", first)
	}
	expect(t, a.do("GET", "/api/v1/admin/usage?sort=nope", admin, nil), http.StatusUnprocessableEntity)
	c := a.do("GET", "/api/v1/admin/usage?format=csv&sort=email", admin, nil)
	if c.status != http.StatusOK || !strings.HasPrefix(c.header.Get("Content-Type"), "text/csv") {
		t.Fatalf("csv: %d %s", c.status, c.header.Get("Content-Type"))
	}
	rows, err := csv.NewReader(bytes.NewReader(c.body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0][1] != "email" || rows[1][1] != "admin@example.com" || rows[2][1] != "bob@example.com" || rows[2][3] != "10" || rows[2][5] != "1000" {
		t.Fatalf("csv rows = %v", rows)
	}
}

func TestPolicyRulesAtEveryEntrance(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	_, token := a.user("bob@corp.example", app.RoleRegular)
	a.setDefaultPolicy(admin, map[string]any{
		"max_ttl_days": 10, "max_downloads_ceiling": 5, "require_password": true,
		"allowed_recipient_domains": []string{"Partner.example"}, "may_request_files": false, "max_active_packages": 2,
	})
	ok := map[string]any{"title": "t", "recipient_email": "r@partner.example", "ttl_days": 10, "max_downloads": 5, "password": "long enough secret"}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for k, v := range ok {
			m[k] = v
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	t.Run("create", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			body  map[string]any
			parts []string
		}{
			{"ttl", with("ttl_days", 11), []string{"max_ttl_days", "11", "10"}},
			{"downloads unset", with("max_downloads", nil), []string{"max_downloads_ceiling", "5"}},
			{"downloads over", with("max_downloads", 6), []string{"max_downloads_ceiling", "6", "5"}},
			{"password", with("password", nil), []string{"require_password"}},
			{"domain", with("recipient_email", "r@elsewhere.example"), []string{"allowed_recipient_domains", "elsewhere.example"}},
			{"second recipient's domain", with("recipients", []map[string]any{{"email": "r@partner.example"}, {"email": "x@evil.example"}}), []string{"evil.example"}},
			{"request", with("direction", "inbound"), []string{"may_request_files"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantDetail(t, a.do("POST", "/api/v1/packages", token, tc.body), http.StatusUnprocessableEntity, tc.parts...)
			})
		}
	})
	first := a.createPackage(token, ok)["id"].(string)
	base := "/api/v1/packages/" + first
	t.Run("patch", func(t *testing.T) {
		wantDetail(t, a.do("PATCH", base, token, map[string]any{"max_downloads": 9}), http.StatusUnprocessableEntity, "max_downloads_ceiling")
		wantDetail(t, a.do("PATCH", base, token, map[string]any{"max_downloads": nil}), http.StatusUnprocessableEntity, "max_downloads_ceiling")
		wantDetail(t, a.do("PATCH", base, token, map[string]any{"password": nil}), http.StatusUnprocessableEntity, "require_password")
		wantDetail(t, a.do("PATCH", base, token, map[string]any{"recipients": []map[string]any{{"email": "x@evil.example"}}}), http.StatusUnprocessableEntity, "allowed_recipient_domains")
		far := time.Now().Add(20 * 24 * time.Hour).UTC().Format(time.RFC3339)
		wantDetail(t, a.do("PATCH", base, token, map[string]any{"expires_at": far}), http.StatusUnprocessableEntity, "max_ttl_days")
		expect(t, a.do("PATCH", base, token, map[string]any{"max_downloads": 3, "title": "fine"}), http.StatusOK)
	})
	expect(t, a.upload(base+"/files", token, "a.txt", []byte("a")), http.StatusCreated)
	t.Run("active packages", func(t *testing.T) {
		a.createPackage(token, ok)
		wantDetail(t, a.do("POST", "/api/v1/packages", token, ok), http.StatusUnprocessableEntity, "max_active_packages", "2 of 2")
	})
	t.Run("finalize under a policy tightened since", func(t *testing.T) {
		a.setDefaultPolicy(admin, map[string]any{"max_ttl_days": 5})
		wantDetail(t, a.do("POST", base+"/finalize", token, nil), http.StatusUnprocessableEntity, "max_ttl_days", "10", "5")
		a.setDefaultPolicy(admin, map[string]any{"allowed_recipient_domains": []string{"partner.example"}})
		expect(t, a.do("POST", base+"/finalize", token, nil), http.StatusOK)
	})
	t.Run("adding a recipient", func(t *testing.T) {
		wantDetail(t, a.do("POST", base+"/recipients", token, map[string]any{"email": "x@evil.example"}), http.StatusUnprocessableEntity, "allowed_recipient_domains")
		expect(t, a.do("POST", base+"/recipients", token, map[string]any{"email": "y@partner.example"}), http.StatusCreated)
	})
	t.Run("encryption", func(t *testing.T) {
		a.setDefaultPolicy(admin, map[string]any{"require_encryption": true})
		wantDetail(t, a.do("POST", "/api/v1/packages", token, map[string]any{"title": "t", "recipient_email": "r@x.example"}), http.StatusUnprocessableEntity, "require_encryption")
		a.createPackage(token, map[string]any{"title": "t", "recipient_email": "r@x.example", "encryption": "age"})
	})
}

func TestQuotaAtEveryUpload(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	_, token := a.user("bob@example.com", app.RoleRegular)
	a.setDefaultPolicy(admin, map[string]any{"storage_quota_bytes": 1000, "max_file_size": 800})
	id := a.createPackage(token, map[string]any{"title": "t", "recipient_email": "r@example.com"})["id"].(string)
	base := "/api/v1/packages/" + id

	t.Run("multipart", func(t *testing.T) {
		expect(t, a.upload(base+"/files", token, "a.txt", bytes.Repeat([]byte("a"), 600)), http.StatusCreated)
		wantDetail(t, a.upload(base+"/files", token, "b.txt", bytes.Repeat([]byte("b"), 500)), http.StatusRequestEntityTooLarge, "storage quota", "600 B of 1000 B used")
		wantDetail(t, a.upload(base+"/files", token, "c.txt", bytes.Repeat([]byte("c"), 900)), http.StatusRequestEntityTooLarge, "max_file_size")
		if u := a.usage(token); u["used_bytes"] != float64(600) || u["reserved_bytes"] != float64(0) {
			t.Fatalf("usage = %v, want 600 used and nothing held after the refusals", u)
		}
		if n := a.rowCount("files"); n != 1 {
			t.Fatalf("%d file rows, want 1", n)
		}
	})
	t.Run("tus creation", func(t *testing.T) {
		r := a.tusDo("POST", base+"/uploads", token, nil, "Upload-Length", "500", "Upload-Metadata", meta("big.bin"))
		wantDetail(t, r, http.StatusRequestEntityTooLarge, "storage quota", "this file needs 500 B")
		r = a.tusDo("POST", base+"/uploads", token, nil, "Upload-Length", "300", "Upload-Metadata", meta("ok.bin"))
		expect(t, r, http.StatusCreated)
		if u := a.usage(token); u["reserved_bytes"] != float64(300) {
			t.Fatalf("reserved = %v after a creation of 300, want 300", u["reserved_bytes"])
		}
		// Its reservation counts: a multipart upload of 200 no longer fits.
		wantDetail(t, a.upload(base+"/files", token, "d.txt", bytes.Repeat([]byte("d"), 200)), http.StatusRequestEntityTooLarge, "storage quota")
		url := r.header.Get("Location")
		expect(t, a.patch(url, token, 0, bytes.Repeat([]byte("x"), 100)), http.StatusNoContent)
		// Every PATCH checks the size limits as they stand.
		a.setDefaultPolicy(admin, map[string]any{"storage_quota_bytes": 1000, "max_file_size": 200})
		wantDetail(t, a.patch(url, token, 100, bytes.Repeat([]byte("x"), 200)), http.StatusRequestEntityTooLarge, "max_file_size")
		a.setDefaultPolicy(admin, map[string]any{"storage_quota_bytes": 1000, "max_file_size": 800})
		expect(t, a.patch(url, token, 100, bytes.Repeat([]byte("x"), 200)), http.StatusNoContent)
		if u := a.usage(token); u["used_bytes"] != float64(900) || u["reserved_bytes"] != float64(0) {
			t.Fatalf("usage after the upload completed = %v, want 900 used, 0 reserved", u)
		}
	})
	t.Run("an ended upload gives its reservation back", func(t *testing.T) {
		// Free room first: removing a file frees its bytes at once.
		files := a.packageFiles(token, id)
		for _, f := range files {
			if f["filename"] == "a.txt" {
				expect(t, a.do("DELETE", base+"/files/"+f["id"].(string), token, nil), http.StatusNoContent)
			}
		}
		if u := a.usage(token); u["used_bytes"] != float64(300) {
			t.Fatalf("used = %v after removing 600, want 300", u["used_bytes"])
		}
		r := a.tusDo("POST", base+"/uploads", token, nil, "Upload-Length", "700", "Upload-Metadata", meta("gone.bin"))
		expect(t, r, http.StatusCreated)
		expect(t, a.tusDo("DELETE", r.header.Get("Location"), token, nil), http.StatusNoContent)
		r = a.tusDo("POST", base+"/uploads", token, nil, "Upload-Length", "700", "Upload-Metadata", meta("expired.bin"))
		expect(t, r, http.StatusCreated)
		if u := a.usage(token); u["reserved_bytes"] != float64(700) {
			t.Fatalf("reserved = %v, want 700", u["reserved_bytes"])
		}
		// Abandoned: past its expiry, the sweep ends it and its bytes go back.
		if _, err := a.pool.Exec(context.Background(), `UPDATE tus_uploads SET expires_at = now() - interval '1s'`); err != nil {
			t.Fatal(err)
		}
		if _, err := a.resumable.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		if u := a.usage(token); u["reserved_bytes"] != float64(0) {
			t.Fatalf("reserved = %v after the sweep, want 0", u["reserved_bytes"])
		}
	})
	t.Run("deleting the package frees its bytes", func(t *testing.T) {
		expect(t, a.do("DELETE", base, token, nil), http.StatusNoContent)
		if u := a.usage(token); u["used_bytes"] != float64(0) || u["active_packages"] != float64(0) {
			t.Fatalf("usage after delete = %v", u)
		}
	})
	t.Run("expiry frees its bytes", func(t *testing.T) {
		id := a.createPackage(token, map[string]any{"title": "t", "recipient_email": "r@example.com"})["id"].(string)
		expect(t, a.upload("/api/v1/packages/"+id+"/files", token, "a.txt", bytes.Repeat([]byte("a"), 100)), http.StatusCreated)
		if _, err := a.pool.Exec(context.Background(), `UPDATE packages SET state = 'expired' WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		if u := a.usage(token); u["used_bytes"] != float64(0) {
			t.Fatalf("used after expiry = %v, want 0", u["used_bytes"])
		}
	})
}

// TestQuotaRequestLinkCountsToOwner: files strangers upload through a request count
// to the owner's quota, and are refused past it.
func TestQuotaRequestLinkCountsToOwner(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	_, token := a.user("bob@example.com", app.RoleRegular)
	a.setDefaultPolicy(admin, map[string]any{"storage_quota_bytes": 1000})
	id := a.createPackage(token, map[string]any{"title": "send me", "recipient_email": "r@example.com", "direction": "inbound"})["id"].(string)
	fin := a.do("POST", "/api/v1/packages/"+id+"/finalize", token, nil)
	expect(t, fin, http.StatusOK)
	link := linkToken(t, fin.json(t)["magic_link"])
	expect(t, a.upload("/api/v1/links/"+link+"/files", "", "a.txt", bytes.Repeat([]byte("a"), 700)), http.StatusCreated)
	if u := a.usage(token); u["used_bytes"] != float64(700) {
		t.Fatalf("owner's used = %v after a stranger's 700, want 700", u["used_bytes"])
	}
	wantDetail(t, a.upload("/api/v1/links/"+link+"/files", "", "b.txt", bytes.Repeat([]byte("b"), 400)), http.StatusRequestEntityTooLarge, "storage quota")
	r := a.tusDo("POST", "/api/v1/links/"+link+"/uploads", "", nil, "Upload-Length", "400", "Upload-Metadata", meta("c.bin"))
	wantDetail(t, r, http.StatusRequestEntityTooLarge, "storage quota", "700 B of 1000 B used")
	r = a.tusDo("POST", "/api/v1/links/"+link+"/uploads", "", nil, "Upload-Length", "300", "Upload-Metadata", meta("d.bin"))
	expect(t, r, http.StatusCreated)
	expect(t, a.patch(r.header.Get("Location"), "", 0, bytes.Repeat([]byte("d"), 300)), http.StatusNoContent)
	if u := a.usage(token); u["used_bytes"] != float64(1000) || u["reserved_bytes"] != float64(0) {
		t.Fatalf("owner's usage = %v, want 1000 used", u)
	}
}

// TestQuotaParallelTusCreations: six creations at once whose lengths together pass
// the quota: those that fit start, the others are refused before their first byte.
func TestQuotaParallelTusCreations(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	_, token := a.user("bob@example.com", app.RoleRegular)
	a.setDefaultPolicy(admin, map[string]any{"storage_quota_bytes": 1000})
	id := a.createPackage(token, map[string]any{"title": "t", "recipient_email": "r@example.com"})["id"].(string)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		status = map[int]int{}
	)
	for i := range 6 {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", a.url+"/api/v1/packages/"+id+"/uploads", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Tus-Resumable", "1.0.0")
			req.Header.Set("Upload-Length", "300")
			req.Header.Set("Upload-Metadata", meta(fmt.Sprintf("f%d.bin", i)))
			resp, err := a.client(30 * time.Second).Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			status[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if status[http.StatusCreated] != 3 || status[http.StatusRequestEntityTooLarge] != 3 {
		t.Fatalf("answers %v, want 3 × 201 (900 of 1000 bytes) and 3 × 413", status)
	}
	if u := a.usage(token); u["reserved_bytes"] != float64(900) {
		t.Fatalf("reserved = %v, want 900", u["reserved_bytes"])
	}
}

// TestQuotaTwoGateways: two gateways on one database, racing uploads of one user,
// never hold more than the quota together.
func TestQuotaTwoGateways(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t, migrations.Version(), migrations.Up)
	a := newTestAPI(t, tusConfig(), onDatabase(url))
	b := newTestAPI(t, tusConfig(), onDatabase(url))
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	_, token := a.user("bob@example.com", app.RoleRegular)
	const quota, size, n = 2000, 600, 8
	a.setDefaultPolicy(admin, map[string]any{"storage_quota_bytes": quota})
	id := a.createPackage(token, map[string]any{"title": "t", "recipient_email": "r@example.com"})["id"].(string)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
	)
	for i := range n {
		gw := a
		if i%2 == 1 {
			gw = b
		}
		wg.Go(func() {
			var r response
			if i%4 < 2 {
				r = gw.upload("/api/v1/packages/"+id+"/files", token, fmt.Sprintf("m%d.bin", i), bytes.Repeat([]byte("m"), size))
			} else {
				r = gw.tusUpload("/api/v1/packages/"+id+"/uploads", token, meta(fmt.Sprintf("t%d.bin", i)), bytes.Repeat([]byte("t"), size))
			}
			switch r.status {
			case http.StatusCreated, http.StatusNoContent:
				mu.Lock()
				created++
				mu.Unlock()
			case http.StatusRequestEntityTooLarge:
			default:
				t.Errorf("upload %d: %d %s", i, r.status, r.body)
			}
		})
	}
	wg.Wait()
	u := a.usage(token)
	used := int(u["used_bytes"].(float64))
	if used > quota || used != created*size || created != quota/size {
		t.Fatalf("%d uploads of %d stored, used %d: want %d, within the quota of %d", created, size, used, quota/size, quota)
	}
	if u["reserved_bytes"] != float64(0) {
		t.Fatalf("reserved = %v after every upload ended, want 0", u["reserved_bytes"])
	}
}

// TestQuotaNoticeAndEvent: reaching 90 % of the quota queues one e-mail (an account
// notice) until usage falls below 90 % again; a refusal writes quota.exceeded to the
// outbox.
func TestQuotaNoticeAndEvent(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, tusConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	bob, token := a.user("bob@example.com", app.RoleRegular)
	a.setDefaultPolicy(admin, map[string]any{"storage_quota_bytes": 1000})
	id := a.createPackage(token, map[string]any{"title": "t", "recipient_email": "r@example.com"})["id"].(string)
	base := "/api/v1/packages/" + id
	notices := func() []string {
		t.Helper()
		rows, err := a.pool.Query(context.Background(), `SELECT detail FROM account_notices WHERE user_id = $1 AND event = 'quota_90' ORDER BY id`, bob.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var d string
			if err := rows.Scan(&d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
		return out
	}
	expect(t, a.upload(base+"/files", token, "a.txt", bytes.Repeat([]byte("a"), 500)), http.StatusCreated)
	if n := notices(); len(n) != 0 {
		t.Fatalf("notices at 50 %%: %v", n)
	}
	r := a.tusUpload(base+"/uploads", token, meta("b.bin"), bytes.Repeat([]byte("b"), 420))
	expect(t, r, http.StatusNoContent)
	if n := notices(); len(n) != 1 || n[0] != "920 B of 1000 B" {
		t.Fatalf("notices at 92 %%: %v, want one naming 920 B of 1000 B", n)
	}
	expect(t, a.upload(base+"/files", token, "c.txt", []byte("c")), http.StatusCreated)
	if n := notices(); len(n) != 1 {
		t.Fatalf("notices after another upload above 90 %%: %v, want still one", n)
	}
	var outbox int
	count := func() int {
		t.Helper()
		if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE subject = 'shipfile.events.quota.exceeded'`).Scan(&outbox); err != nil {
			t.Fatal(err)
		}
		return outbox
	}
	if count() != 0 {
		t.Fatal("quota.exceeded written before any refusal")
	}
	expect(t, a.upload(base+"/files", token, "d.txt", bytes.Repeat([]byte("d"), 200)), http.StatusRequestEntityTooLarge)
	if count() != 1 {
		t.Fatalf("%d quota.exceeded events after one refusal, want 1", outbox)
	}
	// Below 90 % the mark goes; the next time past it, a new notice.
	for _, f := range a.packageFiles(token, id) {
		if f["filename"] == "a.txt" {
			expect(t, a.do("DELETE", base+"/files/"+f["id"].(string), token, nil), http.StatusNoContent)
		}
	}
	expect(t, a.upload(base+"/files", token, "e.txt", []byte("e")), http.StatusCreated)
	expect(t, a.upload(base+"/files", token, "f.txt", bytes.Repeat([]byte("f"), 480)), http.StatusCreated)
	if n := notices(); len(n) != 2 || n[1] != "902 B of 1000 B" {
		t.Fatalf("notices = %v, want a second one naming 902 B of 1000 B", n)
	}
}

// TestActivePackagesParallel: creations at once, through two gateways, never open
// more packages than max_active_packages.
func TestActivePackagesParallel(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t, migrations.Version(), migrations.Up)
	a := newTestAPI(t, defaultConfig(), onDatabase(url))
	b := newTestAPI(t, defaultConfig(), onDatabase(url))
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	_, token := a.user("bob@example.com", app.RoleRegular)
	a.setDefaultPolicy(admin, map[string]any{"max_active_packages": 3})
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		status = map[int]int{}
	)
	for i := range 8 {
		gw := a
		if i%2 == 1 {
			gw = b
		}
		wg.Go(func() {
			buf := strings.NewReader(`{"title":"t","recipient_email":"r@example.com"}`)
			req, _ := http.NewRequest("POST", gw.url+"/api/v1/packages", buf)
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := gw.client(30 * time.Second).Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			status[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if status[http.StatusCreated] != 3 || status[http.StatusUnprocessableEntity] != 5 {
		t.Fatalf("answers %v, want 3 × 201 and 5 × 422", status)
	}
	if u := a.usage(token); u["active_packages"] != float64(3) {
		t.Fatalf("active packages = %v, want 3", u["active_packages"])
	}
}
