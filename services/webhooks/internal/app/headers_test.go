package app_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

type signatureVector struct {
	Name              string `json:"name"`
	Secret            string `json:"secret"`
	PreviousSecret    string `json:"previous_secret"`
	DeliveryID        string `json:"delivery_id"`
	Timestamp         int64  `json:"timestamp"`
	Body              string `json:"body"`
	XServiceSignature string `json:"x_service_signature"`
	WebhookSignature  string `json:"webhook_signature"`
}

func TestHeadersMatchSignatureVectors(t *testing.T) {
	b, err := os.ReadFile("../../testdata/signatures.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []signatureVector
	if err := json.Unmarshal(b, &vectors); err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
		t.Run(v.Name, func(t *testing.T) {
			now := time.Unix(v.Timestamp, 0)
			del := app.Delivery{
				ID: v.DeliveryID, SubscriptionID: 12, Event: "package.finalized", Body: []byte(v.Body),
				Subscription: app.Subscription{ID: 12, Secret: v.Secret, Active: true},
			}
			if v.PreviousSecret != "" {
				del.Subscription.PreviousSecret = v.PreviousSecret
				del.Subscription.PreviousSecretUntil = now.Add(time.Hour)
			}
			h := app.Headers(del, now)
			for k, vs := range h {
				// Built as a map literal: the keys must be canonical for Get to find them.
				if k != http.CanonicalHeaderKey(k) || len(vs) != 1 {
					t.Errorf("header %q = %q: want a canonical key with one value", k, vs)
				}
			}
			if len(h) != 9 {
				t.Errorf("%d headers, want 9: %v", len(h), h)
			}
			want := map[string]string{
				"Content-Type":        "application/json",
				"User-Agent":          "Service-Webhook/1.0",
				"X-Service-Event":     "package.finalized",
				"X-Service-Signature": v.XServiceSignature,
				"X-Service-Hook-Id":   "12",
				"X-Service-Delivery":  v.DeliveryID,
			}
			for k, w := range want {
				if got := h.Get(k); got != w {
					t.Errorf("%s = %q, want %q", k, got, w)
				}
			}
			for k, w := range map[string]string{
				"webhook-id":        v.DeliveryID,
				"webhook-timestamp": strconv.FormatInt(v.Timestamp, 10),
				"webhook-signature": v.WebhookSignature,
			} {
				if got := h.Values(k); len(got) != 1 || got[0] != w {
					t.Errorf("%s = %q, want %q", k, got, w)
				}
			}
		})
	}
}

func TestHeadersDropExpiredPreviousSecret(t *testing.T) {
	now := time.Unix(1795281965, 0)
	del := app.Delivery{ID: "d", SubscriptionID: 1, Event: "webhook.test", Body: []byte(`{}`),
		Subscription: app.Subscription{Secret: "whsec_AAAA", PreviousSecret: "whsec_BBBB", PreviousSecretUntil: now}}
	if sig := app.Headers(del, now).Get("webhook-signature"); len(sig) != len("v1,")+44 {
		t.Errorf("webhook-signature %q: want only the current secret's once the grace period is over", sig)
	}
	del.Subscription.PreviousSecretUntil = now.Add(time.Second)
	if sig := app.Headers(del, now).Get("webhook-signature"); len(sig) != 2*(len("v1,")+44)+1 {
		t.Errorf("webhook-signature %q: want both secrets' during the grace period", sig)
	}
}

// TestHeadersCarryThePackageSequence: a package's event carries X-Service-Sequence (its
// number among the package's events); an event without one (webhook.test) does not.
func TestHeadersCarryThePackageSequence(t *testing.T) {
	now := time.Unix(1795281965, 0)
	for _, tc := range []struct {
		name string
		seq  uint64
		want []string
	}{
		{"a package's event", 42, []string{"42"}},
		{"the first", 1, []string{"1"}},
		{"no package", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			del := app.Delivery{ID: "d", SubscriptionID: 1, Event: "package.created", Body: []byte(`{}`),
				PackageID: "p", PackageSeq: tc.seq, Subscription: app.Subscription{Secret: "whsec_AAAA"}}
			h := app.Headers(del, now)
			if got := h.Values("X-Service-Sequence"); len(got) != len(tc.want) || (len(got) == 1 && got[0] != tc.want[0]) {
				t.Errorf("X-Service-Sequence %q, want %q", got, tc.want)
			}
			if _, ok := h["X-Service-Sequence"]; ok != (tc.seq > 0) {
				t.Errorf("the key is not canonical or is present without a number: %v", h)
			}
		})
	}
}
