package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// TestSeveralRecipientsPages: the request form takes several addresses and shows each
// their link; the package page lists the recipients with their link state and
// downloads, adds one and revokes one.
func TestSeveralRecipientsPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("ann@example.com", app.RoleRegular)
	b := e.browser()
	b.login("ann@example.com")

	// A duplicate address is refused beside the field, and creates nothing.
	b.get("/request")
	p := b.post("/request", url.Values{"recipient_email": {"bob@example.com"}, "title": {"Signatures"}, "ttl_days": {"7"},
		"more_recipients": {"cy@example.com\nBOB@example.com"}})
	expectStatus(t, p, http.StatusUnprocessableEntity)
	if fieldError(p, "more_recipients") == "" || e.count("packages") != 0 {
		t.Fatalf("duplicate recipient: no error beside more_recipients, or a package was made:\n%s", p.body)
	}

	b.get("/request")
	p = b.post("/request", url.Values{"recipient_email": {"bob@example.com"}, "recipient_name": {"Bob"}, "title": {"Signatures"},
		"ttl_days": {"7"}, "more_recipients": {"cy@example.com\r\ndan@example.com"}})
	expectStatus(t, p, http.StatusCreated)
	links := regexp.MustCompile(`value="(https?://[^"]+/p/([A-Za-z0-9_-]{43}))"`).FindAllStringSubmatch(p.body, -1)
	if len(links) != 3 {
		t.Fatalf("the sent page shows %d links, want one per recipient:\n%s", len(links), p.body)
	}
	for _, want := range []string{"bob@example.com", "cy@example.com", "dan@example.com"} {
		if !strings.Contains(p.body, want) {
			t.Fatalf("the sent page does not name %s", want)
		}
	}
	pkgPath := regexp.MustCompile(`href="(/packages/[0-9a-f-]{36})"`).FindStringSubmatch(p.body)[1]
	token := map[string]string{"bob": links[0][2], "cy": links[1][2], "dan": links[2][2]}

	page := b.get(pkgPath)
	expectStatus(t, page, http.StatusOK)
	rows := recipientRows(page.body)
	if len(rows) != 3 || !strings.Contains(rows["bob@example.com"], "active") {
		t.Fatalf("recipients on the page: %v", rows)
	}

	// Revoke Bob's link alone.
	rid := regexp.MustCompile(`action="`+pkgPath+`/recipients/([0-9a-f-]{36})/revoke"`).FindAllStringSubmatch(page.body, -1)
	if len(rid) != 3 {
		t.Fatalf("revoke buttons: %d", len(rid))
	}
	expectRedirect(t, b.post(pkgPath+"/recipients/"+rid[0][1]+"/revoke", url.Values{}), pkgPath+"?msg=recipient-revoked")
	expectStatus(t, b.get("/p/"+token["bob"]), http.StatusGone)
	expectStatus(t, b.get("/p/"+token["cy"]), http.StatusOK)
	rows = recipientRows(b.get(pkgPath).body)
	if !strings.Contains(rows["bob@example.com"], "revoked") || !strings.Contains(rows["cy@example.com"], "active") {
		t.Fatalf("after revoking bob: %v", rows)
	}

	// Add Eve: her link is shown once and works at once.
	p = b.post(pkgPath+"/recipients", url.Values{"email": {"eve@example.com"}, "name": {"Eve"}})
	expectStatus(t, p, http.StatusCreated)
	eve := regexp.MustCompile(`/p/([A-Za-z0-9_-]{43})"`).FindStringSubmatch(p.body)
	if eve == nil || !strings.Contains(p.body, "eve@example.com") {
		t.Fatalf("the added recipient's page:\n%s", p.body)
	}
	expectStatus(t, b.get("/p/"+eve[1]), http.StatusOK)
	p = b.post(pkgPath+"/recipients", url.Values{"email": {"cy@example.com"}})
	expectStatus(t, p, http.StatusUnprocessableEntity)
	if !strings.Contains(p.body, `id="add-recipient-error"`) {
		t.Fatalf("a second cy: no error beside the form:\n%s", p.body)
	}
	page = b.get(pkgPath)
	if rows = recipientRows(page.body); len(rows) != 4 {
		t.Fatalf("after adding eve: %v", rows)
	}
	// The activity says whom the owner's revoke and add concerned.
	for _, want := range []string{`<code>recipient.revoke</code> <span class="recipient">bob@example.com</span>`, `<code>recipient.add</code> <span class="recipient">eve@example.com</span>`} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("the activity lacks %s:\n%s", want, page.body)
		}
	}
}

// TestOwnerPageSaysWhoDownloaded: the package page counts each recipient's downloads
// and its activity names whose link was used.
func TestOwnerPageSaysWhoDownloaded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("ann@example.com", app.RoleRegular)
	ctx := context.Background()
	list := []app.RecipientInput{{Email: ptr("bob@example.com")}, {Email: ptr("cy@example.com")}}
	p, err := e.packages.Create(ctx, owner, app.Client{}, packages.NewPackage{Title: ptr("Q3"), Recipients: &list})
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.packages.UploadAsOwner(ctx, owner, app.Client{}, p.ID, app.Upload{Filename: "q3.txt", Body: strings.NewReader("numbers")})
	if err != nil {
		t.Fatal(err)
	}
	_, links, err := e.packages.Finalize(ctx, owner, app.Client{}, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	cy := links[1].MagicLink[strings.LastIndex(links[1].MagicLink, "/")+1:]
	b := e.browser()
	expectStatus(t, b.get("/api/v1/links/"+cy+"/files/"+f.ID.String()), http.StatusOK)

	b.login("ann@example.com")
	page := b.get("/packages/" + p.ID.String())
	rows := recipientRows(page.body)
	if !strings.Contains(rows["cy@example.com"], `class="downloads">1<`) || !strings.Contains(rows["bob@example.com"], `class="downloads">0<`) {
		t.Fatalf("downloads by recipient: %v", rows)
	}
	if !strings.Contains(page.body, "cy@example.com (link)") {
		t.Fatalf("the activity does not name cy's link:\n%s", page.body)
	}
}

// recipientRows maps each recipient's address to its row in the page's recipients table.
func recipientRows(body string) map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?s)<tr data-recipient="([^"]+)">(.*?)</tr>`).FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	return out
}
