package app_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/msgerr"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// FuzzRenderBody feeds the body builder any message off the bus (seeded with the golden
// envelopes, encoded as the relay publishes them): it never panics; it either refuses
// the message as poison or renders one JSON object, without a trailing newline, whose
// "event" is the envelope's type. Its seed corpus runs with every `go test`;
// `make test-faults` fuzzes it for a while.
func FuzzRenderBody(f *testing.F) {
	paths, err := filepath.Glob(filepath.Join(bodiesDir, "*.envelope.json"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no golden envelopes in %s: %v", bodiesDir, err)
	}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		env := &eventsv1.Envelope{}
		if err := protojson.Unmarshal(raw, env); err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		b, err := events.MarshalEnvelope(env)
		if err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x00})

	f.Fuzz(func(t *testing.T, data []byte) {
		env := &eventsv1.Envelope{}
		if err := proto.Unmarshal(data, env); err != nil {
			return // the fan-out refuses undecodable messages before rendering
		}
		typ, body, err := app.RenderBody(env)
		if err != nil {
			if !msgerr.IsPoison(err) {
				t.Fatalf("RenderBody error %v is not a msgerr.Poison", err)
			}
			return
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("body is not a JSON object: %v: %q", err, body)
		}
		if m["event"] != typ || typ != env.GetType() {
			t.Fatalf("body event %v, type %q, envelope type %q", m["event"], typ, env.GetType())
		}
		if bytes.HasSuffix(body, []byte("\n")) {
			t.Fatal("body ends with a newline")
		}
	})
}

// FuzzBodyStringsAsEncodingJSON: a string field of a body is encoded byte for byte as
// encoding/json encodes it without HTML escaping (as the golden bodies in testdata are).
func FuzzBodyStringsAsEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "plain", `Q4 <report> & "notes" — Zoë`, "tab\tnl\n\x00\x1f\x7f", "\xff\xfe bad utf-8", "\u2028\u2029", `back\slash`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, title string) {
		env := loadEnvelope(t, "package.revoked")
		env.GetPackageRevoked().GetPackage().Title = title
		_, body, err := app.RenderBody(env)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(title); err != nil {
			t.Fatal(err)
		}
		want := `"title":` + strings.TrimSuffix(buf.String(), "\n") + `,"recipient_email"`
		if !strings.Contains(string(body), want) {
			t.Fatalf("body %s does not contain %s", body, want)
		}
	})
}
