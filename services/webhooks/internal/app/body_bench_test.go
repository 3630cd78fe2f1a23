package app_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// BenchmarkRenderBody renders the golden envelopes' bodies: package.created alone (the
// head and a field a type places after it), and every vector once per operation.
func BenchmarkRenderBody(b *testing.B) {
	paths, err := filepath.Glob(filepath.Join(bodiesDir, "*.envelope.json"))
	if err != nil || len(paths) == 0 {
		b.Fatalf("no golden envelopes in %s: %v", bodiesDir, err)
	}
	var all []*eventsv1.Envelope
	var created *eventsv1.Envelope
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".envelope.json")
		env := loadEnvelope(b, name)
		all = append(all, env)
		if name == "package.created" {
			created = env
		}
	}
	if created == nil {
		b.Fatal("no package.created vector")
	}
	for _, c := range []struct {
		name string
		envs []*eventsv1.Envelope
	}{{"package.created", []*eventsv1.Envelope{created}}, {"all", all}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, env := range c.envs {
					if _, _, err := app.RenderBody(env); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
