package packages

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

func TestResolveRecipients(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	list := func(emails ...string) *[]app.RecipientInput {
		out := make([]app.RecipientInput, len(emails))
		for i, e := range emails {
			out[i] = app.RecipientInput{Email: s(e)}
		}
		return &out
	}
	fifty := make([]string, 51)
	for i := range fifty {
		fifty[i] = "r" + strings.Repeat("x", i) + "@example.com"
	}
	tests := []struct {
		name        string
		list        *[]app.RecipientInput
		email, nm   *string
		want        []string // the addresses; nil: 422
		wantFirstNm string
	}{
		{"one recipient, the seed's fields", nil, s(" bob@example.com "), s("Bob"), []string{"bob@example.com"}, "Bob"},
		{"nothing", nil, nil, nil, nil, ""},
		{"a bad address alone", nil, s("bob@"), nil, nil, ""},
		{"a list", list("a@example.com", "b@example.com"), nil, nil, []string{"a@example.com", "b@example.com"}, ""},
		{"a list and its first address in another case", list("a@example.com", "b@example.com"), s("A@Example.com"), nil, []string{"a@example.com", "b@example.com"}, ""},
		{"a list and another address", list("a@example.com", "b@example.com"), s("b@example.com"), nil, nil, ""},
		{"a list and another name", &[]app.RecipientInput{{Email: s("a@example.com"), Name: s("Ann")}}, nil, s("Bob"), nil, ""},
		{"a list and its first name", &[]app.RecipientInput{{Email: s("a@example.com"), Name: s("Ann")}}, nil, s("Ann"), []string{"a@example.com"}, "Ann"},
		{"an empty list", list(), nil, nil, nil, ""},
		{"50 recipients", list(fifty[:50]...), nil, nil, fifty[:50], ""},
		{"51 recipients", list(fifty...), nil, nil, nil, ""},
		{"the same address twice, another case", list("a@example.com", "A@EXAMPLE.COM"), nil, nil, nil, ""},
		{"an entry without an address", &[]app.RecipientInput{{Name: s("Nobody")}}, nil, nil, nil, ""},
		{"a bidi override in a name", &[]app.RecipientInput{{Email: s("a@example.com"), Name: s("A\u202eB")}}, nil, nil, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveRecipients(tc.list, tc.email, tc.nm, nil)
			if tc.want == nil {
				if app.KindOf(err) != app.KindInvalid {
					t.Fatalf("got %v, %v; want 422", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var emails []string
			for _, r := range got {
				emails = append(emails, r.Email)
			}
			if strings.Join(emails, ",") != strings.Join(tc.want, ",") || got[0].Name != tc.wantFirstNm {
				t.Fatalf("got %v", got)
			}
		})
	}
}

// TestEventsOfOneRecipientStayAsTheyWere: a package with one recipient publishes the
// bodies it always did; with several, the list and all_links come in.
func TestEventsOfOneRecipientStayAsTheyWere(t *testing.T) {
	t.Parallel()
	ann := app.Recipient{ID: uuid.New(), Email: "ann@example.com"}
	bob := app.Recipient{ID: uuid.New(), Email: "bob@example.com"}
	one := app.Package{ID: uuid.New(), Title: "T", RecipientEmail: ann.Email, Recipients: []app.Recipient{ann}}
	if e := packageFinalized(one).GetPackageFinalized(); e.GetRecipients() != nil {
		t.Fatalf("one recipient: recipients %v", e.GetRecipients())
	}
	if e := packageCreated(one).GetPackageCreated(); e.GetRecipients() != nil {
		t.Fatalf("one recipient: recipients %v", e.GetRecipients())
	}
	if e := packageRevoked(one, 1).GetPackageRevoked(); e.AllLinks != nil {
		t.Fatal("one recipient: all_links set")
	}
	two := one
	two.Recipients = []app.Recipient{ann, bob}
	if e := packageFinalized(two).GetPackageFinalized(); strings.Join(e.GetRecipients(), ",") != "ann@example.com,bob@example.com" {
		t.Fatalf("two recipients: %v", e.GetRecipients())
	}
	if e := packageRevoked(two, 1).GetPackageRevoked(); e.AllLinks == nil || !e.GetAllLinks() || e.GetPackage().GetRecipientEmail() != "ann@example.com" {
		t.Fatalf("the package's revoke: %v", e)
	}
	if e := recipientRevoked(two, bob, 1).GetPackageRevoked(); e.AllLinks == nil || e.GetAllLinks() || e.GetPackage().GetRecipientEmail() != "bob@example.com" {
		t.Fatalf("one recipient's revoke: %v", e)
	}
	// Read through Bob's link, the download is Bob's.
	viaBob := two
	viaBob.Link = &bob
	if e := packageDownloaded(viaBob, "f", "a.txt").GetPackageDownloaded(); e.GetPackage().GetRecipientEmail() != "bob@example.com" {
		t.Fatalf("download through bob's link: %v", e.GetPackage())
	}
	f := app.File{ID: uuid.New(), UploadedBy: app.ByRecipient, RecipientID: &bob.ID}
	if e := fileUploaded(two, f).GetFileUploaded(); e.GetPackage().GetRecipientEmail() != "bob@example.com" {
		t.Fatalf("bob's upload: %v", e.GetPackage())
	}
}
