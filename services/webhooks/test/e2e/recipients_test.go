package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestSeveralRecipientsWebhooks: a webhook receiver sees which recipient did what
// (docs/API.md, "Several recipients"): package.finalized lists the recipients,
// package.downloaded carries the address of whoever downloaded, and revoking one
// recipient fires package.revoked with theirs and all_links false.
func TestSeveralRecipientsWebhooks(t *testing.T) {
	common, token, gwAddr := startGateway(t)
	hooksAddr := servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["webhooks"], append(common, "SHIPFILE_WEBHOOKS_ADDR="+hooksAddr, "SHIPFILE_WEBHOOK_TIMEOUT=2s"))
	servicetest.WaitReady(t, hooksAddr)

	rcv := &receiver{statuses: map[string]int{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	a := servicetest.Client{T: t, Base: "http://" + gwAddr, Token: token}
	a.Must("POST", "/api/v1/admin/webhooks", map[string]any{"url": srv.URL + "/all"}, http.StatusCreated)

	p := a.Must("POST", "/api/v1/packages", map[string]any{"title": "Contract", "recipients": []map[string]any{
		{"email": "ann@example.com", "name": "Ann"}, {"email": "bob@example.com", "name": "Bob"},
	}}, http.StatusCreated)
	id := p["id"].(string)
	f := a.Upload("/api/v1/packages/"+id+"/files", "contract.pdf", []byte("%PDF-1.7 tiny"))
	fin := a.Must("POST", "/api/v1/packages/"+id+"/finalize", nil, http.StatusOK)
	links := map[string]string{}
	var annID string
	for _, x := range fin["links"].([]any) {
		l := x.(map[string]any)
		links[l["email"].(string)] = l["magic_link"].(string)
		if l["email"] == "ann@example.com" {
			annID = l["recipient_id"].(string)
		}
	}
	bobLink := links["bob@example.com"]
	resp, err := http.Get(a.Base + "/api/v1/links/" + bobLink[strings.LastIndex(bobLink, "/")+1:] + "/files/" + f["id"].(string))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's download: %v %v", err, resp)
	}
	resp.Body.Close()
	a.Must("POST", "/api/v1/packages/"+id+"/recipients/"+annID+"/revoke", nil, http.StatusOK)

	bodies := map[string]map[string]any{}
	servicetest.WaitFor(t, 30*time.Second, "finalized, downloaded and revoked at the hook", func() bool {
		for _, d := range rcv.of("all") {
			var m map[string]any
			if json.Unmarshal(d.body, &m) == nil {
				bodies[d.event] = m
			}
		}
		return bodies["package.finalized"] != nil && bodies["package.downloaded"] != nil && bodies["package.revoked"] != nil
	})
	if got := bodies["package.downloaded"]["recipient_email"]; got != "bob@example.com" {
		t.Errorf("package.downloaded recipient_email = %v, want bob@example.com (whoever downloaded)", got)
	}
	if list, _ := json.Marshal(bodies["package.finalized"]["recipients"]); string(list) != `["ann@example.com","bob@example.com"]` {
		t.Errorf("package.finalized recipients = %s", list)
	}
	if r := bodies["package.revoked"]; r["recipient_email"] != "ann@example.com" || r["all_links"] != false {
		t.Errorf("package.revoked of one recipient = %v", r)
	}
	if bodies["package.created"] != nil && bodies["package.created"]["recipient_email"] != "ann@example.com" {
		t.Errorf("package.created recipient_email = %v, want the first recipient's", bodies["package.created"]["recipient_email"])
	}
}
