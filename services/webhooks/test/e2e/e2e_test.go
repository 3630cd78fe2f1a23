// Package e2e runs the real gateway and two webhook dispatcher processes (and, for the
// audit checkpoints, the expiry service) against real PostgreSQL, a private NATS
// JetStream server and MinIO, and drives them the way a user's systems would: through
// the REST API, the magic link and a webhook receiver.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/webhooks/internal/signing"
)

// bins are the binaries built once for the package's tests.
var bins map[string]string

func TestMain(m *testing.M) {
	servicetest.RunWithBinaries(m, &bins, map[string]string{
		"gateway":  "../../../gateway/cmd/gateway",
		"shipctl":  "../../../gateway/cmd/shipctl",
		"webhooks": "../../cmd/webhooks",
		"expiry":   "../../../expiry/cmd/expiry",
	})
}

// delivery is one request the receiver got.
type delivery struct {
	hook    string
	event   string
	id      string
	body    []byte
	headers http.Header
}

// receiver records webhook requests and answers with the status its hook is set to.
type receiver struct {
	mu       sync.Mutex
	got      []delivery
	statuses map[string]int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	hook := strings.TrimPrefix(req.URL.Path, "/")
	r.mu.Lock()
	r.got = append(r.got, delivery{hook: hook, event: req.Header.Get("X-Service-Event"), id: req.Header.Get("X-Service-Delivery"), body: body, headers: req.Header.Clone()})
	status := r.statuses[hook]
	r.mu.Unlock()
	if status == 0 {
		status = http.StatusNoContent
	}
	w.WriteHeader(status)
}

func (r *receiver) setStatus(hook string, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statuses[hook] = status
}

func (r *receiver) of(hook string) []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []delivery
	for _, d := range r.got {
		if d.hook == hook {
			out = append(out, d)
		}
	}
	return out
}

