package transport_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/mailer/internal/app"
	"github.com/shipfile/shipfile/services/mailer/internal/mailtest"
	"github.com/shipfile/shipfile/services/mailer/internal/transport"
)

// fixture is one test's database, private NATS server and SMTP sink.
type fixture struct {
	pool *pgxpool.Pool
	js   jetstream.JetStream
	sink *mailtest.Sink
}

func setup(t *testing.T, opts ...mailtest.SinkOption) fixture {
	t.Helper()
	t.Parallel()
	pool, _ := schematest.Pool(t)
	js, _ := mailtest.NATS(t)
	return fixture{pool: pool, js: js, sink: mailtest.NewSink(t, opts...)}
}

// publish queues job for an active package, as finalizing it does.
func (f fixture) publish(t *testing.T, job *eventsv1.MailJob) {
	t.Helper()
	mailtest.InsertPackage(t, f.pool, job, "active")
	mailtest.Publish(t, f.js, job)
}

func (f fixture) start(t *testing.T, cfg mailtest.Config) *mailtest.Instance {
	t.Helper()
	cfg.Pool, cfg.JS = f.pool, f.js
	if cfg.SMTP.Host == "" {
		cfg.SMTP = f.sink.SMTPConfig()
	}
	return mailtest.Start(t, cfg)
}

// settled waits until the mail consumer holds no message: every job was acknowledged
// or terminated, so none can come back.
func (f fixture) settled(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := f.js.Consumer(ctx, events.StreamMail, transport.ConsumerName)
		var pending, ackPending uint64 = 1, 1
		if err == nil {
			if ci, err := info.Info(ctx); err == nil {
				pending, ackPending = ci.NumPending, uint64(ci.NumAckPending)
			}
		}
		cancel()
		if pending == 0 && ackPending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mail consumer still holds %d pending and %d unacknowledged jobs after %s", pending, ackPending, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f fixture) delivery(t *testing.T, jobID string) mailtest.DeliveryRow {
	t.Helper()
	d, ok := mailtest.Delivery(t, f.pool, jobID)
	if !ok {
		t.Fatalf("no mail_deliveries row for job %s", jobID)
	}
	return d
}

