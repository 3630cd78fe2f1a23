package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/mailer/internal/mailtest"
)

// TestOwnerMailsInTheirLanguage: with the real gateway and mailer, two owners who
// chose German and Portuguese (PATCH /api/v1/me) get the e-mail of their package's
// first download in their language — subject, Content-Language, both parts — and the
// German one the notice of a role change an administrator made in German too.
func TestOwnerMailsInTheirLanguage(t *testing.T) {
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
	client := func(email, name, role string) api {
		shipctl("user", "create", "--email", email, "--name", name, "--role", role)
		lines := strings.Split(strings.TrimSpace(shipctl("token", "create", "--email", email, "--name", "e2e")), "\n")
		return api{servicetest.Client{T: t, Token: lines[len(lines)-1], Base: "http://" + gwAddr}}
	}
	admin := client("admin@example.com", "Admin", "admin")
	jonas := client("jonas@example.com", "Jonas", "regular")
	ines := client("ines@example.com", "Inês", "regular")
	link := servicetest.Client{T: t, Base: "http://" + gwAddr}

	gwOps := servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["gateway"], append(common, "SHIPFILE_HTTP_ADDR="+gwAddr, "SHIPFILE_OPS_ADDR="+gwOps))
	servicetest.WaitReady(t, gwOps)
	mailerAddr := servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["mailer"], append(common, "SHIPFILE_MAILER_ADDR="+mailerAddr,
		"SHIPFILE_NOTIFY_QUIET=1s", "SHIPFILE_NOTIFY_POLL=100ms", "SHIPFILE_MAIL_RETRY_SCHEDULE=200ms,200ms"))
	servicetest.WaitReady(t, mailerAddr)

	if got := jonas.Must("PATCH", "/api/v1/me", map[string]any{"language": "de"}, http.StatusOK)["language"]; got != "de" {
		t.Fatalf("PATCH /me answered language %v", got)
	}
	ines.Must("PATCH", "/api/v1/me", map[string]any{"language": "pt"}, http.StatusOK)

	send := func(owner api, title string) string {
		p := owner.Must("POST", "/api/v1/packages", map[string]any{"title": title, "recipient_email": "bob@example.com",
			"recipient_name": "Bob", "recipient_language": "en"}, http.StatusCreated)
		id := p["id"].(string)
		owner.Upload("/api/v1/packages/"+id+"/files", "a.txt", []byte("twelve bytes"))
		ml := owner.Must("POST", "/api/v1/packages/"+id+"/finalize", nil, http.StatusOK)["magic_link"].(string)
		return ml[strings.LastIndex(ml, "/")+1:]
	}
	for _, l := range []string{send(jonas, "Angebot"), send(ines, "Fotos")} {
		for _, f := range link.Must("GET", "/api/v1/links/"+l, nil, http.StatusOK)["files"].([]any) {
			link.Must("GET", f.(map[string]any)["download_url"].(string), nil, http.StatusOK)
		}
	}
	me := jonas.Must("GET", "/api/v1/me", nil, http.StatusOK)
	admin.Must("PATCH", fmt.Sprintf("/api/v1/admin/users/%v", me["id"]), map[string]any{"role": "admin"}, http.StatusOK)

	to := func(addr string) map[string]mailtest.Parsed {
		out := map[string]mailtest.Parsed{}
		for _, m := range sink.Messages() {
			if len(m.To) == 1 && m.To[0] == addr {
				p := m.Parse(t)
				out[p.Subject] = p
			}
		}
		return out
	}
	servicetest.WaitFor(t, 60*time.Second, "the owners' e-mails", func() bool {
		return len(to("jonas@example.com")) >= 2 && len(to("ines@example.com")) >= 1
	})

	for _, c := range []struct {
		owner, subject, lang string
		text, html           []string
	}{
		{"jonas@example.com", "Bob hat Angebot heruntergeladen", "de",
			[]string{"Hallo Jonas,", "Bob hat Angebot heruntergeladen.", "Paket öffnen:\nhttp://" + gwAddr + "/packages/"},
			[]string{`<html lang="de">`, ">Paket öffnen</a>"}},
		{"ines@example.com", "Bob transferiu Fotos", "pt",
			[]string{"Olá Inês,", "Bob transferiu Fotos.", "Pode desativar estes e-mails na página do pacote."},
			[]string{`<html lang="pt">`, ">Abrir o pacote</a>"}},
		{"jonas@example.com", "Ihre Rolle in shipfile hat sich geändert", "de",
			[]string{"Ihre Rolle in shipfile hat sich geändert: regulär → Administrator.", "Ihr Konto:\nhttp://" + gwAddr + "/account"},
			[]string{`<html lang="de">`, ">Ihr Konto öffnen</a>"}},
	} {
		p, ok := to(c.owner)[c.subject]
		if !ok {
			t.Errorf("%s got no e-mail %q; got %v", c.owner, c.subject, keysOf(to(c.owner)))
			continue
		}
		if got := p.Header.Get("Content-Language"); got != c.lang {
			t.Errorf("%q: Content-Language %q, want %q", c.subject, got, c.lang)
		}
		for _, w := range c.text {
			if !strings.Contains(p.Parts["text/plain"], w) {
				t.Errorf("%q: text part lacks %q:\n%s", c.subject, w, p.Parts["text/plain"])
			}
		}
		for _, w := range c.html {
			if !strings.Contains(p.Parts["text/html"], w) {
				t.Errorf("%q: HTML part lacks %q", c.subject, w)
			}
		}
	}
}
