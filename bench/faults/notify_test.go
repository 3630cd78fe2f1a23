//go:build faults

package faults

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestNotifyMailerKilledMidBurst: two mailers share the owner notifications; one is
// killed (SIGKILL) in the middle of a burst of recipient uploads. The burst's state is
// in PostgreSQL, so the other sends exactly one e-mail for it, listing every file of
// the burst. Twice, killing each mailer once.
func TestNotifyMailerKilledMidBurst(t *testing.T) {
	smtp := rig.StartSMTP(t)
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	s.StartGateway("SHIPFILE_RATE_LIMIT=0")
	env := []string{"SHIPFILE_SMTP_HOST=" + smtp.Host, "SHIPFILE_SMTP_PORT=" + smtp.Port, "SHIPFILE_NOTIFY_QUIET=3s",
		"SHIPFILE_NOTIFY_POLL=100ms", "SHIPFILE_MAIL_RETRY_SCHEDULE=500ms,1s,2s", "SHIPFILE_PUBLIC_URL=http://" + s.Gateway.Addr}
	mailers := []*rig.Proc{s.StartService("mailer", env...), s.StartService("mailer", env...)}

	body := rig.PackageBody("invoices")
	inbound := apiclient.CreatePackageDirectionInbound
	body.Direction = &inbound
	id := s.API.MustCreatePackage(t, body).Id.String()
	token := rig.LinkToken(s.API.MustFinalize(t, id).MagicLink)
	servicetest.WaitFor(t, 30*time.Second, "the recipient's e-mail", func() bool { return len(smtp.Mails()) >= 1 })

	upload := func(name string) {
		t.Helper()
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		w, _ := mw.CreateFormFile("file", name)
		_, _ = w.Write([]byte("invoice " + name))
		_ = mw.Close()
		req, _ := http.NewRequest("POST", "http://"+s.Gateway.Addr+"/api/v1/links/"+token+"/files", &b)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("upload %s: %v %v", name, resp, err)
		}
		resp.Body.Close()
	}
	ownerMails := func() []rig.Mail {
		var out []rig.Mail
		for _, m := range smtp.Mails() {
			if len(m.To) == 1 && strings.Trim(m.To[0], "<>") == "bench@example.com" {
				out = append(out, m)
			}
		}
		return out
	}
	conn, err := pgx.Connect(context.Background(), s.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	nothingDue := func() bool {
		var n int
		err := conn.QueryRow(context.Background(), "SELECT count(*) FROM owner_notifications WHERE state IN ('open', 'pending')").Scan(&n)
		return err == nil && n == 0
	}

	for round, victim := range []int{0, 1} {
		names := make([]string, 6)
		for i := range names {
			names[i] = fmt.Sprintf("r%d-%d.pdf", round, i)
		}
		for _, n := range names[:3] {
			upload(n)
		}
		mailers[victim].Kill()
		killed := time.Now()
		for _, n := range names[3:] {
			upload(n)
		}
		servicetest.WaitFor(t, 60*time.Second, "the burst's e-mail", func() bool { return len(ownerMails()) >= round+1 })
		record(t, fmt.Sprintf("round %d: kill to e-mail", round+1), time.Since(killed).Round(100*time.Millisecond).String())
		mailers[victim].Start()
		mailers[victim].WaitReady(30 * time.Second)
		servicetest.WaitFor(t, 30*time.Second, "no notification left to send", nothingDue)
		time.Sleep(2 * time.Second) // a duplicate would come now
		got := ownerMails()
		if len(got) != round+1 {
			t.Fatalf("round %d: %d owner e-mails, want %d", round+1, len(got), round+1)
		}
		last := string(got[round].Data)
		for _, n := range names {
			if !strings.Contains(last, n) {
				t.Errorf("round %d: the e-mail does not list %s", round+1, n)
			}
		}
	}
	record(t, "owner e-mails for 2 bursts with a mailer killed in each", len(ownerMails()))
}
