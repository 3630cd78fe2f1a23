package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
)

// several creates a package for the recipients (emails) with extra fields and files,
// finalizes it and returns its id and each recipient's link token by address.
func (a *testAPI) several(token string, emails []string, fields map[string]any, files ...string) (string, map[string]string) {
	a.t.Helper()
	t := a.t.(*testing.T)
	list := make([]map[string]any, len(emails))
	for i, e := range emails {
		list[i] = map[string]any{"email": e, "name": strings.ToUpper(e[:1]) + e[1:strings.Index(e, "@")]}
	}
	body := map[string]any{"title": "Contract", "recipients": list}
	for k, v := range fields {
		body[k] = v
	}
	p := a.createPackage(token, body)
	id := p["id"].(string)
	for _, f := range files {
		expect(t, a.upload("/api/v1/packages/"+id+"/files", token, f, []byte("content of "+f)), http.StatusCreated)
	}
	r := a.do("POST", "/api/v1/packages/"+id+"/finalize", token, nil)
	expect(t, r, http.StatusOK)
	fin := r.json(t)
	links := map[string]string{}
	items, _ := fin["links"].([]any)
	if len(items) != len(emails) {
		t.Fatalf("finalize links = %v, want one per recipient", fin["links"])
	}
	for i, it := range items {
		l := it.(map[string]any)
		if l["email"] != emails[i] {
			t.Fatalf("links[%d] = %v, want %s", i, l, emails[i])
		}
		links[emails[i]] = linkToken(t, l["magic_link"])
	}
	if linkToken(t, fin["magic_link"]) != links[emails[0]] {
		t.Fatalf("magic_link %v is not the first recipient's", fin["magic_link"])
	}
	return id, links
}

// recipientsByEmail reads the package's recipients from the owner's view.
func (a *testAPI) recipientsByEmail(token, id string) map[string]map[string]any {
	a.t.Helper()
	r := a.do("GET", "/api/v1/packages/"+id, token, nil)
	expect(a.t, r, http.StatusOK)
	out := map[string]map[string]any{}
	for _, x := range r.json(a.t)["recipients"].([]any) {
		m := x.(map[string]any)
		out[m["email"].(string)] = m
	}
	return out
}

// eventsOf decodes the package's events of type typ from the outbox, in order.
func (a *testAPI) eventsOf(id, typ string) []*eventsv1.Envelope {
	a.t.Helper()
	rows, err := a.pool.Query(context.Background(), "SELECT payload FROM outbox WHERE subject = $1 ORDER BY id", events.SubjectPrefix+typ)
	if err != nil {
		a.t.Fatal(err)
	}
	defer rows.Close()
	var out []*eventsv1.Envelope
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			a.t.Fatal(err)
		}
		env, err := events.UnmarshalEnvelope(b)
		if err != nil {
			a.t.Fatal(err)
		}
		if pkg := eventPackageOf(env); pkg != nil && pkg.GetPackageId() == id {
			out = append(out, env)
		}
	}
	return out
}

func eventPackageOf(env *eventsv1.Envelope) *eventsv1.Package {
	switch d := env.GetData().(type) {
	case *eventsv1.Envelope_PackageCreated:
		return d.PackageCreated.GetPackage()
	case *eventsv1.Envelope_PackageFinalized:
		return d.PackageFinalized.GetPackage()
	case *eventsv1.Envelope_PackageDownloaded:
		return d.PackageDownloaded.GetPackage()
	case *eventsv1.Envelope_PackageRevoked:
		return d.PackageRevoked.GetPackage()
	case *eventsv1.Envelope_FileUploaded:
		return d.FileUploaded.GetPackage()
	}
	return nil
}

