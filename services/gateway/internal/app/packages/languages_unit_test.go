package packages

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// TestMailJobLanguage: a recipient's mail job carries their language to the mailer.
func TestMailJobLanguage(t *testing.T) {
	p := app.Package{ID: uuid.New(), Direction: app.Outbound, Title: "Fotos", ExpiresAt: time.Now().Add(time.Hour)}
	for _, lang := range []string{"de", "pt", "en"} {
		job := mailJob(p, app.Recipient{Email: "bob@example.com", Language: lang}, app.User{Name: "Ann", Email: "ann@example.com"}, "https://x/p/t")
		if job.GetLanguage() != lang {
			t.Errorf("job language %q, want %q", job.GetLanguage(), lang)
		}
	}
}
