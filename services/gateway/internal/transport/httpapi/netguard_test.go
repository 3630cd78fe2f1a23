package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// TestWebhookURLRefusedWhereTheDispatcherWouldRefuseIt: a URL whose address the
// dispatcher refuses at every delivery attempt (http://100.64.0.1/) is refused when it
// is saved too: creating a subscription with it, or changing one to it, is a 422 that
// says why, and nothing is stored.
func TestWebhookURLRefusedWhereTheDispatcherWouldRefuseIt(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, admin := a.user("admin@example.com", app.RoleAdmin)
	r := a.do("POST", hooksPath, admin, map[string]any{"url": "http://100.64.0.1/"})
	expect(t, r, http.StatusUnprocessableEntity)
	if d, _ := r.json(t)["detail"].(string); !strings.Contains(d, "carrier-grade NAT") || !strings.Contains(d, "SHIPFILE_WEBHOOK_ALLOW_PRIVATE") {
		t.Fatalf("detail %q does not say why", d)
	}
	if n := a.rowCount("webhook_subscriptions"); n != 0 {
		t.Fatalf("%d subscriptions stored", n)
	}
	id := hookID(t, a.createWebhook(admin, map[string]any{"url": "https://hooks.example.com/x"}))
	for _, u := range []string{"http://100.64.0.1/", "http://[::ffff:198.18.0.1]/", "http://240.0.0.1/"} {
		expect(t, a.do("PATCH", hookPath(id, ""), admin, map[string]any{"url": u}), http.StatusUnprocessableEntity)
	}
}