// TestSeveralRecipients is the story: three recipients each download through
// their own link and the owner's page says who did; one is revoked and only that
// link dies; a fourth added after finalize has a working link at once; each link's
// budget, counts and audit entries are its own.
func TestSeveralRecipients(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	emails := []string{"ann@example.com", "bob@example.com", "cy@example.com"}
	id, links := a.several(token, emails, map[string]any{"max_downloads": 2}, "contract.pdf")

	rs := a.recipientsByEmail(token, id)
	if len(rs) != 3 {
		t.Fatalf("recipients = %v", rs)
	}
	for _, e := range emails {
		if rs[e]["link_state"] != "active" || rs[e]["download_count"] != float64(0) || rs[e]["last_used_at"] != nil {
			t.Fatalf("%s before any download: %v", e, rs[e])
		}
	}
	// The mailer gets one job per recipient, each with their own link (sealed in the
	// outbox: counted, not read).
	var jobs int
	if err := a.pool.QueryRow(context.Background(), "SELECT count(*) FROM outbox WHERE subject LIKE '%mail%'").Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if jobs != 3 {
		t.Fatalf("mail jobs = %d, want 3", jobs)
	}

	// Ann downloads; Bob and Cy have not: their views say nothing of Ann's.
	files := a.linkFiles(links["ann@example.com"])
	fileID := files["contract.pdf"]["id"].(string)
	get := func(email string) response {
		return a.do("GET", "/api/v1/links/"+links[email]+"/files/"+fileID, "", nil)
	}
	r := get("ann@example.com")
	expect(t, r, http.StatusOK)
	if string(r.body) != "content of contract.pdf" {
		t.Fatalf("ann got %q", r.body)
	}
	ann := a.linkFiles(links["ann@example.com"])["contract.pdf"]
	bob := a.linkFiles(links["bob@example.com"])["contract.pdf"]
	if ann["download_count"] != float64(1) || ann["downloads_left"] != float64(1) {
		t.Fatalf("ann's view: %v", ann)
	}
	if bob["download_count"] != float64(0) || bob["downloads_left"] != float64(2) {
		t.Fatalf("bob's view shows ann's download: %v", bob)
	}
	expect(t, get("bob@example.com"), http.StatusOK)
	expect(t, get("cy@example.com"), http.StatusOK)

	// The owner's page says who downloaded.
	rs = a.recipientsByEmail(token, id)
	for _, e := range emails {
		if rs[e]["download_count"] != float64(1) || rs[e]["last_used_at"] == nil {
			t.Fatalf("%s after one download: %v", e, rs[e])
		}
	}
	d := a.do("GET", "/api/v1/packages/"+id, token, nil).json(t)
	if f := d["files"].([]any)[0].(map[string]any); f["download_count"] != float64(3) {
		t.Fatalf("owner's file count = %v, want every link's 3", f["download_count"])
	}

	// package.downloaded names whoever downloaded.
	var who []string
	for _, env := range a.eventsOf(id, events.TypePackageDownloaded) {
		who = append(who, env.GetPackageDownloaded().GetPackage().GetRecipientEmail())
	}
	if strings.Join(who, ",") != strings.Join(emails, ",") {
		t.Fatalf("package.downloaded recipient_email = %v, want %v", who, emails)
	}
	// created and finalized carry the list.
	for _, env := range append(a.eventsOf(id, events.TypePackageCreated), a.eventsOf(id, events.TypePackageFinalized)...) {
		list := env.GetPackageCreated().GetRecipients()
		if list == nil {
			list = env.GetPackageFinalized().GetRecipients()
		}
		if strings.Join(list, ",") != strings.Join(emails, ",") {
			t.Fatalf("%s recipients = %v", env.GetType(), list)
		}
	}

	// Each link's audit entries are its own.
	perRecipient := map[string]int{}
	rows, err := a.pool.Query(context.Background(),
		`SELECT r.email, count(*) FROM audit_log a JOIN recipients r ON r.id = a.recipient_id
		 WHERE a.package_id = $1 AND a.action = 'file.download' GROUP BY r.email`, id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var e string
		var n int
		if err := rows.Scan(&e, &n); err != nil {
			t.Fatal(err)
		}
		perRecipient[e] = n
	}
	rows.Close()
	if len(perRecipient) != 3 || perRecipient["ann@example.com"] != 1 || perRecipient["bob@example.com"] != 1 || perRecipient["cy@example.com"] != 1 {
		t.Fatalf("file.download audit rows by recipient = %v", perRecipient)
	}

	// Revoke Bob: only his link dies.
	bobID := rs["bob@example.com"]["id"].(string)
	r = a.do("POST", "/api/v1/packages/"+id+"/recipients/"+bobID+"/revoke", token, nil)
	expect(t, r, http.StatusOK)
	if p := r.json(t); p["state"] != "active" {
		t.Fatalf("package after revoking one recipient: %v", p["state"])
	}
	expect(t, a.do("GET", "/api/v1/links/"+links["bob@example.com"], "", nil), http.StatusGone)
	expect(t, get("bob@example.com"), http.StatusGone)
	expect(t, a.do("GET", "/api/v1/links/"+links["ann@example.com"], "", nil), http.StatusOK)
	expect(t, get("cy@example.com"), http.StatusOK)
	expect(t, a.do("POST", "/api/v1/packages/"+id+"/recipients/"+bobID+"/revoke", token, nil), http.StatusConflict)
	expect(t, a.do("POST", "/api/v1/packages/"+id+"/recipients/"+fmt.Sprint(id)+"/revoke", token, nil), http.StatusNotFound)
	if rs = a.recipientsByEmail(token, id); rs["bob@example.com"]["link_state"] != "revoked" || rs["ann@example.com"]["link_state"] != "active" {
		t.Fatalf("link states after revoking bob: %v", rs)
	}
	revoked := a.eventsOf(id, events.TypePackageRevoked)
	if len(revoked) != 1 || revoked[0].GetPackageRevoked().GetPackage().GetRecipientEmail() != "bob@example.com" ||
		revoked[0].GetPackageRevoked().AllLinks == nil || revoked[0].GetPackageRevoked().GetAllLinks() {
		t.Fatalf("package.revoked of one recipient: %v", revoked)
	}

	// A fourth recipient, added after finalize: a working link at once.
	r = a.do("POST", "/api/v1/packages/"+id+"/recipients", token, map[string]any{"email": "dan@example.com", "name": "Dan"})
	expect(t, r, http.StatusCreated)
	dan := r.json(t)
	if dan["link_state"] != "active" || dan["email"] != "dan@example.com" || dan["name"] != "Dan" {
		t.Fatalf("added recipient: %v", dan)
	}
	danLink := linkToken(t, dan["magic_link"])
	// Dan's e-mail is queued with the add, not at some later finalize.
	if err := a.pool.QueryRow(context.Background(), "SELECT count(*) FROM outbox WHERE subject LIKE '%mail%'").Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if jobs != 4 {
		t.Fatalf("mail jobs after adding dan = %d, want 4", jobs)
	}
	r = a.do("GET", "/api/v1/links/"+danLink+"/files/"+fileID, "", nil)
	expect(t, r, http.StatusOK)
	expect(t, a.do("POST", "/api/v1/packages/"+id+"/recipients", token, map[string]any{"email": "ANN@example.com"}), http.StatusConflict)
	expect(t, a.do("POST", "/api/v1/packages/"+id+"/recipients", token, map[string]any{"email": "not an address"}), http.StatusUnprocessableEntity)
	if rs = a.recipientsByEmail(token, id); len(rs) != 4 || rs["dan@example.com"]["download_count"] != float64(1) {
		t.Fatalf("recipients after adding dan: %v", rs)
	}

	// The package's revoke ends every link, and says so.
	expect(t, a.do("POST", "/api/v1/packages/"+id+"/revoke", token, nil), http.StatusOK)
	for _, l := range []string{links["ann@example.com"], links["cy@example.com"], danLink} {
		expect(t, a.do("GET", "/api/v1/links/"+l, "", nil), http.StatusGone)
	}
	revoked = a.eventsOf(id, events.TypePackageRevoked)
	if len(revoked) != 2 || !revoked[1].GetPackageRevoked().GetAllLinks() {
		t.Fatalf("the package's package.revoked: %v", revoked)
	}
	expect(t, a.do("POST", "/api/v1/packages/"+id+"/recipients", token, map[string]any{"email": "eve@example.com"}), http.StatusConflict)
	for e, r := range a.recipientsByEmail(token, id) {
		if r["link_state"] != "revoked" {
			t.Fatalf("%s after the package's revoke: %v", e, r)
		}
	}
}