func (f fixture) waitState(t *testing.T, jobID, state string, within time.Duration) mailtest.DeliveryRow {
	t.Helper()
	var d mailtest.DeliveryRow
	deadline := time.Now().Add(within)
	for {
		var ok bool
		if d, ok = mailtest.Delivery(t, f.pool, jobID); ok && d.State == state {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: %+v after %s, want state %s", jobID, d, within, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSendsOutboundAndInboundEmails(t *testing.T) {
	f := setup(t)
	in := f.start(t, mailtest.Config{})

	out := mailtest.NewJob(app.KindOutbound, "bob@example.com")
	inb := mailtest.NewJob(app.KindInbound, "carol@example.org")
	inb.RecipientName, inb.Title, inb.Note = "Carol", "Invoices for March", ""
	f.publish(t, out)
	f.publish(t, inb)
	msgs := f.sink.WaitN(t, 2, 20*time.Second)

	byRcpt := map[string]mailtest.Message{}
	for _, m := range msgs {
		if len(m.To) != 1 {
			t.Fatalf("envelope recipients %v, want exactly one", m.To)
		}
		byRcpt[m.To[0]] = m
		if m.From != "shipfile@test.example" {
			t.Errorf("MAIL FROM %q", m.From)
		}
	}
	const expiry = "Saturday, 28 November 2026 at 16:32 UTC"
	for _, c := range []struct {
		job                    *eventsv1.MailJob
		to, subject, action    string
		button                 string
		textWants, textRefuses []string
	}{
		{out, `"Bob Builder" <bob@example.com>`, "Alice Example has shared files with you: Q3 report", "Download the files:", "Download the files",
			[]string{"Hello Bob Builder,", "Alice Example wrote:\n\nHere are the figures.\nBest, Alice\n"}, nil},
		{inb, `"Carol" <carol@example.org>`, "Alice Example requests files from you: Invoices for March", "Upload your files:", "Upload your files",
			[]string{"Hello Carol,"}, []string{"wrote:"}},
	} {
		t.Run(c.job.Kind, func(t *testing.T) {
			m, ok := byRcpt[c.job.RecipientEmail]
			if !ok {
				t.Fatalf("no e-mail to %s", c.job.RecipientEmail)
			}
			p := m.Parse(t)
			if p.Subject != c.subject {
				t.Errorf("Subject %q, want %q", p.Subject, c.subject)
			}
			for k, want := range map[string]string{
				"To":             c.to,
				"From":           `"Alice Example (via shipfile)" <shipfile@test.example>`,
				"Reply-To":       `"Alice Example" <alice@example.com>`,
				"Message-Id":     "<" + c.job.JobId + "@test.example>",
				"Mime-Version":   "1.0",
				"Auto-Submitted": "auto-generated",
			} {
				if got := p.Header.Get(k); got != want {
					t.Errorf("%s: %q, want %q", k, got, want)
				}
			}
			if d, err := p.Header.Date(); err != nil || time.Since(d).Abs() > time.Minute {
				t.Errorf("Date %q: %v", p.Header.Get("Date"), err)
			}
			for _, k := range []string{"Bcc", "Cc", "User-Agent", "X-Mailer"} {
				if v := p.Header.Get(k); v != "" {
					t.Errorf("unexpected header %s: %q", k, v)
				}
			}
			if p.ContentType != "multipart/alternative" || strings.Join(p.PartOrder, ",") != "text/plain,text/html" {
				t.Fatalf("MIME: %s with %v, want multipart/alternative with text/plain then text/html", p.ContentType, p.PartOrder)
			}
			text, html := p.Parts["text/plain"], p.Parts["text/html"]
			for _, want := range append([]string{c.action + "\n" + mailtest.Link + "\n", "The link works until " + expiry + "."}, c.textWants...) {
				if !strings.Contains(text, want) {
					t.Errorf("text part lacks %q:\n%s", want, text)
				}
			}
			for _, refuse := range c.textRefuses {
				if strings.Contains(text, refuse) {
					t.Errorf("text part has %q:\n%s", refuse, text)
				}
			}
			for _, want := range []string{`<a href="` + mailtest.Link + `"`, ">" + c.button + "</a>", "<strong>" + expiry + "</strong>"} {
				if !strings.Contains(html, want) {
					t.Errorf("HTML part lacks %q", want)
				}
			}

			d := f.waitState(t, c.job.JobId, app.StateSent, 10*time.Second)
			if d.Attempts != 1 || d.MessageID != "<"+c.job.JobId+"@test.example>" || d.SentAt == nil || d.LastError != "" ||
				d.Kind != c.job.Kind || d.Recipient != c.job.RecipientEmail || d.PackageID != c.job.PackageId {
				t.Errorf("delivery %+v", d)
			}
			audit := mailtest.Audit(t, f.pool, c.job.PackageId)
			want := mailtest.AuditRow{Actor: "system", Action: "mail.sent", Detail: "to " + c.job.RecipientEmail}
			if len(audit) != 1 || audit[0] != want {
				t.Errorf("audit %+v, want [%+v]", audit, want)
			}
		})
	}

	f.settled(t, 10*time.Second)
	servicetest.WaitFor(t, 5*time.Second, "metrics", func() bool {
		return mailtest.Counter(t, in.Registry, "shipfile_mailer_jobs_total", app.OutcomeSent) == 2 &&
			mailtest.HistogramCount(t, in.Registry, "shipfile_mailer_send_duration_seconds") == 2 &&
			mailtest.Gauge(t, in.Registry, "shipfile_mailer_queue_depth") == 0
	})
}

// The same job arriving again (an acknowledgement lost, a republish after the duplicate
// window) is acknowledged without a second e-mail, also across two instances.
func TestRedeliveredJobSendsNoSecondEmail(t *testing.T) {
	f := setup(t)
	a := f.start(t, mailtest.Config{})
	b := f.start(t, mailtest.Config{})

	job := mailtest.NewJob(app.KindOutbound, "bob@example.com")
	f.publish(t, job)
	f.sink.WaitN(t, 1, 20*time.Second)
	f.waitState(t, job.JobId, app.StateSent, 10*time.Second)
	f.settled(t, 10*time.Second)

	// Redeliveries under other message ids (the stream's duplicate window would drop a
	// second publish with the job id), while other jobs flow through both instances.
	data, err := events.MarshalMailJob(job)
	if err != nil {
		t.Fatal(err)
	}
	var others []*eventsv1.MailJob
	for i := range 3 {
		mailtest.PublishRaw(t, f.js, events.MailSubject(job.Kind), job.JobId+"-again-"+string(rune('a'+i)), data)
		other := mailtest.NewJob(app.KindInbound, "carol@example.org")
		others = append(others, other)
		f.publish(t, other)
	}
	f.sink.WaitN(t, 4, 20*time.Second)
	f.settled(t, 20*time.Second)

	count := map[string]int{}
	for _, m := range f.sink.Messages() {
		count[m.Parse(t).Header.Get("Message-Id")]++
	}
	for _, j := range append(others, job) {
		if n := count["<"+j.JobId+"@test.example>"]; n != 1 {
			t.Errorf("job %s: %d e-mails, want 1", j.JobId, n)
		}
	}
	if n := len(f.sink.Messages()); n != 4 {
		t.Errorf("%d e-mails in all, want 4", n)
	}
	if d := f.delivery(t, job.JobId); d.Attempts != 1 || d.State != app.StateSent {
		t.Errorf("delivery %+v, want one attempt, sent", d)
	}
	if audit := mailtest.Audit(t, f.pool, job.PackageId); len(audit) != 1 {
		t.Errorf("audit %+v, want one mail.sent", audit)
	}
	dups := mailtest.Counter(t, a.Registry, "shipfile_mailer_jobs_total", app.OutcomeDuplicate) +
		mailtest.Counter(t, b.Registry, "shipfile_mailer_jobs_total", app.OutcomeDuplicate)
	sent := mailtest.Counter(t, a.Registry, "shipfile_mailer_jobs_total", app.OutcomeSent) +
		mailtest.Counter(t, b.Registry, "shipfile_mailer_jobs_total", app.OutcomeSent)
	if dups != 3 || sent != 4 {
		t.Errorf("duplicates %v, sent %v across both instances; want 3 and 4", dups, sent)
	}
}

// A temporary outage — the server down (connection refused), then 451 and 421 replies —
// is retried on the schedule until the e-mail goes out, once.
func TestRetriesThroughATemporaryOutage(t *testing.T) {
	f := setup(t)
	in := f.start(t, mailtest.Config{Schedule: mailtest.Schedule(300*time.Millisecond, 6)})

	f.sink.Down()
	job := mailtest.NewJob(app.KindOutbound, "bob@example.com")
	f.publish(t, job)
	servicetest.WaitFor(t, 20*time.Second, "two refused connections", func() bool {
		d, ok := mailtest.Delivery(t, f.pool, job.JobId)
		return ok && d.Attempts >= 2
	})
	d := f.delivery(t, job.JobId)
	if d.State != app.StatePending || !strings.Contains(d.LastError, "connection refused") {
		t.Fatalf("while the server is down: %+v", d)
	}

	// Back, but busy: 451 to the first MAIL FROM, 421 to the next DATA, then fine.
	var mu sync.Mutex
	var mails, datas int
	f.sink.SetPolicy(func(stage mailtest.Stage, _ string) *smtp.SMTPError {
		mu.Lock()
		defer mu.Unlock()
		switch stage {
		case mailtest.StageMail:
			mails++
			if mails == 1 {
				return mailtest.Refuse(451, [3]int{4, 3, 0}, "local problem, try again later")
			}
		case mailtest.StageData:
			datas++
			if datas == 1 {
				return mailtest.Refuse(421, [3]int{4, 4, 2}, "closing, try again")
			}
		}
		return nil
	})
	f.sink.Up(t)
	msgs := f.sink.WaitN(t, 1, 20*time.Second)
	d = f.waitState(t, job.JobId, app.StateSent, 10*time.Second)
	f.settled(t, 10*time.Second)

	if len(f.sink.Messages()) != 1 || msgs[0].To[0] != "bob@example.com" {
		t.Fatalf("e-mails %d, want exactly 1 to bob", len(f.sink.Messages()))
	}
	if d.Attempts < 4 || d.LastError != "" {
		t.Errorf("delivery %+v: want at least 4 attempts (2 refused, 451, 421) and no error", d)
	}
	retried := mailtest.Counter(t, in.Registry, "shipfile_mailer_jobs_total", app.OutcomeRetried)
	if retried != float64(d.Attempts-1) || mailtest.Counter(t, in.Registry, "shipfile_mailer_jobs_total", app.OutcomeSent) != 1 {
		t.Errorf("retried = %v with %d attempts; sent = %v", retried, d.Attempts,
			mailtest.Counter(t, in.Registry, "shipfile_mailer_jobs_total", app.OutcomeSent))
	}
	if n := mailtest.HistogramCount(t, in.Registry, "shipfile_mailer_send_duration_seconds"); n != uint64(d.Attempts) {
		t.Errorf("send duration observed %d times, want %d", n, d.Attempts)
	}
	if audit := mailtest.Audit(t, f.pool, job.PackageId); len(audit) != 1 || audit[0].Action != "mail.sent" {
		t.Errorf("audit %+v, want only mail.sent", audit)
	}
}

// A 550 for one recipient is final: one attempt, the job failed with the server's
// reply, a mail.failed audit entry; other e-mails are unaffected.
func TestNoRetryAfter550(t *testing.T) {
	f := setup(t)
	f.sink.SetPolicy(func(stage mailtest.Stage, arg string) *smtp.SMTPError {
		if stage == mailtest.StageRcpt && arg == "nobody@example.com" {
			return mailtest.Refuse(550, [3]int{5, 1, 1}, "mailbox unavailable")
		}
		return nil
	})
	in := f.start(t, mailtest.Config{Schedule: mailtest.Schedule(100*time.Millisecond, 5)})

	bad := mailtest.NewJob(app.KindInbound, "nobody@example.com")
	good := mailtest.NewJob(app.KindOutbound, "bob@example.com")
	f.publish(t, bad)
	f.publish(t, good)
	f.sink.WaitN(t, 1, 20*time.Second)
	d := f.waitState(t, bad.JobId, app.StateFailed, 10*time.Second)
	f.settled(t, 10*time.Second) // acknowledged: no retry can come

	if d.Attempts != 1 || !strings.Contains(d.LastError, "550") || !strings.Contains(d.LastError, "mailbox unavailable") || d.SentAt != nil {
		t.Errorf("failed delivery %+v", d)
	}
	if n := f.sink.Transactions(); n != 2 {
		t.Errorf("%d SMTP transactions, want 2 (one each)", n)
	}
	if msgs := f.sink.Messages(); len(msgs) != 1 || msgs[0].To[0] != "bob@example.com" {
		t.Errorf("e-mails %+v, want only bob's", msgs)
	}
	want := mailtest.AuditRow{Actor: "system", Action: "mail.failed", Detail: "to nobody@example.com: 550 5.1.1 mailbox unavailable"}
	if audit := mailtest.Audit(t, f.pool, bad.PackageId); len(audit) != 1 || audit[0] != want {
		t.Errorf("audit %+v, want [%+v]", audit, want)
	}
	if got := mailtest.Counter(t, in.Registry, "shipfile_mailer_jobs_total", app.OutcomeFailed); got != 1 {
		t.Errorf("failed = %v, want 1", got)
	}
	if got := mailtest.Counter(t, in.Registry, "shipfile_mailer_jobs_total", app.OutcomeRetried); got != 0 {
		t.Errorf("retried = %v, want 0", got)
	}
}

// A server that keeps answering 4xx exhausts the schedule: len(schedule)+1 attempts,
// then the job fails for good and says so in the audit log.
func TestGivesUpWhenTheScheduleRunsOut(t *testing.T) {
	f := setup(t)
	f.sink.SetPolicy(func(stage mailtest.Stage, _ string) *smtp.SMTPError {
		if stage == mailtest.StageRcpt {
			return mailtest.Refuse(452, [3]int{4, 2, 2}, "mailbox full")
		}
		return nil
	})
	in := f.start(t, mailtest.Config{Schedule: mailtest.Schedule(100*time.Millisecond, 3)})
	job := mailtest.NewJob(app.KindOutbound, "bob@example.com")
	f.publish(t, job)
	d := f.waitState(t, job.JobId, app.StateFailed, 20*time.Second)
	f.settled(t, 10*time.Second)
	if d.Attempts != 4 || f.sink.Transactions() != 4 || len(f.sink.Messages()) != 0 {
		t.Fatalf("delivery %+v, %d transactions, %d e-mails; want 4 attempts and no e-mail", d, f.sink.Transactions(), len(f.sink.Messages()))
	}
	audit := mailtest.Audit(t, f.pool, job.PackageId)
	if len(audit) != 1 || audit[0].Action != "mail.failed" || !strings.HasPrefix(audit[0].Detail, "to bob@example.com: gave up after 4 attempts: ") ||
		!strings.Contains(audit[0].Detail, "452") {
		t.Errorf("audit %+v", audit)
	}
	if r, fl := mailtest.Counter(t, in.Registry, "shipfile_mailer_jobs_total", app.OutcomeRetried),
		mailtest.Counter(t, in.Registry, "shipfile_mailer_jobs_total", app.OutcomeFailed); r != 3 || fl != 1 {
		t.Errorf("retried %v, failed %v; want 3 and 1", r, fl)
	}
}

// Messages that are no mail job are terminated (and counted), a job without a usable
// recipient is recorded as failed, and neither stops the jobs behind them.
func TestPoisonAndUndeliverableJobs(t *testing.T) {
	f := setup(t)
	in := f.start(t, mailtest.Config{})

	mailtest.PublishRaw(t, f.js, events.MailSubject("outbound"), "garbage-1", []byte("\xff\x00 not protobuf"))
	noKind := mailtest.NewJob("sideways", "bob@example.com")
	data, err := protoMarshal(noKind)
	if err != nil {
		t.Fatal(err)
	}
	mailtest.PublishRaw(t, f.js, events.MailSubject("sideways"), noKind.JobId, data)
	undeliverable := mailtest.NewJob(app.KindOutbound, "bob@example.com\r\nBcc: evil@example.net")
	mailtest.InsertPackage(t, f.pool, undeliverable, "active")
	mailtest.PublishRaw(t, f.js, events.MailSubject("outbound"), undeliverable.JobId, mustMarshal(t, undeliverable))
	good := mailtest.NewJob(app.KindInbound, "carol@example.org")
	f.publish(t, good)

	f.sink.WaitN(t, 1, 20*time.Second)
	d := f.waitState(t, undeliverable.JobId, app.StateFailed, 10*time.Second)
	f.settled(t, 10*time.Second)
	if d.Attempts != 0 || !strings.Contains(d.LastError, "invalid recipient address") {
		t.Errorf("undeliverable job %+v", d)
	}
	audit := mailtest.Audit(t, f.pool, undeliverable.PackageId)
	if len(audit) != 1 || audit[0].Action != "mail.failed" || !strings.Contains(audit[0].Detail, "not sent: undeliverable: invalid recipient address") ||
		strings.ContainsAny(audit[0].Detail, "\r\n") {
		t.Errorf("audit %+v", audit)
	}
	if _, ok := mailtest.Delivery(t, f.pool, noKind.JobId); ok {
		t.Error("a poison job got a delivery row")
	}
	if msgs := f.sink.Messages(); len(msgs) != 1 || msgs[0].To[0] != "carol@example.org" {
		t.Errorf("e-mails %+v, want only carol's", msgs)
	}
	if got := mailtest.Counter(t, in.Registry, "shipfile_mailer_jobs_total", app.OutcomePoison); got != 2 {
		t.Errorf("poison = %v, want 2", got)
	}
	if got := mailtest.Counter(t, in.Registry, "shipfile_mailer_jobs_total", app.OutcomeFailed); got != 1 {
		t.Errorf("failed = %v, want 1", got)
	}
}

// A title and names full of CR/LF reach the recipient as text: the envelope has one
// recipient and the message no header they tried to add.
func TestHeaderInjectionIsImpossible(t *testing.T) {
	f := setup(t)
	f.start(t, mailtest.Config{})
	job := mailtest.NewJob(app.KindOutbound, "bob@example.com")
	job.Title = "Q3\r\nBcc: evil@example.net\r\n\r\nfake body"
	job.RecipientName = "Bob\r\nCc: evil@example.net"
	job.OwnerName = "Alice\nReply-To: evil@example.net"
	f.publish(t, job)
	m := f.sink.WaitN(t, 1, 20*time.Second)[0]
	if len(m.To) != 1 || m.To[0] != "bob@example.com" {
		t.Fatalf("envelope recipients %v", m.To)
	}
	p := m.Parse(t)
	for _, k := range []string{"Bcc", "Cc"} {
		if v := p.Header.Get(k); v != "" {
			t.Errorf("injected header %s: %q", k, v)
		}
	}
	if v := p.Header["Reply-To"]; len(v) != 1 || v[0] != `"Alice Reply-To: evil@example.net" <alice@example.com>` {
		t.Errorf("Reply-To %q", v)
	}
	if want := "Alice Reply-To: evil@example.net has shared files with you: Q3 Bcc: evil@example.net fake body"; p.Subject != want {
		t.Errorf("Subject %q, want %q", p.Subject, want)
	}
	if to := p.Header.Get("To"); to != `"Bob Cc: evil@example.net" <bob@example.com>` {
		t.Errorf("To %q", to)
	}
}

// protoMarshal encodes a job without events.MarshalMailJob's checks: the mailer must
// cope with whatever arrives.
func protoMarshal(job *eventsv1.MailJob) ([]byte, error) { return proto.Marshal(job) }

func mustMarshal(t *testing.T, job *eventsv1.MailJob) []byte {
	t.Helper()
	b, err := proto.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A send under way when the instance is told to stop finishes within the grace period,
// is recorded and acknowledged: the job is not sent again by the next instance.
func TestStopLetsASendFinish(t *testing.T) {
	f := setup(t)
	inData := make(chan struct{}, 1)
	f.sink.SetPolicy(func(stage mailtest.Stage, _ string) *smtp.SMTPError {
		if stage == mailtest.StageData {
			inData <- struct{}{}
			time.Sleep(time.Second) // a slow server: the stop arrives meanwhile
		}
		return nil
	})
	in := f.start(t, mailtest.Config{})
	job := mailtest.NewJob(app.KindOutbound, "bob@example.com")
	f.publish(t, job)
	select {
	case <-inData:
	case <-time.After(20 * time.Second):
		t.Fatal("the e-mail never reached DATA")
	}
	in.Stop(t)
	if d := f.delivery(t, job.JobId); d.State != app.StateSent || d.Attempts != 1 {
		t.Fatalf("after a stop during the send: %+v, want sent", d)
	}
	f.sink.SetPolicy(nil)
	f.start(t, mailtest.Config{}) // the next instance finds nothing to do
	f.settled(t, 10*time.Second)
	if n := len(f.sink.Messages()); n != 1 {
		t.Fatalf("%d e-mails, want 1", n)
	}
}

// A job whose package was revoked, expired or deleted before the e-mail went out (a
// retry hours later) sends nothing: the link is dead. The audit log says why.
func TestNoEmailForAPackageNoLongerActive(t *testing.T) {
	f := setup(t)
	in := f.start(t, mailtest.Config{})
	revoked := mailtest.NewJob(app.KindOutbound, "bob@example.com")
	mailtest.InsertPackage(t, f.pool, revoked, "revoked")
	mailtest.Publish(t, f.js, revoked)
	deleted := mailtest.NewJob(app.KindInbound, "carol@example.org")
	mailtest.Publish(t, f.js, deleted)
	live := mailtest.NewJob(app.KindOutbound, "dave@example.com")
	f.publish(t, live)

	f.sink.WaitN(t, 1, 20*time.Second)
	f.waitState(t, revoked.JobId, app.StateFailed, 10*time.Second)
	f.waitState(t, deleted.JobId, app.StateFailed, 10*time.Second)
	f.settled(t, 10*time.Second)
	if msgs := f.sink.Messages(); len(msgs) != 1 || msgs[0].To[0] != "dave@example.com" || f.sink.Transactions() != 1 {
		t.Fatalf("e-mails %+v (%d transactions), want only dave's", msgs, f.sink.Transactions())
	}
	for job, why := range map[*eventsv1.MailJob]string{revoked: "the package is revoked", deleted: "the package was deleted"} {
		if d := f.delivery(t, job.JobId); d.Attempts != 0 || d.LastError != "not sent: "+why {
			t.Errorf("%s: delivery %+v", why, d)
		}
		want := mailtest.AuditRow{Actor: "system", Action: "mail.failed", Detail: "to " + job.RecipientEmail + ": not sent: " + why}
		if a := mailtest.Audit(t, f.pool, job.PackageId); len(a) != 1 || a[0] != want {
			t.Errorf("audit %+v, want [%+v]", a, want)
		}
	}
	if got := mailtest.Counter(t, in.Registry, "shipfile_mailer_jobs_total", app.OutcomeFailed); got != 2 {
		t.Errorf("failed = %v, want 2", got)
	}
}
