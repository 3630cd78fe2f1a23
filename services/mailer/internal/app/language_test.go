package app

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// TestRenderLanguages: a job's language comes off the wire (MailJob.language) and
// writes the whole e-mail in it — subject, greeting, note's heading, button, expiry,
// encryption notice and footer — for every language, escaping what is filled in; an
// unknown language is English.
func TestRenderLanguages(t *testing.T) {
	data, err := events.MarshalMailJob(&eventsv1.MailJob{
		JobId: "0190f0c2-7a8b-7c3d-9e4f-112233445566", Kind: KindOutbound, PackageId: "4b2f5c1e-8d3a-4f6b-9c2d-7e1a0b3c4d5e",
		MagicLink: testLink, ExpiresAt: timestamppb.New(time.Now()), Language: "pt",
	})
	if err != nil {
		t.Fatal(err)
	}
	if job, err := ParseJob(data); err != nil || job.Language != "pt" {
		t.Fatalf("ParseJob: language %q, %v", job.Language, err)
	}
	for _, c := range []struct {
		lang, kind, subject string
		text, html          []string
	}{
		{"de", KindOutbound, "Alice Example hat Dateien mit Ihnen geteilt: Q3 report",
			[]string{"Hallo Bob Builder,", "Alice Example schreibt:", "Dateien herunterladen:\n" + testLink, "Samstag, 28. November 2026 um 16:32 UTC", "Ende-zu-Ende-verschlüsselt"},
			[]string{"<strong>Ende-zu-Ende-verschlüsselt</strong>", "&lt;b&gt;Final&lt;/b&gt;"}},
		{"fr", KindInbound, "Alice Example vous demande des fichiers : Q3 report",
			[]string{"Bonjour Bob Builder,", "Déposer vos fichiers:\n" + testLink, "samedi 28 novembre 2026 à 16:32 UTC", "Envoyé par shipfile pour le compte de Alice Example."},
			[]string{`<html lang="fr">`, "<strong>chiffrée de bout en bout</strong>"}},
		{"es", KindOutbound, "Alice Example ha compartido archivos con usted: Q3 report",
			[]string{"Hola, Bob Builder:", "sábado, 28 de noviembre de 2026 a las 16:32 UTC"},
			[]string{">Descargar los archivos</a>"}},
		{"pt", KindInbound, "Alice Example pede-lhe ficheiros: Q3 report",
			[]string{"Olá Bob Builder,", "Alice Example escreveu:", "sábado, 28 de novembro de 2026 às 16:32 UTC"},
			[]string{"<strong>Alice Example (alice@example.com)</strong> pede-lhe ficheiros: <strong>Q3 report</strong>"}},
		{"xx", KindOutbound, "Alice Example has shared files with you: Q3 report",
			[]string{"Hello Bob Builder,"}, []string{`<html lang="en">`}},
	} {
		t.Run(c.lang, func(t *testing.T) {
			job := testJob(c.kind)
			job.Language, job.Encrypted = c.lang, true
			e, err := Render(job)
			if err != nil {
				t.Fatal(err)
			}
			if e.Subject != c.subject {
				t.Errorf("subject %q, want %q", e.Subject, c.subject)
			}
			for _, w := range c.text {
				if !strings.Contains(e.Text, w) {
					t.Errorf("text part lacks %q:\n%s", w, e.Text)
				}
			}
			for _, w := range c.html {
				if !strings.Contains(e.HTML, w) {
					t.Errorf("HTML part lacks %q:\n%s", w, e.HTML)
				}
			}
		})
	}
}