// TestEachRecipientDownloadsOnce: max_downloads 1 is once per recipient and file.
func TestEachRecipientDownloadsOnce(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	emails := []string{"ann@example.com", "bob@example.com", "cy@example.com"}
	_, links := a.several(token, emails, map[string]any{"max_downloads": 1}, "a.txt")
	fileID := a.linkFiles(links["ann@example.com"])["a.txt"]["id"].(string)
	for _, e := range emails {
		expect(t, a.do("GET", "/api/v1/links/"+links[e]+"/files/"+fileID, "", nil), http.StatusOK)
		expect(t, a.do("GET", "/api/v1/links/"+links[e]+"/files/"+fileID, "", nil), http.StatusGone)
		expect(t, a.do("GET", "/api/v1/links/"+links[e], "", nil), http.StatusGone)
	}
}

// TestRecipientGrantsAreTheirOwn: one password for the package, but a grant opens
// only the link it was given for, and wrong passwords on one link do not lock another.
func TestRecipientGrantsAreTheirOwn(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	_, tokens := a.several(token, []string{"ann@example.com", "bob@example.com"}, map[string]any{"password": "open sesame"}, "a.txt")
	ann, bob := tokens["ann@example.com"], tokens["bob@example.com"]
	r := a.unlock(ann, "open sesame")
	expect(t, r, http.StatusOK)
	grant := r.json(t)["grant"].(string)
	expect(t, a.do("GET", "/api/v1/links/"+ann, "", nil, "Shipfile-Link-Grant", grant), http.StatusOK)
	expect(t, a.do("GET", "/api/v1/links/"+bob, "", nil, "Shipfile-Link-Grant", grant), http.StatusUnauthorized)
	for range links.UnlockMaxFailures {
		expect(t, a.unlock(ann, "wrong password"), http.StatusUnauthorized)
	}
	expect(t, a.unlock(ann, "open sesame"), http.StatusTooManyRequests)
	expect(t, a.unlock(bob, "open sesame"), http.StatusOK)
}

