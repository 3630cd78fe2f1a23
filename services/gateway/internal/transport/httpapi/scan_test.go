package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// setScan records a scanner's verdict on file fileID, as the scanner service does.
func (a *testAPI) setScan(fileID string, scan app.ScanState, signature string) {
	a.t.Helper()
	if _, err := a.pool.Exec(context.Background(),
		`UPDATE files SET scan = $2, scan_signature = $3, scanned_at = CASE WHEN $2 = 'pending' THEN NULL ELSE now() END WHERE id = $1`,
		fileID, string(scan), signature); err != nil {
		a.t.Fatal(err)
	}
}

// packageFiles returns the owner's view of package id's files by name.
func (a *testAPI) packageFiles(token, id string) map[string]map[string]any {
	a.t.Helper()
	r := a.do("GET", "/api/v1/packages/"+id, token, nil)
	expect(a.t, r, http.StatusOK)
	out := map[string]map[string]any{}
	for _, f := range r.json(a.t)["files"].([]any) {
		m := f.(map[string]any)
		out[m["filename"].(string)] = m
	}
	return out
}

// expectHeld checks a 409 of a download the malware scan holds back: {"detail", "scan"}
// with the file's state, the detail containing says, and Retry-After only while pending.
func expectHeld(t *testing.T, r response, scan app.ScanState, says string) {
	t.Helper()
	if r.status != http.StatusConflict {
		t.Fatalf("status = %d, want 409; body: %s", r.status, r.body)
	}
	m := r.json(t)
	d, _ := m["detail"].(string)
	if m["scan"] != string(scan) || len(m) != 2 || !strings.Contains(d, says) {
		t.Fatalf("body = %s, want {\"detail\": \"…%s…\", \"scan\": %q}", r.body, says, scan)
	}
	if ra := r.header.Get("Retry-After"); (ra != "") != (scan == app.ScanPending) {
		t.Fatalf("Retry-After = %q with scan %s: want one only while pending", ra, scan)
	}
}

// A file a stranger uploaded through a request link is held from the owner in block
// mode until it is clean or released: 409 with its scan state (and Retry-After while
// pending); the owner's own files never are.
func TestScanOwnerDownloadHeld(t *testing.T) {
	a := newTestAPI(t, defaultConfig(), withScanMode(app.ScanBlock))
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "Invoices", "recipient_email": "stranger@example.com", "direction": "inbound"})
	id := p["id"].(string)
	fin := a.do("POST", "/api/v1/packages/"+id+"/finalize", token, nil)
	expect(t, fin, http.StatusOK)
	link := linkToken(t, fin.json(t)["magic_link"])
	expect(t, a.upload("/api/v1/links/"+link+"/files", "", "invoice.pdf", []byte("X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR")), http.StatusCreated)
	expect(t, a.upload("/api/v1/links/"+link+"/files", "", "notes.txt", []byte("plain notes")), http.StatusCreated)
	files := a.packageFiles(token, id)
	invoice, notes := files["invoice.pdf"]["id"].(string), files["notes.txt"]["id"].(string)
	if files["invoice.pdf"]["scan"] != "pending" || files["invoice.pdf"]["scan_released_by"] != nil || files["invoice.pdf"]["scan_released_at"] != nil {
		t.Fatalf("new upload: %v, want pending and not released", files["invoice.pdf"])
	}
	content := func(fileID string) string { return "/api/v1/packages/" + id + "/files/" + fileID + "/content" }

	t.Run("pending", func(t *testing.T) {
		expectHeld(t, a.do("GET", content(invoice), token, nil), app.ScanPending, "being checked")
	})
	t.Run("unscannable", func(t *testing.T) {
		a.setScan(invoice, app.ScanUnscannable, "Heuristics.Encrypted.Zip")
		expectHeld(t, a.do("GET", content(invoice), token, nil), app.ScanUnscannable, "could not be checked")
		if f := a.packageFiles(token, id)["invoice.pdf"]; f["scan"] != "unscannable" || f["scan_signature"] != "Heuristics.Encrypted.Zip" {
			t.Fatalf("record = %v, want unscannable with clamd's answer", f)
		}
	})
	t.Run("error", func(t *testing.T) {
		a.setScan(notes, app.ScanError, "")
		expectHeld(t, a.do("GET", content(notes), token, nil), app.ScanError, "could not be checked")
	})
	t.Run("clean", func(t *testing.T) {
		a.setScan(notes, app.ScanClean, "")
		if r := a.do("GET", content(notes), token, nil); r.status != http.StatusOK || string(r.body) != "plain notes" {
			t.Fatalf("clean upload: %d %s", r.status, r.body)
		}
	})
	t.Run("infected stays gone", func(t *testing.T) {
		a.setScan(notes, app.ScanInfected, "Eicar-Test-Signature")
		expect(t, a.do("GET", content(notes), token, nil), http.StatusGone)
	})
}

