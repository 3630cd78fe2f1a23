package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shipfile/shipfile/pkg/msgerr"
)

func TestRenderAccountNotice(t *testing.T) {
	base := Notification{ID: 9, Kind: NotifyAccount, OwnerEmail: "alice@example.com", OwnerName: "Alice\nA"}
	tests := []struct {
		event, detail, subject string
		says                   []string
	}{
		{AccountSSOLinked, "https://id.example.com", "An SSO sign-in was linked to your shipfile account",
			[]string{"linked to an account at the identity provider https://id.example.com", "If this was not you"}},
		{AccountSSOUnlinked, "https://id.example.com", "The SSO sign-in of your shipfile account was unlinked",
			[]string{"no longer linked to the identity provider https://id.example.com"}},
		{AccountRoleChanged, "admin -> regular", "Your shipfile role changed", []string{"Your role in shipfile changed: admin -> regular."}},
		{AccountKeyChanged, "age1xyz", "Your encryption key was changed", []string{"encrypted to age1xyz", "revoke your API tokens"}},
		{AccountQuota90, "9.1 GiB of 10 GiB", "Your shipfile storage is 90 % full", []string{"hold 9.1 GiB of 10 GiB of your storage quota", "Delete packages"}},
	}
	for _, tt := range tests {
		t.Run(tt.event, func(t *testing.T) {
			n := base
			n.AccountEvent, n.AccountDetail = tt.event, tt.detail
			e, err := RenderNotification(n, "https://files.example.com")
			if err != nil {
				t.Fatal(err)
			}
			if e.Subject != tt.subject || e.To.Address != "alice@example.com" || e.To.Name != "Alice A" || e.JobID != "account-9" {
				t.Fatalf("%q to %v (%s)", e.Subject, e.To, e.JobID)
			}
			for _, want := range append(tt.says, "https://files.example.com/account") {
				if !strings.Contains(e.Text, want) {
					t.Errorf("text lacks %q:\n%s", want, e.Text)
				}
			}
			if !strings.Contains(e.HTML, `href="https://files.example.com/account"`) {
				t.Errorf("HTML lacks the account link:\n%s", e.HTML)
			}
		})
	}
	bad := base
	bad.AccountEvent = "made_up"
	if _, err := RenderNotification(bad, "https://x"); !msgerr.IsPoison(err) {
		t.Errorf("unknown event: %v", err)
	}
	bad.AccountEvent, bad.OwnerEmail = AccountRoleChanged, "not an address"
	if _, err := RenderNotification(bad, "https://x"); !errors.Is(err, errUndeliverable) {
		t.Errorf("bad address: %v", err)
	}
}

// An account notice is a security notice: it is sent whatever the notification
// settings say (NotifyOwner is a package's setting, false here).
func TestAccountNoticeIgnoresNotifySettings(t *testing.T) {
	store := &fakeNotifyStore{account: []Notification{{ID: 1, Kind: NotifyAccount, OwnerEmail: "a@example.com",
		AccountEvent: AccountKeyChanged, AccountDetail: "age1abc"}}}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	n := NewNotifier(store, fakeSender{}, m, slog.New(slog.NewTextHandler(io.Discard, nil)), NotifierOptions{PublicURL: "https://x"})
	n.Tick(context.Background(), context.Background())
	if len(store.outcomes) != 1 || store.outcomes[0].State != StateSent {
		t.Fatalf("outcomes %+v", store.outcomes)
	}
}
