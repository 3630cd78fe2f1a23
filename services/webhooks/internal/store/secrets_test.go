package store_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/secretbox"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/schematest"
	"github.com/shipfile/shipfile/services/webhooks/internal/store"
	"github.com/shipfile/shipfile/services/webhooks/internal/webhooktest"
)

// TestDeliveryOpensSealedSecrets: the dispatcher signs with the secrets in clear, which
// the gateway stored sealed; a secret written in clear before encryption still works;
// one sealed under a key the dispatcher lacks fails the load without showing it.
func TestDeliveryOpensSealedSecrets(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	st := store.New(pool, servicetest.Keyring(t))
	ctx := context.Background()
	load := func(hook int64, event string) (app.Delivery, error) {
		id := app.DeliveryID(event, hook)
		if err := st.InsertDelivery(ctx, app.NewDelivery{ID: id, SubscriptionID: hook, EventID: event, Event: "package.created", Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		return st.Delivery(ctx, id)
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