// POST …/files/{file_id}/release: owner or admin, only an unscannable or failed file,
// audited in the file.release entry, recorded on the file; the file is then served in
// block mode, to the owner and through the link.
func TestScanRelease(t *testing.T) {
	a := newTestAPI(t, defaultConfig(), withScanMode(app.ScanBlock))
	owner, token := a.user("owner@example.com", app.RoleRegular)
	_, otherToken := a.user("other@example.com", app.RoleRegular)
	admin, adminToken := a.user("admin@example.com", app.RoleAdmin)
	id, link := a.sharedPackage(token, nil, "a.zip", "b.bin", "c.txt")
	files := a.packageFiles(token, id)
	zip, bin, txt := files["a.zip"]["id"].(string), files["b.bin"]["id"].(string), files["c.txt"]["id"].(string)
	release := func(fileID, tok string) response {
		return a.do("POST", "/api/v1/packages/"+id+"/files/"+fileID+"/release", tok, nil)
	}
	viaLink := func(fileID string) response { return a.do("GET", "/api/v1/links/"+link+"/files/"+fileID, "", nil) }
	released := func() int {
		return len(slices.DeleteFunc(a.auditActions(id), func(s string) bool { return s != "file.release" }))
	}

	// Pending in block mode: the link holds every file, with Retry-After.
	expectHeld(t, viaLink(zip), app.ScanPending, "being checked")
	a.setScan(zip, app.ScanUnscannable, "Heuristics.Encrypted.Zip")
	a.setScan(bin, app.ScanError, "")
	a.setScan(txt, app.ScanClean, "")

	t.Run("held through the link until released", func(t *testing.T) {
		expectHeld(t, viaLink(zip), app.ScanUnscannable, "could not be checked")
		expectHeld(t, viaLink(bin), app.ScanError, "could not be checked")
		if r := viaLink(txt); r.status != http.StatusOK {
			t.Fatalf("clean file: %d %s", r.status, r.body)
		}
		r := a.do("GET", "/api/v1/links/"+link+"/archive", "", nil)
		if r.status != http.StatusOK || r.header.Get("Shipfile-Archive-Omitted") != "2" {
			t.Fatalf("archive: %d, omitted %q, want 200 leaving 2 out", r.status, r.header.Get("Shipfile-Archive-Omitted"))
		}
		if !strings.Contains(string(r.body), "a.zip (could not be checked for malware)") {
			t.Fatal("the archive's comment does not name the file it leaves out")
		}
	})
	t.Run("another user may not", func(t *testing.T) {
		expect(t, release(zip, otherToken), http.StatusForbidden)
	})
	t.Run("unknown file", func(t *testing.T) {
		expect(t, release("00000000-0000-0000-0000-000000000001", token), http.StatusNotFound)
	})
	t.Run("a clean file cannot be released", func(t *testing.T) {
		r := release(txt, token)
		expect(t, r, http.StatusConflict)
		if !strings.Contains(r.json(t)["detail"].(string), "clean") {
			t.Fatalf("detail %s does not name the state", r.body)
		}
	})
	t.Run("a pending file cannot be released", func(t *testing.T) {
		a.setScan(txt, app.ScanPending, "")
		expect(t, release(txt, token), http.StatusConflict)
		a.setScan(txt, app.ScanClean, "")
	})
	if n := released(); n != 0 {
		t.Fatalf("%d file.release entries before any release", n)
	}
	t.Run("the owner releases", func(t *testing.T) {
		r := release(zip, token)
		expect(t, r, http.StatusOK)
		f := r.json(t)
		if f["id"] != zip || f["scan"] != "unscannable" || f["scan_released_by"] != float64(owner.ID) {
			t.Fatalf("released file = %s", r.body)
		}
		assertUTC(t, f["scan_released_at"])
		if n := released(); n != 1 {
			t.Fatalf("%d file.release entries, want 1", n)
		}
		if r := viaLink(zip); r.status != http.StatusOK || !strings.HasPrefix(string(r.body), "content of a.zip") {
			t.Fatalf("released file through the link: %d %s", r.status, r.body)
		}
		if g := a.packageFiles(token, id)["a.zip"]; g["scan_released_by"] != float64(owner.ID) || g["scan_released_at"] != f["scan_released_at"] {
			t.Fatalf("the package's record = %v, want it released as answered", g)
		}
	})
	t.Run("released again: answered as it is, one audit entry", func(t *testing.T) {
		r := release(zip, token)
		expect(t, r, http.StatusOK)
		if n := released(); n != 1 || r.json(t)["scan_released_by"] != float64(owner.ID) {
			t.Fatalf("%d file.release entries, record %s", n, r.body)
		}
	})
	t.Run("an admin releases", func(t *testing.T) {
		r := release(bin, adminToken)
		expect(t, r, http.StatusOK)
		if r.json(t)["scan_released_by"] != float64(admin.ID) {
			t.Fatalf("released by %v, want the admin %d", r.json(t)["scan_released_by"], admin.ID)
		}
		if n := released(); n != 2 {
			t.Fatalf("%d file.release entries, want 2", n)
		}
		r = a.do("GET", "/api/v1/links/"+link+"/archive", "", nil)
		if r.status != http.StatusOK || r.header.Get("Shipfile-Archive-Omitted") != "" {
			t.Fatalf("archive: %d, omitted %q, want every file in it", r.status, r.header.Get("Shipfile-Archive-Omitted"))
		}
	})
	t.Run("the audit entry says who and what", func(t *testing.T) {
		var actor int64
		var detail string
		if err := a.pool.QueryRow(context.Background(),
			`SELECT actor_user_id, detail FROM audit_log WHERE action = 'file.release' AND file_id = $1`, zip).Scan(&actor, &detail); err != nil {
			t.Fatal(err)
		}
		if actor != owner.ID || !strings.Contains(detail, "Heuristics.Encrypted.Zip") {
			t.Fatalf("audit entry by %d: %q", actor, detail)
		}
	})
}
