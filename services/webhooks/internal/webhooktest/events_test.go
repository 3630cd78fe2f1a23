package webhooktest

import (
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// TestEnvelopeEveryType: the helper builds an event of every type from the descriptor,
// and the dispatcher renders each one's body.
func TestEnvelopeEveryType(t *testing.T) {
	for _, typ := range events.AllTypes {
		env := Envelope(typ, 12)
		if got := events.TypeOf(env); got != typ || env.GetType() != typ {
			t.Errorf("Envelope(%q): data of %q, type %q", typ, got, env.GetType())
		}
		if _, body, err := app.RenderBody(env); err != nil {
			t.Errorf("%s: %v", typ, err)
		} else if !strings.HasPrefix(string(body), `{"event":"`+typ+`",`) {
			t.Errorf("%s: body %s", typ, body)
		}
	}
	if _, body, _ := app.RenderBody(Envelope(events.TypePackageDownloaded, 0)); !strings.Contains(string(body), `"file_id":null`) {
		t.Errorf("package.downloaded is the zip: body %s", body)
	}
}
