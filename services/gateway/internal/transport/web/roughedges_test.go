package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// TestRecipientPageNamesTheSender: the page behind a link says who sent the files (or
// asked for them), by name and address, escaped.
func TestRecipientPageNamesTheSender(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, err := e.identity.CreateUser(context.Background(), app.NewUser{Email: "ann@example.com", Name: "Ann <Q> Smith", Role: app.RoleRegular, Password: "correct horse battery"})
	if err != nil {
		t.Fatal(err)
	}
	for dir, verb := range map[string]string{"outbound": "Sent by", "inbound": "Requested by"} {
		t.Run(dir, func(t *testing.T) {
			ctx := context.Background()
			pk, err := e.packages.Create(ctx, owner, app.Client{}, packages.NewPackage{Title: ptr("Files"), RecipientEmail: ptr("bob@example.com"), Direction: ptr(dir)})
			if err != nil {
				t.Fatal(err)
			}
			if dir == "outbound" {
				if _, err := e.packages.UploadAsOwner(ctx, owner, app.Client{}, pk.ID, app.Upload{Filename: "a.txt", Body: strings.NewReader("a")}); err != nil {
					t.Fatal(err)
				}
			}
			_, links, err := e.packages.Finalize(ctx, owner, app.Client{}, pk.ID)
			if err != nil {
				t.Fatal(err)
			}
			token := links[0].MagicLink[strings.LastIndex(links[0].MagicLink, "/")+1:]
			p := e.browser().get("/p/" + token)
			expectStatus(t, p, http.StatusOK)
			want := verb + ` <strong>Ann &lt;Q&gt; Smith</strong> &lt;<a href="mailto:ann@example.com">ann@example.com</a>&gt;`
			if !strings.Contains(p.body, want) {
				t.Fatalf("the page does not say %q:\n%s", want, p.body)
			}
		})
	}
}

// TestFormsShowEveryError: the send and request forms answer every bad field at once,
// each error beside its field, and create nothing.
func TestFormsShowEveryError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("ann@example.com", app.RoleRegular)
	b := e.browser()
	b.login("ann@example.com")
	bad := url.Values{
		"recipient_email": {"bob@"}, "title": {"  "}, "ttl_days": {"a week"}, "note": {strings.Repeat("x", 2001)},
		"password": {"short"}, "max_downloads": {"lots"},
	}
	want := []string{"recipient_email", "title", "ttl_days", "note", "password", "max_downloads"}
	for _, path := range []string{"/send", "/request"} {
		t.Run(path, func(t *testing.T) {
			b.get(path)
			p := b.post(path, bad)
			expectStatus(t, p, http.StatusUnprocessableEntity)
			for _, field := range want {
				if path == "/request" && (field == "password" || field == "max_downloads") && !strings.Contains(p.body, `name="`+field+`"`) {
					continue // not on this form
				}
				if fieldError(p, field) == "" {
					t.Errorf("no error beside %s", field)
				}
			}
			if t.Failed() {
				t.Logf("page:\n%s", p.body)
			}
			if n := e.count("packages"); n != 0 {
				t.Fatalf("a bad form created %d packages", n)
			}
		})
	}
	// Range errors and a bad address of the list come together too.
	b.get("/send")
	p := b.post("/send", url.Values{"recipient_email": {"bob@example.com"}, "title": {"T"}, "ttl_days": {"91"}, "more_recipients": {"cy@"}, "max_downloads": {"0"}})
	expectStatus(t, p, http.StatusUnprocessableEntity)
	for _, field := range []string{"ttl_days", "more_recipients", "max_downloads"} {
		if fieldError(p, field) == "" {
			t.Errorf("no error beside %s", field)
		}
	}
}
