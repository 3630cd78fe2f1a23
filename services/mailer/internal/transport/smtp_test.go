package transport_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/shipfile/shipfile/services/mailer/internal/app"
	"github.com/shipfile/shipfile/services/mailer/internal/mailtest"
	"github.com/shipfile/shipfile/services/mailer/internal/transport"
)

func email(to string) app.Email {
	return app.Email{
		JobID:      "0190f0c2-7a8b-7c3d-9e4f-112233445566",
		To:         app.Address{Name: "Bob", Address: to},
		ReplyTo:    app.Address{Name: "Alice", Address: "alice@example.com"},
		SenderName: "Alice (via shipfile)",
		Subject:    "Alice has shared files with you: Q3",
		Text:       "text part " + mailtest.Link,
		HTML:       "<p>html part</p>",
	}
}

func sender(t *testing.T, cfg transport.SMTPConfig, opts ...transport.SMTPOption) *transport.SMTP {
	t.Helper()
	s, err := transport.NewSMTP(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every TLS mode and authentication against a real server: the e-mail arrives, and
// the readiness check passes; a wrong password or a server without STARTTLS fails
// (transiently: nothing is wrong with the e-mail).
func TestSMTPModes(t *testing.T) {
	t.Parallel()
	cert, roots := mailtest.SelfSigned(t)
	for _, c := range []struct {
		name     string
		sink     []mailtest.SinkOption
		mod      func(*transport.SMTPConfig)
		wantSent bool
	}{
		{"plain", nil, nil, true},
		{"plain with auth", []mailtest.SinkOption{mailtest.WithAuth("mailer", "s3cret")},
			func(c *transport.SMTPConfig) { c.Username, c.Password = "mailer", "s3cret" }, true},
		{"starttls with auth", []mailtest.SinkOption{mailtest.WithTLS(cert, false), mailtest.WithAuth("mailer", "s3cret")},
			func(c *transport.SMTPConfig) {
				c.TLS, c.Username, c.Password = transport.TLSStartTLS, "mailer", "s3cret"
			}, true},
		{"implicit tls", []mailtest.SinkOption{mailtest.WithTLS(cert, true)},
			func(c *transport.SMTPConfig) { c.TLS = transport.TLSImplicit }, true},
		{"wrong password", []mailtest.SinkOption{mailtest.WithAuth("mailer", "s3cret")},
			func(c *transport.SMTPConfig) { c.Username, c.Password = "mailer", "wrong" }, false},
		{"no auth where required", []mailtest.SinkOption{mailtest.WithAuth("mailer", "s3cret")}, nil, false},
		{"starttls required but not offered", nil,
			func(c *transport.SMTPConfig) { c.TLS = transport.TLSStartTLS }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sink := mailtest.NewSink(t, c.sink...)
			cfg := sink.SMTPConfig()
			if c.mod != nil {
				c.mod(&cfg)
			}
			s := sender(t, cfg, transport.WithRootCAs(roots))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			id, err := s.Send(ctx, email("bob@example.com"))
			checkErr := s.Check(ctx)
			if !c.wantSent {
				var rej *app.Rejection
				if err == nil || errors.As(err, &rej) || len(sink.Messages()) != 0 {
					t.Fatalf("Send = %q, %v (%d e-mails); want a transient error and no e-mail", id, err, len(sink.Messages()))
				}
				if c.name != "no auth where required" && checkErr == nil {
					t.Error("the readiness check passed")
				}
				if strings.Contains(err.Error(), "wrong") || strings.Contains(err.Error(), "s3cret") {
					t.Errorf("the error %q shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if id != "<0190f0c2-7a8b-7c3d-9e4f-112233445566@test.example>" {
				t.Errorf("message id %q", id)
			}
			if len(sink.Messages()) != 1 {
				t.Fatalf("%d e-mails, want 1", len(sink.Messages()))
			}
			if checkErr != nil {
				t.Errorf("readiness check: %v", checkErr)
			}
		})
	}
}

func TestSendClassifiesReplies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		stage     mailtest.Stage
		code      int
		permanent bool
	}{
		{mailtest.StageMail, 550, false}, // the sender is refused: every e-mail's problem
		{mailtest.StageRcpt, 530, false}, // authentication required: configuration
		{mailtest.StageRcpt, 550, true},
		{mailtest.StageRcpt, 553, true},
		{mailtest.StageData, 554, true},
		{mailtest.StageMail, 421, false},
		{mailtest.StageRcpt, 450, false},
		{mailtest.StageData, 451, false},
	} {
		t.Run(string(c.stage)+" "+strconv.Itoa(c.code), func(t *testing.T) {
			t.Parallel()
			sink := mailtest.NewSink(t)
			sink.SetPolicy(func(stage mailtest.Stage, _ string) *smtp.SMTPError {
				if stage == c.stage {
					return mailtest.Refuse(c.code, [3]int{c.code / 100, 7, 1}, "no thanks")
				}
				return nil
			})
			_, err := sender(t, sink.SMTPConfig()).Send(context.Background(), email("bob@example.com"))
			var rej *app.Rejection
			if got := errors.As(err, &rej); got != c.permanent {
				t.Fatalf("Send = %v: permanent %v, want %v", err, got, c.permanent)
			}
			wantReply := strconv.Itoa(c.code/100) + ".7.1 no thanks"
			if c.permanent && (rej.Code != c.code || rej.Reply != wantReply) {
				t.Errorf("rejection %+v, want code %d reply %q", rej, c.code, wantReply)
			}
			if !c.permanent && !strings.Contains(err.Error(), strconv.Itoa(c.code)+" "+wantReply) {
				t.Errorf("error %q lacks the reply code", err)
			}
		})
	}
}

// The raw message: nothing in a title or a name starts a header line, and the parts are
// text/plain then text/html.
func TestMessageHeadersCannotBeInjected(t *testing.T) {
	t.Parallel()
	s := sender(t, transport.SMTPConfig{Host: "127.0.0.1", Port: 25, From: "shipfile@test.example", TLS: "none", Timeout: time.Second})
	e := email("bob@example.com")
	e.Subject = "Q3\r\nBcc: evil@example.net"
	e.To.Name = "Bob\r\nCc: evil@example.net"
	e.SenderName = "Mallory\nX-Evil: 1"
	e.ReplyTo.Name = "Alice\rBcc: evil@example.net"
	m, err := s.Message(e)
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	if _, err := m.WriteTo(&raw); err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(raw.String(), "\r\n\r\n")
	for _, line := range strings.Split(head, "\r\n") {
		l := strings.ToLower(line)
		if strings.HasPrefix(l, "bcc:") || strings.HasPrefix(l, "cc:") || strings.HasPrefix(l, "x-evil:") {
			t.Errorf("injected header line %q in:\n%s", line, head)
		}
	}
	if strings.Count(head, "\nTo: ") != 1 || !strings.Contains(head, "Subject: Q3 Bcc: evil@example.net\r\n") {
		t.Errorf("header:\n%s", head)
	}
	rcpts, err := m.GetRecipients()
	if err != nil || len(rcpts) != 1 || rcpts[0] != "<bob@example.com>" {
		t.Errorf("recipients %v, %v", rcpts, err)
	}
}
