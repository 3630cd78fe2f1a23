// Package e2e runs the real gateway and two mailer processes against real PostgreSQL,
// a private NATS JetStream server, MinIO and an SMTP server (a go-smtp sink), and
// drives them the way a user would: packages finalized through the REST API, e-mails
// read from the SMTP server, the audit log read through the admin API.
package e2e

import (
	"context"
	"crypto/rand"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/mailer/internal/mailtest"
)

// bins are the binaries built once for the package's tests.
var bins map[string]string

func TestMain(m *testing.M) {
	servicetest.RunWithBinaries(m, &bins, map[string]string{
		"gateway": "../../../gateway/cmd/gateway",
		"shipctl": "../../../gateway/cmd/shipctl",
		"mailer":  "../../cmd/mailer",
	})
}

// api calls the gateway with a bearer token.
type api struct{ servicetest.Client }

// audit returns the package's audit entries (newest first) through the admin API.
func (a api) audit(pkg string) []map[string]any {
	a.T.Helper()
	var out []map[string]any
	for _, it := range a.Must("GET", "/api/v1/admin/audit?limit=100&package_id="+pkg, nil, http.StatusOK)["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

func entry(entries []map[string]any, action string) map[string]any {
	for _, e := range entries {
		if e["action"] == action {
			return e
		}
	}
	return nil
}

// TestMailEndToEnd: finalizing an outbound and an inbound package sends one e-mail
// each, through two mailer instances, with the exact magic link the API returned; a
// recipient whose server answers 550 gets one attempt, and the audit log says so.
func TestMailEndToEnd(t *testing.T) {
	_, natsURL := servicetest.StartNATS(t)
	sink := mailtest.NewSink(t)
	sink.SetPolicy(func(stage mailtest.Stage, arg string) *smtp.SMTPError {
		if stage == mailtest.StageRcpt && arg == "nobody@example.net" {
			return mailtest.Refuse(550, [3]int{5, 1, 1}, "no such user")
		}
		return nil
	})

	// An empty database: the gateway (and shipctl) apply the migrations themselves.
	dbURL := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	bucket := "e2e-" + strings.ToLower(rand.Text()[:12])
	common := []string{
		"SHIPFILE_DATABASE_URL=" + dbURL, "SHIPFILE_NATS_URL=" + natsURL, "SHIPFILE_S3_BUCKET=" + bucket,
		"SHIPFILE_SMTP_HOST=" + sink.Host, "SHIPFILE_SMTP_PORT=" + strconv.Itoa(sink.Port),
		"SHIPFILE_SMTP_FROM=shipfile@e2e.example", "SHIPFILE_LOG_LEVEL=info", servicetest.SecretKeyEnv,
	}
	shipctl := func(args ...string) string { return servicetest.RunCommand(t, bins["shipctl"], common, args...) }
	shipctl("user", "create", "--email", "alice@example.com", "--name", "Alice Example", "--role", "admin")
	lines := strings.Split(strings.TrimSpace(shipctl("token", "create", "--email", "alice@example.com", "--name", "e2e")), "\n")
	a := api{servicetest.Client{T: t, Token: lines[len(lines)-1]}}

	gwAddr, gwOps := servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	a.Base = "http://" + gwAddr
	procs := []*servicetest.Process{servicetest.StartProcess(t, bins["gateway"], append(common, "SHIPFILE_HTTP_ADDR="+gwAddr, "SHIPFILE_OPS_ADDR="+gwOps, "SHIPFILE_PUBLIC_URL=http://"+gwAddr))}
	servicetest.WaitReady(t, gwOps)
	for range 2 {
		addr := servicetest.FreeAddr(t)
		procs = append(procs, servicetest.StartProcess(t, bins["mailer"], append(common, "SHIPFILE_MAILER_ADDR="+addr, "SHIPFILE_MAIL_RETRY_SCHEDULE=200ms,200ms,200ms")))
		servicetest.WaitReady(t, addr)
	}

	// Outbound: a file, then finalize.
	out := a.Must("POST", "/api/v1/packages", map[string]any{
		"title": "Q3 report", "recipient_email": "bob@example.com", "recipient_name": "Bob Builder",
		"note": "Figures attached.\nCall me if anything is unclear.", "ttl_days": 3,
	}, http.StatusCreated)
	outID := out["id"].(string)
	a.Upload("/api/v1/packages/"+outID+"/files", "q3.pdf", []byte("%PDF-1.7 tiny"))
	outFin := a.Must("POST", "/api/v1/packages/"+outID+"/finalize", nil, http.StatusOK)
	// Inbound: finalize right away.
	in := a.Must("POST", "/api/v1/packages", map[string]any{
		"title": "Your invoices", "recipient_email": "carol@example.org", "direction": "inbound",
	}, http.StatusCreated)
	inID := in["id"].(string)
	inFin := a.Must("POST", "/api/v1/packages/"+inID+"/finalize", nil, http.StatusOK)
	// One whose recipient's server refuses it.
	bad := a.Must("POST", "/api/v1/packages", map[string]any{
		"title": "Nope", "recipient_email": "nobody@example.net", "direction": "inbound",
	}, http.StatusCreated)
	badID := bad["id"].(string)
	a.Must("POST", "/api/v1/packages/"+badID+"/finalize", nil, http.StatusOK)

	sink.WaitN(t, 2, 60*time.Second)
	servicetest.WaitFor(t, 30*time.Second, "both e-mails sent and the rejection audited", func() bool {
		return entry(a.audit(outID), "mail.sent") != nil && entry(a.audit(inID), "mail.sent") != nil &&
			entry(a.audit(badID), "mail.failed") != nil
	})
	settled(t, natsURL)
	msgs := sink.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d e-mails, want 2 (the refused one never accepted)", len(msgs))
	}
	if n := sink.Transactions(); n != 3 {
		t.Errorf("%d SMTP transactions, want 3: one per package, no retry after the 550", n)
	}

	byRcpt := map[string]mailtest.Parsed{}
	for _, m := range msgs {
		if len(m.To) != 1 {
			t.Fatalf("envelope recipients %v", m.To)
		}
		byRcpt[m.To[0]] = m.Parse(t)
	}
	for _, c := range []struct {
		rcpt, subject, to, button string
		fin                       map[string]any
		note                      string
	}{
		{"bob@example.com", "Alice Example has shared files with you: Q3 report", `"Bob Builder" <bob@example.com>`, "Download the files",
			outFin, "Figures attached.\nCall me if anything is unclear."},
		{"carol@example.org", "Alice Example requests files from you: Your invoices", "<carol@example.org>", "Upload your files", inFin, ""},
	} {
		p, ok := byRcpt[c.rcpt]
		if !ok {
			t.Fatalf("no e-mail to %s", c.rcpt)
		}
		link := c.fin["magic_link"].(string)
		if !strings.HasPrefix(link, "http://"+gwAddr+"/p/") || len(link) != len("http://"+gwAddr+"/p/")+43 {
			t.Fatalf("magic link %q", link)
		}
		expires, err := time.Parse(time.RFC3339Nano, c.fin["expires_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		human := expires.UTC().Format("Monday, 2 January 2006 at 15:04 MST")
		if p.Subject != c.subject || p.Header.Get("To") != c.to || p.ContentType != "multipart/alternative" ||
			strings.Join(p.PartOrder, ",") != "text/plain,text/html" {
			t.Errorf("%s: subject %q, To %q, %s %v", c.rcpt, p.Subject, p.Header.Get("To"), p.ContentType, p.PartOrder)
		}
		text, html := p.Parts["text/plain"], p.Parts["text/html"]
		if !strings.Contains(text, "\n"+link+"\n") || !strings.Contains(html, `href="`+link+`"`) {
			t.Errorf("%s: the exact magic link is not in both parts", c.rcpt)
		}
		if !strings.Contains(text, "The link works until "+human+".") || !strings.Contains(html, human) {
			t.Errorf("%s: expiry %q missing:\n%s", c.rcpt, human, text)
		}
		if c.note != "" && !strings.Contains(text, c.note) {
			t.Errorf("%s: note missing:\n%s", c.rcpt, text)
		}
		if !strings.Contains(html, ">"+c.button+"</a>") {
			t.Errorf("%s: no %q button", c.rcpt, c.button)
		}
		// The link works: it is the recipient's page.
		resp, err := http.Get(link)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s: the link from the e-mail answers %v %v", c.rcpt, resp, err)
		} else {
			resp.Body.Close()
		}
	}

	// The audit log through the API: who got what, and why one was not sent.
	for id, rcpt := range map[string]string{outID: "bob@example.com", inID: "carol@example.org"} {
		e := entry(a.audit(id), "mail.sent")
		if e["actor"] != "system" || e["detail"] != "to "+rcpt || e["actor_user_id"] != nil {
			t.Errorf("mail.sent entry %v", e)
		}
	}
	e := entry(a.audit(badID), "mail.failed")
	if e["actor"] != "system" || e["detail"] != "to nobody@example.net: 550 5.1.1 no such user" {
		t.Errorf("mail.failed entry %v", e)
	}
	if entry(a.audit(badID), "mail.sent") != nil {
		t.Error("the refused e-mail is audited as sent")
	}

	// No process logged a magic link's token.
	for _, fin := range []map[string]any{outFin, inFin} {
		link := fin["magic_link"].(string)
		token := link[strings.LastIndex(link, "/")+1:]
		for i, p := range procs {
			if strings.Contains(p.Logs(), token) {
				t.Errorf("process %d logged a magic link", i)
			}
		}
	}
	if !strings.Contains(procs[1].Logs()+procs[2].Logs(), "e-mail sent") {
		t.Error("no mailer logged a sent e-mail")
	}
}

// settled waits until the mail consumer holds no message, so no e-mail can follow.
func settled(t *testing.T, natsURL string) {
	t.Helper()
	js := mailtest.Connect(t, natsURL)
	servicetest.WaitFor(t, 30*time.Second, "the mail queue to drain", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := js.Consumer(ctx, events.StreamMail, "mailer")
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
}
