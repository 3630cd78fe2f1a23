package e2e

import (
	"context"
	"crypto/rand"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/mailer/internal/mailtest"
)

// TestOwnerNotificationsEndToEnd: with the real gateway and two mailer processes, an
// outbound package's owner gets one e-mail at its first download (none for a package
// with notify_owner off), and an inbound package's owner one e-mail per burst of
// recipient uploads, sent once the burst has been quiet for SHIPFILE_NOTIFY_QUIET, listing
// its files, with a link to the package's page. Each is audited.
func TestOwnerNotificationsEndToEnd(t *testing.T) {
	_, natsURL := servicetest.StartNATS(t)
	sink := mailtest.NewSink(t)
	dbURL := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	bucket := "e2e-" + strings.ToLower(rand.Text()[:12])
	gwAddr := servicetest.FreeAddr(t)
	common := []string{
		"SHIPFILE_DATABASE_URL=" + dbURL, "SHIPFILE_NATS_URL=" + natsURL, "SHIPFILE_S3_BUCKET=" + bucket,
		"SHIPFILE_SMTP_HOST=" + sink.Host, "SHIPFILE_SMTP_PORT=" + strconv.Itoa(sink.Port),
		"SHIPFILE_SMTP_FROM=shipfile@e2e.example", "SHIPFILE_PUBLIC_URL=http://" + gwAddr, servicetest.SecretKeyEnv,
	}
	shipctl := func(args ...string) string { return servicetest.RunCommand(t, bins["shipctl"], common, args...) }
	shipctl("user", "create", "--email", "alice@example.com", "--name", "Alice Example", "--role", "admin")
	lines := strings.Split(strings.TrimSpace(shipctl("token", "create", "--email", "alice@example.com", "--name", "e2e")), "\n")
	a := api{servicetest.Client{T: t, Token: lines[len(lines)-1], Base: "http://" + gwAddr}}
	link := servicetest.Client{T: t, Base: "http://" + gwAddr}

	gwOps := servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["gateway"], append(common, "SHIPFILE_HTTP_ADDR="+gwAddr, "SHIPFILE_OPS_ADDR="+gwOps))
	servicetest.WaitReady(t, gwOps)
	for range 2 {
		addr := servicetest.FreeAddr(t)
		servicetest.StartProcess(t, bins["mailer"], append(common, "SHIPFILE_MAILER_ADDR="+addr,
			"SHIPFILE_NOTIFY_QUIET=3s", "SHIPFILE_NOTIFY_POLL=100ms", "SHIPFILE_MAIL_RETRY_SCHEDULE=200ms,200ms"))
		servicetest.WaitReady(t, addr)
	}
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	finalize := func(body map[string]any, files ...string) (string, string) {
		p := a.Must("POST", "/api/v1/packages", body, http.StatusCreated)
		id := p["id"].(string)
		for _, f := range files {
			a.Upload("/api/v1/packages/"+id+"/files", f, []byte("bytes of "+f))
		}
		fin := a.Must("POST", "/api/v1/packages/"+id+"/finalize", nil, http.StatusOK)
		ml := fin["magic_link"].(string)
		return id, ml[strings.LastIndex(ml, "/")+1:]
	}
	outID, outLink := finalize(map[string]any{"title": "Q3 report", "recipient_email": "bob@example.com", "recipient_name": "Bob Builder"}, "q3.pdf", "q3.xlsx")
	_, quietLink := finalize(map[string]any{"title": "Quiet", "recipient_email": "dan@example.com", "notify_owner": false}, "x.txt")
	inID, inLink := finalize(map[string]any{"title": "Your invoices", "recipient_email": "carol@example.org", "direction": "inbound"})
	sink.WaitN(t, 3, 60*time.Second) // the recipients' e-mails

	toOwner := func() []mailtest.Parsed {
		var out []mailtest.Parsed
		for _, m := range sink.Messages() {
			if len(m.To) == 1 && m.To[0] == "alice@example.com" {
				out = append(out, m.Parse(t))
			}
		}
		return out
	}
	// Several downloads, one file and the archive, on both outbound packages.
	for _, l := range []string{outLink, quietLink} {
		files := link.Must("GET", "/api/v1/links/"+l, nil, http.StatusOK)["files"].([]any)
		for range 2 {
			for _, f := range files {
				link.Must("GET", f.(map[string]any)["download_url"].(string), nil, http.StatusOK)
			}
		}
		link.Must("GET", "/api/v1/links/"+l+"/archive", nil, http.StatusOK)
	}
	// A burst of three recipient uploads.
	for _, name := range []string{"jan.pdf", "feb.pdf", "mar.pdf"} {
		link.Upload("/api/v1/links/"+inLink+"/files", name, []byte("invoice "+name))
	}
	servicetest.WaitFor(t, 60*time.Second, "the download and the first burst's e-mails", func() bool { return len(toOwner()) >= 2 })
	// A second burst after the first was sent: a second e-mail.
	link.Upload("/api/v1/links/"+inLink+"/files", "apr.pdf", []byte("invoice apr"))
	servicetest.WaitFor(t, 60*time.Second, "the second burst's e-mail", func() bool { return len(toOwner()) >= 3 })
	// Nothing is left to send: no second e-mail can follow.
	servicetest.WaitFor(t, 30*time.Second, "no notification left to send", func() bool {
		var n int
		err := pool.QueryRow(context.Background(), "SELECT count(*) FROM owner_notifications WHERE state IN ('open', 'pending')").Scan(&n)
		return err == nil && n == 0
	})

	subjects := map[string]mailtest.Parsed{}
	for _, p := range toOwner() {
		if _, dup := subjects[p.Subject]; dup {
			t.Fatalf("two e-mails %q", p.Subject)
		}
		subjects[p.Subject] = p
	}
	want := []string{"Bob Builder downloaded Q3 report", "carol@example.org uploaded 3 files to Your invoices", "carol@example.org uploaded 1 file to Your invoices"}
	if len(subjects) != len(want) {
		t.Fatalf("owner e-mails %v, want %v", keysOf(subjects), want)
	}
	for _, s := range want {
		p, ok := subjects[s]
		if !ok {
			t.Fatalf("no e-mail %q; got %v", s, keysOf(subjects))
		}
		text, html := p.Parts["text/plain"], p.Parts["text/html"]
		pkg := outID
		if strings.Contains(s, "invoices") {
			pkg = inID
		}
		page := "http://" + gwAddr + "/packages/" + pkg
		if !strings.Contains(text, page) || !strings.Contains(html, `href="`+page+`"`) {
			t.Errorf("%q: no link to the package's page:\n%s", s, text)
		}
	}
	first := subjects[want[1]].Parts["text/plain"]
	for _, f := range []string{"- jan.pdf (15 B)", "- feb.pdf (15 B)", "- mar.pdf (15 B)"} {
		if !strings.Contains(first, f) {
			t.Errorf("burst e-mail does not list %q:\n%s", f, first)
		}
	}
	if strings.Contains(first, "apr.pdf") || !strings.Contains(subjects[want[2]].Parts["text/plain"], "apr.pdf") {
		t.Error("the second burst's file is in the wrong e-mail")
	}
	// Audited: the owner's e-mails beside the recipient's.
	var sent int
	for _, e := range a.audit(inID) {
		if e["action"] == "mail.sent" && e["detail"] == "owner notification (uploads) to alice@example.com" {
			sent++
		}
	}
	if sent != 2 {
		t.Errorf("%d audited upload notifications, want 2", sent)
	}
	if e := entry(a.audit(outID), "mail.sent"); e == nil {
		t.Error("no mail.sent entry for the outbound package")
	}
}

func keysOf(m map[string]mailtest.Parsed) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
