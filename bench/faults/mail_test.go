//go:build faults

package faults

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestSMTPOutage: the SMTP server goes away; packages finalized meanwhile queue their
// e-mails, which the mailer retries; once the server is back every e-mail arrives, each
// exactly once.
func TestSMTPOutage(t *testing.T) {
	smtp := rig.StartSMTP(t)
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	s.StartGateway("SHIPFILE_RATE_LIMIT=0")
	s.StartService("mailer", "SHIPFILE_SMTP_HOST="+smtp.Host, "SHIPFILE_SMTP_PORT="+smtp.Port,
		"SHIPFILE_SMTP_TIMEOUT=2s", "SHIPFILE_MAIL_RETRY_SCHEDULE=500ms,1s,1s,2s,2s,4s,8s")

	finalize := func(n int, tag string) []string {
		var to []string
		for i := range n {
			rcpt := fmt.Sprintf("%s-%d@example.com", tag, i)
			id := s.API.MustCreatePackage(t, rig.PackageFor("mail "+tag, rcpt, "Recipient")).Id.String()
			if a, err := s.API.Upload(t.Context(), id, "a.txt", rig.Payload(100, uint64(i))); err != nil || a.Status != http.StatusCreated {
				t.Fatalf("upload: %v %v", a, err)
			}
			s.API.MustFinalize(t, id)
			to = append(to, rcpt)
		}
		return to
	}

	before := finalize(5, "before")
	servicetest.WaitFor(t, 30*time.Second, "the e-mails sent before the outage", func() bool { return len(smtp.Mails()) >= len(before) })

	smtp.Stop()
	stopped := time.Now()
	during := finalize(20, "during")
	time.Sleep(max(0, 5*time.Second-time.Since(stopped)))
	sentWhileDown := len(smtp.Mails()) - len(before)
	smtp.Start()
	record(t, "SMTP server down for", time.Since(stopped).Round(100*time.Millisecond).String())
	want := append(before, during...)
	servicetest.WaitFor(t, 60*time.Second, "every e-mail once the server is back", func() bool { return len(smtp.Mails()) >= len(want) })
	time.Sleep(2 * time.Second) // a duplicate would come now

	got := map[string]int{}
	for _, m := range smtp.Mails() {
		for _, r := range m.To {
			got[strings.Trim(r, "<>")]++
		}
		if !bytes.Contains(m.Data, []byte("/p/")) {
			t.Errorf("an e-mail without a magic link:\n%.400s", m.Data)
		}
	}
	lost, dup := 0, 0
	for _, r := range want {
		switch n := got[r]; {
		case n == 0:
			lost++
		case n > 1:
			dup += n - 1
		}
	}
	record(t, "e-mails queued (finalized) before / during the outage", fmt.Sprintf("%d / %d", len(before), len(during)))
	record(t, "e-mails accepted while the server was down", sentWhileDown)
	record(t, "e-mails received / lost / duplicated", fmt.Sprintf("%d / %d / %d", len(smtp.Mails()), lost, dup))
	if sentWhileDown != 0 || lost != 0 || dup != 0 || len(smtp.Mails()) != len(want) {
		t.Errorf("%d e-mails for %d jobs: %d lost, %d duplicated", len(smtp.Mails()), len(want), lost, dup)
	}
}
