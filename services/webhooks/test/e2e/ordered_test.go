package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// seqRequest is one request of the ordered test's receiver.
type seqRequest struct {
	hook  string
	event string
	title string
	seq   string // X-Service-Sequence
	at    time.Time
}

// TestOrderedDeliveryEndToEnd: the gateway numbers each package's events
// (X-Service-Sequence 1, 2, … in the order they happened, on every subscription), and a
// subscription created with "ordering": "package", served by two dispatcher processes,
// gets a package's later events only once its first, failed three times, succeeded,
// while another package's events are not held up.
func TestOrderedDeliveryEndToEnd(t *testing.T) {
	common, token, gwAddr := startGateway(t)
	for range 2 {
		addr := servicetest.FreeAddr(t)
		servicetest.StartProcess(t, bins["webhooks"], append(common, "SHIPFILE_WEBHOOKS_ADDR="+addr,
			"SHIPFILE_WEBHOOK_RETRY_SCHEDULE=1s,1s,1s,1s,1s,1s,1s", "SHIPFILE_WEBHOOK_TIMEOUT=2s"))
		servicetest.WaitReady(t, addr)
	}

	var mu sync.Mutex
	var got []seqRequest
	failures := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var m struct {
			Title string `json:"title"`
		}
		_ = json.Unmarshal(body, &m)
		r := seqRequest{hook: strings.TrimPrefix(req.URL.Path, "/"), event: req.Header.Get("X-Service-Event"),
			title: m.Title, seq: req.Header.Get("X-Service-Sequence"), at: time.Now()}
		mu.Lock()
		got = append(got, r)
		fail := r.hook == "ordered" && r.title == "slow" && r.event == "package.created" && failures < 3
		if fail {
			failures++
		}
		mu.Unlock()
		if fail {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	of := func(hook, title string) []seqRequest {
		mu.Lock()
		defer mu.Unlock()
		var out []seqRequest
		for _, r := range got {
			if r.hook == hook && r.title == title {
				out = append(out, r)
			}
		}
		return out
	}

	a := servicetest.Client{T: t, Base: "http://" + gwAddr, Token: token}
	ordered := a.Must("POST", "/api/v1/admin/webhooks", map[string]any{"url": srv.URL + "/ordered", "ordering": "package"}, http.StatusCreated)
	if ordered["ordering"] != "package" {
		t.Fatalf("ordering on the record: %v", ordered["ordering"])
	}
	a.Must("POST", "/api/v1/admin/webhooks", map[string]any{"url": srv.URL + "/plain"}, http.StatusCreated)

	life := func(title string) {
		p := a.Must("POST", "/api/v1/packages", map[string]any{"title": title, "recipient_email": "bob@example.com", "ttl_days": 3}, http.StatusCreated)
		id := p["id"].(string)
		a.Upload("/api/v1/packages/"+id+"/files", "a.txt", []byte("one"))
		a.Upload("/api/v1/packages/"+id+"/files", "b.txt", []byte("two"))
		a.Must("POST", "/api/v1/packages/"+id+"/finalize", nil, http.StatusOK)
	}
	life("slow")
	life("fast")
	want := []string{"package.created", "package.file_uploaded", "package.file_uploaded", "package.finalized"}

	servicetest.WaitFor(t, 60*time.Second, "every event at both hooks", func() bool {
		return len(of("ordered", "slow")) == len(want)+3 && len(of("ordered", "fast")) == len(want) &&
			len(of("plain", "slow")) == len(want) && len(of("plain", "fast")) == len(want)
	})
	// Numbers: 1, 2, … in the order the events happened, the same on both hooks.
	for _, hook := range []string{"plain", "ordered"} {
		for _, title := range []string{"slow", "fast"} {
			seqs := map[string]string{}
			for _, r := range of(hook, title) {
				if old, ok := seqs[r.seq]; ok && old != r.event {
					t.Errorf("%s %s: X-Service-Sequence %s on %s and %s", hook, title, r.seq, old, r.event)
				}
				seqs[r.seq] = r.event
			}
			for i, e := range want {
				if seqs[strconv.Itoa(i+1)] != e {
					t.Errorf("%s %s: X-Service-Sequence %d is %q, want %s (%v)", hook, title, i+1, seqs[strconv.Itoa(i+1)], e, seqs)
				}
			}
		}
	}
	// The ordered hook: the slow package's events in order, its later ones only after
	// its first succeeded (the fourth request); the fast package's all before that.
	slow := of("ordered", "slow")
	var order []string
	for _, r := range slow {
		order = append(order, r.event+"#"+r.seq)
	}
	wantOrder := "[package.created#1 package.created#1 package.created#1 package.created#1 package.file_uploaded#2 package.file_uploaded#3 package.finalized#4]"
	if fmt.Sprint(order) != wantOrder {
		t.Errorf("the ordered hook got the slow package's events as %v, want %s", order, wantOrder)
	}
	fast := of("ordered", "fast")
	if last := fast[len(fast)-1].at; !last.Before(slow[3].at) {
		t.Errorf("the fast package's last event came at %s, after the slow package's first succeeded (%s)",
			last.Format(time.StampMilli), slow[3].at.Format(time.StampMilli))
	}
}
