package transport_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/mailer/internal/app"
	"github.com/shipfile/shipfile/services/mailer/internal/mailtest"
)

// TestMailLanguages: a job in German and one in Portuguese reach a real SMTP server
// written in their language — subject (encoded words), Content-Language, both parts,
// the expiry's weekday and month — and a job with no language is English.
func TestMailLanguages(t *testing.T) {
	t.Parallel()
	expires := time.Date(2026, 11, 28, 16, 32, 0, 0, time.UTC)
	for _, c := range []struct {
		lang, kind, wantLang, subject string
		text, html                    []string
	}{
		{"de", app.KindOutbound, "de", "Änne Müller hat Dateien mit Ihnen geteilt: Quartalsbericht",
			[]string{"Hallo Bob,", "Dateien herunterladen:\n" + mailtest.Link + "\n", "Der Link funktioniert bis Samstag, 28. November 2026 um 16:32 UTC.", "Gesendet von shipfile im Auftrag von Änne Müller."},
			[]string{`<html lang="de">`, ">Dateien herunterladen</a>", "Oder öffnen Sie diesen Link:", "<strong>Samstag, 28. November 2026 um 16:32 UTC</strong>"}},
		{"pt", app.KindInbound, "pt", "Änne Müller pede-lhe ficheiros: Quartalsbericht",
			[]string{"Olá Bob,", "Enviar os seus ficheiros:\n" + mailtest.Link + "\n", "O link funciona até sábado, 28 de novembro de 2026 às 16:32 UTC.", "Quem tiver o link pode enviar ficheiros para Änne Müller"},
			[]string{`<html lang="pt">`, ">Enviar os seus ficheiros</a>", "<strong>Änne Müller (anne@example.com)</strong> pede-lhe ficheiros"}},
		{"", app.KindOutbound, "en", "Änne Müller has shared files with you: Quartalsbericht",
			[]string{"Hello Bob,", "The link works until Saturday, 28 November 2026 at 16:32 UTC."},
			[]string{`<html lang="en">`, ">Download the files</a>"}},
	} {
		t.Run(c.wantLang+"/"+c.kind, func(t *testing.T) {
			t.Parallel()
			e, err := app.Render(app.Job{
				ID: "0190f0c2-7a8b-7c3d-9e4f-112233445566", Kind: c.kind, PackageID: "4b2f5c1e-8d3a-4f6b-9c2d-7e1a0b3c4d5e",
				Title: "Quartalsbericht", RecipientEmail: "bob@example.com", RecipientName: "Bob",
				OwnerName: "Änne Müller", OwnerEmail: "anne@example.com", MagicLink: mailtest.Link,
				ExpiresAt: expires, Language: c.lang,
			})
			if err != nil {
				t.Fatal(err)
			}
			sink := mailtest.NewSink(t)
			s := sender(t, sink.SMTPConfig())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := s.Send(ctx, e); err != nil {
				t.Fatal(err)
			}
			m := sink.WaitN(t, 1, 10*time.Second)[0].Parse(t)
			if m.Subject != c.subject {
				t.Errorf("subject %q, want %q", m.Subject, c.subject)
			}
			if got := m.Header.Get("Content-Language"); got != c.wantLang {
				t.Errorf("Content-Language %q, want %q", got, c.wantLang)
			}
			for _, w := range c.text {
				if !strings.Contains(m.Parts["text/plain"], w) {
					t.Errorf("text part lacks %q:\n%s", w, m.Parts["text/plain"])
				}
			}
			for _, w := range c.html {
				if !strings.Contains(m.Parts["text/html"], w) {
					t.Errorf("HTML part lacks %q:\n%s", w, m.Parts["text/html"])
				}
			}
		})
	}
}