// TestRecipientsUploadThroughTheirOwnLinks: on an inbound package each recipient's
// files say who sent them, and no recipient sees another's.
func TestRecipientsUploadThroughTheirOwnLinks(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	id, links := a.several(token, []string{"ann@example.com", "bob@example.com"}, map[string]any{"direction": "inbound"})
	rs := a.recipientsByEmail(token, id)
	for _, e := range []string{"ann@example.com", "bob@example.com"} {
		r := a.upload("/api/v1/links/"+links[e]+"/files", "", e+".txt", []byte("from "+e))
		expect(t, r, http.StatusCreated)
		if f := r.json(t); f["uploaded_by"] != "recipient" || f["recipient_id"] != rs[e]["id"] {
			t.Fatalf("%s's upload: %v", e, f)
		}
	}
	d := a.do("GET", "/api/v1/packages/"+id, token, nil).json(t)
	for _, x := range d["files"].([]any) {
		f := x.(map[string]any)
		e := strings.TrimSuffix(f["filename"].(string), ".txt")
		if f["recipient_id"] != rs[e]["id"] {
			t.Fatalf("owner's view of %s: %v", f["filename"], f)
		}
	}
	view := a.linkFiles(links["ann@example.com"])
	if _, ok := view["bob@example.com.txt"]; ok || len(view) != 1 {
		t.Fatalf("ann's link shows %v", view)
	}
	var who []string
	for _, env := range a.eventsOf(id, events.TypePackageFileUploaded) {
		who = append(who, env.GetFileUploaded().GetPackage().GetRecipientEmail())
	}
	if strings.Join(who, ",") != "ann@example.com,bob@example.com" {
		t.Fatalf("package.file_uploaded recipient_email = %v", who)
	}
}

