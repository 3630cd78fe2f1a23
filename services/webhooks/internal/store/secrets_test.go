package store_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/secretbox"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/store"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

// TestDeliveryOpensSealedSecrets: the dispatcher signs with the secrets in clear, which
// the gateway stored sealed; a secret written in clear before encryption still works;
// one sealed under a key the dispatcher lacks fails that subscription's load without
// showing it (and without failing the others': Subscriptions still answers).
func TestDeliveryOpensSealedSecrets(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	st := store.New(pool, servicetest.Keyring(t))
	ctx := context.Background()
	load := func(hook int64, _ string) (app.Delivery, error) {
		// The subscription as the dispatcher's cache reads it, one and all at once.
		s, err := st.Subscription(ctx, hook)
		if err != nil {
			return app.Delivery{}, err
		}
		if s.SecretError != nil {
			return app.Delivery{}, s.SecretError
		}
		all, err := st.Subscriptions(ctx)
		if err != nil {
			return app.Delivery{}, err
		}
		for _, a := range all {
			if a.ID == hook && (a.Secret != s.Secret || (a.SecretError == nil) != (s.SecretError == nil)) {
				t.Fatal("Subscriptions and Subscription open the secret differently")
			}
		}
		return app.Delivery{Subscription: s}, nil
	}

	sealed := webhooktest.InsertSubscription(t, pool, webhooktest.Subscription{URL: "https://a.example/hook", Secret: "whsec_sealed"})
	var stored string
	if err := pool.QueryRow(ctx, `SELECT secret FROM webhook_subscriptions WHERE id = $1`, sealed).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !secretbox.IsSealed(stored) {
		t.Fatal("the harness stored the secret in clear")
	}
	if d, err := load(sealed, "ev-sealed"); err != nil || d.Subscription.Secret != "whsec_sealed" {
		t.Fatalf("sealed secret: %v (opened to the right secret: %v)", err, d.Subscription.Secret == "whsec_sealed")
	}

	var legacy int64
	if err := pool.QueryRow(ctx, `INSERT INTO webhook_subscriptions (url, events, secret) VALUES ('https://b.example/hook', '{package.created}', 'whsec_legacy') RETURNING id`).Scan(&legacy); err != nil {
		t.Fatal(err)
	}
	if d, err := load(legacy, "ev-legacy"); err != nil || d.Subscription.Secret != "whsec_legacy" {
		t.Fatalf("secret in clear: %v", err)
	}

	other, err := secretbox.New(bytes.Repeat([]byte{9}, secretbox.KeySize), nil)
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := other.Seal("whsec_foreign")
	var unknown int64
	if err := pool.QueryRow(ctx, `INSERT INTO webhook_subscriptions (url, events, secret) VALUES ('https://c.example/hook', '{package.created}', $1) RETURNING id`, foreign).Scan(&unknown); err != nil {
		t.Fatal(err)
	}
	_, err = load(unknown, "ev-unknown")
	if !errors.Is(err, secretbox.ErrUnknownKey) || strings.Contains(err.Error(), foreign) {
		t.Fatalf("a secret under an unknown key: %v, want ErrUnknownKey without the value", err)
	}
}