// keysInOrder returns the top-level keys of a JSON object in the order they appear.
func keysInOrder(t *testing.T, body []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("body is not an object: %s", body)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

var (
	utcZ     = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)
	noZone   = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$`)
	uuidLike = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// startGateway starts what the webhook tests share: a NATS server, an empty database
// (the gateway and shipctl apply the migrations themselves), an admin with an API token,
// and the gateway. It returns the settings every process of the test takes, the token
// and the gateway's address.
func startGateway(t *testing.T) (common []string, token, gwAddr string) {
	t.Helper()
	_, natsURL := servicetest.StartNATS(t)
	dbURL := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	bucket := "e2e-" + strings.ToLower(rand.Text()[:12])
	common = []string{
		"SHIPFILE_DATABASE_URL=" + dbURL, "SHIPFILE_NATS_URL=" + natsURL, "SHIPFILE_S3_BUCKET=" + bucket,
		"SHIPFILE_WEBHOOK_ALLOW_PRIVATE=true", "SHIPFILE_LOG_LEVEL=warn", servicetest.SecretKeyEnv,
	}
	shipctl := func(args ...string) string { return servicetest.RunCommand(t, bins["shipctl"], common, args...) }
	shipctl("user", "create", "--email", "admin@example.com", "--name", "Admin", "--role", "admin")
	out := shipctl("token", "create", "--email", "admin@example.com", "--name", "e2e")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	token = lines[len(lines)-1]

	gwAddr, gwOps := servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["gateway"], append(common, "SHIPFILE_HTTP_ADDR="+gwAddr, "SHIPFILE_OPS_ADDR="+gwOps, "SHIPFILE_PUBLIC_URL=http://"+gwAddr))
	servicetest.WaitReady(t, gwOps)
	return common, token, gwAddr
}

// TestWebhooksEndToEnd: a package's whole life reaches every matching subscription,
// signed and with the exact bodies, through two dispatcher instances; a filtered
// subscription gets only its event; the Test button works; a delivery that failed all
// its attempts is redelivered through the API with the same delivery id.
func TestWebhooksEndToEnd(t *testing.T) {
	common, token, gwAddr := startGateway(t)
	for range 2 {
		addr := servicetest.FreeAddr(t)
		servicetest.StartProcess(t, bins["webhooks"], append(common, "SHIPFILE_WEBHOOKS_ADDR="+addr,
			"SHIPFILE_WEBHOOK_RETRY_SCHEDULE=100ms,100ms,100ms,100ms,100ms,100ms,100ms", "SHIPFILE_WEBHOOK_TIMEOUT=2s"))
		servicetest.WaitReady(t, addr)
	}

	rcv := &receiver{statuses: map[string]int{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	a := servicetest.Client{T: t, Base: "http://" + gwAddr, Token: token}

	all := a.Must("POST", "/api/v1/admin/webhooks", map[string]any{"url": srv.URL + "/all", "description": "everything"}, http.StatusCreated)
	only := a.Must("POST", "/api/v1/admin/webhooks", map[string]any{"url": srv.URL + "/finalized", "events": []string{"package.finalized"}}, http.StatusCreated)
	flaky := a.Must("POST", "/api/v1/admin/webhooks", map[string]any{"url": srv.URL + "/flaky", "events": []string{"package.created"}}, http.StatusCreated)
	rcv.setStatus("flaky", http.StatusInternalServerError)
	secrets := map[string]string{"all": all["secret"].(string), "finalized": only["secret"].(string), "flaky": flaky["secret"].(string)}
	hookIDs := map[string]float64{"all": all["id"].(float64), "finalized": only["id"].(float64), "flaky": flaky["id"].(float64)}
	if n := len(all["events"].([]any)); n != len(events.Types) {
		t.Fatalf("default events = %d, want every selectable event type %v", n, events.Types)
	}

	// The Test button.
	a.Must("POST", fmt.Sprintf("/api/v1/admin/webhooks/%v/test", hookIDs["all"]), nil, http.StatusAccepted)
	servicetest.WaitFor(t, 20*time.Second, "webhook.test", func() bool { return len(rcv.of("all")) == 1 })

	// A package's life.
	me := a.Must("GET", "/api/v1/me", nil, http.StatusOK)
	p := a.Must("POST", "/api/v1/packages", map[string]any{"title": "Q3 report", "recipient_email": "bob@example.com", "ttl_days": 3}, http.StatusCreated)
	id := p["id"].(string)
	f := a.Upload("/api/v1/packages/"+id+"/files", "report.pdf", []byte("%PDF-1.7 tiny"))
	fin := a.Must("POST", "/api/v1/packages/"+id+"/finalize", nil, http.StatusOK)
	link := fin["magic_link"].(string)
	token43 := link[strings.LastIndex(link, "/")+1:]
	resp, err := http.Get(a.Base + "/api/v1/links/" + token43 + "/files/" + f["id"].(string))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("recipient download: %v %v", err, resp)
	}
	resp.Body.Close()
	a.Must("POST", "/api/v1/packages/"+id+"/revoke", nil, http.StatusOK)
	a.Must("DELETE", "/api/v1/packages/"+id, nil, 204)

	want := []string{"webhook.test", "package.created", "package.file_uploaded", "package.finalized", "package.downloaded", "package.revoked", "package.deleted"}
	servicetest.WaitFor(t, 30*time.Second, "every event at the all-events hook", func() bool { return len(rcv.of("all")) >= len(want) })
	servicetest.WaitFor(t, 30*time.Second, "the finalized hook", func() bool { return len(rcv.of("finalized")) >= 1 })

	got := map[string]delivery{}
	var order []string
	for _, d := range rcv.of("all") {
		if _, dup := got[d.event]; !dup {
			order = append(order, d.event)
		}
		got[d.event] = d
	}
	for _, e := range want {
		if _, ok := got[e]; !ok {
			t.Fatalf("the all-events hook never got %s (got %v)", e, order)
		}
	}

	// Every request is signed, both ways, and carries the headers of docs/WEBHOOKS.md.
	check := func(hook string, d delivery) {
		t.Helper()
		h := d.headers
		if !signing.VerifyService(secrets[hook], d.body, h.Get("X-Service-Signature")) {
			t.Errorf("%s %s: X-Service-Signature does not verify", hook, d.event)
		}
		ts := h.Get("Webhook-Timestamp")
		var unix int64
		fmt.Sscan(ts, &unix)
		if h.Get("Webhook-Id") != d.id || !signing.VerifyStandard(secrets[hook], d.id, unix, d.body, h.Get("Webhook-Signature")) {
			t.Errorf("%s %s: webhook-signature does not verify", hook, d.event)
		}
		if h.Get("Content-Type") != "application/json" || h.Get("User-Agent") != "Service-Webhook/1.0" ||
			h.Get("X-Service-Hook-Id") != fmt.Sprint(hookIDs[hook]) || !uuidLike.MatchString(d.id) {
			t.Errorf("%s %s: headers %v", hook, d.event, h)
		}
	}
	for _, d := range rcv.of("all") {
		check("all", d)
	}

	// The exact bodies.
	owner := me["id"].(float64)
	fields := map[string][]string{
		"webhook.test":          {"event", "timestamp", "hook_id", "message"},
		"package.created":       {"event", "timestamp", "package_id", "title", "recipient_email", "owner_user_id", "direction", "ttl_days", "expires_at"},
		"package.file_uploaded": {"event", "timestamp", "package_id", "title", "recipient_email", "owner_user_id", "file_id", "filename", "size", "uploaded_by"},
		"package.finalized":     {"event", "timestamp", "package_id", "title", "recipient_email", "owner_user_id", "file_count", "expires_at"},
		"package.downloaded":    {"event", "timestamp", "package_id", "title", "recipient_email", "owner_user_id", "file_id", "filename"},
		"package.revoked":       {"event", "timestamp", "package_id", "title", "recipient_email", "owner_user_id", "actor_user_id"},
		"package.deleted":       {"event", "timestamp", "package_id", "title", "recipient_email", "owner_user_id", "actor_user_id"},
	}
	finExpires, _ := time.Parse(time.RFC3339Nano, fin["expires_at"].(string))
	values := map[string]map[string]any{
		"webhook.test":          {"hook_id": hookIDs["all"]},
		"package.created":       {"direction": "outbound", "ttl_days": float64(3)},
		"package.file_uploaded": {"file_id": f["id"], "filename": "report.pdf", "size": float64(13), "uploaded_by": "owner"},
		"package.finalized":     {"file_count": float64(1), "expires_at": finExpires.UTC().Format("2006-01-02T15:04:05")},
		"package.downloaded":    {"file_id": f["id"], "filename": "report.pdf"},
		"package.revoked":       {"actor_user_id": owner},
		"package.deleted":       {"actor_user_id": owner},
	}
	for event, keys := range fields {
		d := got[event]
		if k := keysInOrder(t, d.body); strings.Join(k, ",") != strings.Join(keys, ",") {
			t.Errorf("%s body keys = %v, want %v", event, k, keys)
		}
		var m map[string]any
		_ = json.Unmarshal(d.body, &m)
		if m["event"] != event || !utcZ.MatchString(fmt.Sprint(m["timestamp"])) {
			t.Errorf("%s: event %v timestamp %v", event, m["event"], m["timestamp"])
		}
		if strings.HasPrefix(event, "package.") {
			if m["package_id"] != id || m["title"] != "Q3 report" || m["recipient_email"] != "bob@example.com" || m["owner_user_id"] != owner {
				t.Errorf("%s: common fields %v", event, m)
			}
		}
		if e, ok := m["expires_at"]; ok && !noZone.MatchString(fmt.Sprint(e)) {
			t.Errorf("%s: expires_at %v has a zone", event, e)
		}
		for k, v := range values[event] {
			if m[k] != v {
				t.Errorf("%s: %s = %v (%T), want %v (%T)", event, k, m[k], m[k], v, v)
			}
		}
	}

	// The filtered subscription got package.finalized and nothing else, identically.
	for _, d := range rcv.of("finalized") {
		if d.event != "package.finalized" {
			t.Errorf("the finalized-only hook got %s", d.event)
		}
		check("finalized", d)
		if !bytes.Equal(d.body, got["package.finalized"].body) {
			t.Errorf("two subscriptions got different bodies for one event:\n%s\n%s", d.body, got["package.finalized"].body)
		}
	}

	// The flaky hook: 8 attempts, one delivery id, then failed; redeliver sends it again.
	servicetest.WaitFor(t, 30*time.Second, "8 attempts at the failing hook", func() bool { return len(rcv.of("flaky")) >= 8 })
	flakyPath := fmt.Sprintf("/api/v1/admin/webhooks/%v/deliveries?limit=100", hookIDs["flaky"])
	var deliveryID string
	servicetest.WaitFor(t, 10*time.Second, "the delivery to be marked failed", func() bool {
		items := a.Must("GET", flakyPath, nil, http.StatusOK)["items"].([]any)
		if len(items) != 8 {
			return false
		}
		last := items[0].(map[string]any)
		deliveryID, _ = last["delivery_id"].(string)
		return last["delivery_status"] == "failed" && last["attempt"] == float64(8) && last["status_code"] == float64(500)
	})
	for _, d := range rcv.of("flaky") {
		if d.id != deliveryID {
			t.Fatalf("retries changed the delivery id: %s vs %s", d.id, deliveryID)
		}
	}
	rcv.setStatus("flaky", http.StatusOK)
	a.Must("POST", fmt.Sprintf("/api/v1/admin/webhooks/%v/deliveries/%s/redeliver", hookIDs["flaky"], deliveryID), nil, http.StatusAccepted)
	servicetest.WaitFor(t, 20*time.Second, "the redelivery", func() bool {
		items := a.Must("GET", flakyPath, nil, http.StatusOK)["items"].([]any)
		return len(items) == 9 && items[0].(map[string]any)["delivery_status"] == "succeeded" && items[0].(map[string]any)["status_code"] == float64(200)
	})
	last := rcv.of("flaky")
	if d := last[len(last)-1]; d.id != deliveryID {
		t.Fatalf("redelivery came with another delivery id: %s", d.id)
	}
}