// TestRecipientsRules: the list's bounds, duplicates, and recipient_email beside it.
func TestRecipientsRules(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	many := make([]map[string]any, 51)
	for i := range many {
		many[i] = map[string]any{"email": fmt.Sprintf("r%d@example.com", i)}
	}
	two := []map[string]any{{"email": "ann@example.com", "name": "Ann"}, {"email": "bob@example.com"}}
	for name, body := range map[string]map[string]any{
		"empty list":             {"recipients": []any{}},
		"51 recipients":          {"recipients": many},
		"duplicate":              {"recipients": []map[string]any{{"email": "a@example.com"}, {"email": "A@example.com"}}},
		"bad address":            {"recipients": []map[string]any{{"email": "nope"}}},
		"no address":             {"recipients": []map[string]any{{"name": "Nobody"}}},
		"email not the first":    {"recipients": two, "recipient_email": "bob@example.com"},
		"name not the first's":   {"recipients": two, "recipient_name": "Bob"},
		"no recipient at all":    {},
		"recipients not a list":  {"recipients": "ann@example.com"},
		"control char in a name": {"recipients": []map[string]any{{"email": "a@example.com", "name": "A\u202eB"}}},
	} {
		body["title"] = "T"
		if r := a.do("POST", "/api/v1/packages", token, body); r.status != http.StatusUnprocessableEntity {
			t.Errorf("%s: status %d, want 422: %s", name, r.status, r.body)
		}
	}
	p := a.createPackage(token, map[string]any{"title": "T", "recipients": two, "recipient_email": "ANN@example.com", "recipient_name": "Ann"})
	if p["recipient_email"] != "ann@example.com" || p["recipient_name"] != "Ann" || len(p["recipients"].([]any)) != 2 {
		t.Fatalf("created: %v", p)
	}
	// One recipient is the record of recipient_email and recipient_name, with a list of one.
	one := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com", "recipient_name": "R"})
	if rs := one["recipients"].([]any); len(rs) != 1 || rs[0].(map[string]any)["email"] != "r@example.com" || rs[0].(map[string]any)["link_state"] != "none" {
		t.Fatalf("one recipient: %v", one["recipients"])
	}

	// A draft's list is replaced by PATCH; an active package's is not.
	id := p["id"].(string)
	r := a.do("PATCH", "/api/v1/packages/"+id, token, map[string]any{"recipients": []map[string]any{{"email": "bob@example.com"}, {"email": "cy@example.com", "name": "Cy"}}})
	expect(t, r, http.StatusOK)
	got := r.json(t)
	if got["recipient_email"] != "bob@example.com" || len(got["recipients"].([]any)) != 2 {
		t.Fatalf("patched: %v", got)
	}
	bobID := p["recipients"].([]any)[1].(map[string]any)["id"]
	if got["recipients"].([]any)[0].(map[string]any)["id"] != bobID {
		t.Fatalf("bob's id changed: %v", got["recipients"])
	}
	expect(t, a.do("PATCH", "/api/v1/packages/"+id, token, map[string]any{"recipients": []any{}}), http.StatusUnprocessableEntity)
	// Beside the list, recipient_email and recipient_name must name its first entry,
	// as on create.
	bobCy := []map[string]any{{"email": "bob@example.com"}, {"email": "cy@example.com", "name": "Cy"}}
	expect(t, a.do("PATCH", "/api/v1/packages/"+id, token, map[string]any{"recipients": bobCy, "recipient_email": "cy@example.com"}), http.StatusUnprocessableEntity)
	expect(t, a.do("PATCH", "/api/v1/packages/"+id, token, map[string]any{"recipients": bobCy, "recipient_name": "Cy"}), http.StatusUnprocessableEntity)
	expect(t, a.do("PATCH", "/api/v1/packages/"+id, token, map[string]any{"recipients": bobCy, "recipient_email": "BOB@example.com"}), http.StatusOK)
	expect(t, a.upload("/api/v1/packages/"+id+"/files", token, "a.txt", []byte("a")), http.StatusCreated)
	expect(t, a.do("POST", "/api/v1/packages/"+id+"/finalize", token, nil), http.StatusOK)
	expect(t, a.do("PATCH", "/api/v1/packages/"+id, token, map[string]any{"recipients": []map[string]any{{"email": "dan@example.com"}}}), http.StatusConflict)
	// A draft takes no added recipient (its list is edited instead).
	draft := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	expect(t, a.do("POST", "/api/v1/packages/"+draft["id"].(string)+"/recipients", token, map[string]any{"email": "s@example.com"}), http.StatusConflict)
	// Another user's package.
	_, other := a.user("other@example.com", app.RoleRegular)
	expect(t, a.do("POST", "/api/v1/packages/"+id+"/recipients", other, map[string]any{"email": "s@example.com"}), http.StatusForbidden)
}

// TestRecipientResumableUploads: a tus upload through one recipient's link belongs to
// that link alone, and its file says whose it is; revoking the link ends it.
func TestRecipientResumableUploads(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	id, links := a.several(token, []string{"ann@example.com", "bob@example.com"}, map[string]any{"direction": "inbound"})
	rs := a.recipientsByEmail(token, id)
	content := []byte("ann's resumable file")
	url := a.tusCreate("/api/v1/links/"+links["ann@example.com"]+"/uploads", "", len(content))
	rid := url[strings.LastIndex(url, "/")+1:]
	expectTus(t, a.tusDo("HEAD", "/api/v1/links/"+links["bob@example.com"]+"/uploads/"+rid, "", nil), http.StatusNotFound)
	expectTus(t, a.patch(url, "", 0, content), http.StatusNoContent)
	d := a.do("GET", "/api/v1/packages/"+id, token, nil).json(t)
	f := d["files"].([]any)[0].(map[string]any)
	if f["uploaded_by"] != "recipient" || f["recipient_id"] != rs["ann@example.com"]["id"] {
		t.Fatalf("the tus upload's file: %v", f)
	}
	// Bob's link is revoked: his unfinished upload is refused at once.
	bobURL := a.tusCreate("/api/v1/links/"+links["bob@example.com"]+"/uploads", "", 4)
	expect(t, a.do("POST", "/api/v1/packages/"+id+"/recipients/"+rs["bob@example.com"]["id"].(string)+"/revoke", token, nil), http.StatusOK)
	if r := a.patch(bobURL, "", 0, []byte("late")); r.status != http.StatusGone {
		t.Fatalf("a revoked link's upload: %d %s", r.status, r.body)
	}
	var who []string
	for _, env := range a.eventsOf(id, events.TypePackageFileUploaded) {
		who = append(who, env.GetFileUploaded().GetPackage().GetRecipientEmail())
	}
	if strings.Join(who, ",") != "ann@example.com" {
		t.Fatalf("package.file_uploaded recipient_email = %v", who)
	}
}
