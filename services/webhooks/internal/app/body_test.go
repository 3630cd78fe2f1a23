package app_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/msgerr"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// bodiesDir holds the golden vectors: <name>.envelope.json (protojson) and
// <name>.body.json (the exact body, no trailing newline).
const bodiesDir = "../../testdata/bodies"

func loadEnvelope(t testing.TB, name string) *eventsv1.Envelope {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(bodiesDir, name+".envelope.json"))
	if err != nil {
		t.Fatal(err)
	}
	env := &eventsv1.Envelope{}
	if err := protojson.Unmarshal(b, env); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return env
}

func TestRenderBodyGolden(t *testing.T) {
	names, err := filepath.Glob(filepath.Join(bodiesDir, "*.envelope.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, path := range names {
		name := strings.TrimSuffix(filepath.Base(path), ".envelope.json")
		t.Run(name, func(t *testing.T) {
			env := loadEnvelope(t, name)
			want, err := os.ReadFile(filepath.Join(bodiesDir, name+".body.json"))
			if err != nil {
				t.Fatal(err)
			}
			typ, got, err := app.RenderBody(env)
			if err != nil {
				t.Fatal(err)
			}
			seen[typ] = true
			if typ != env.GetType() {
				t.Errorf("type %q, want %q", typ, env.GetType())
			}
			if !bytes.Equal(got, want) {
				t.Errorf("body differs from %s.body.json\n got: %s\nwant: %s", name, got, want)
			}
		})
	}
	for _, typ := range append(append([]string(nil), events.Types...), events.TypeWebhookTest) {
		if !seen[typ] {
			t.Errorf("no golden vector for %s", typ)
		}
	}
}

// TestFinalizedBodyFields checks package.finalized against docs/WEBHOOKS.md ("What a
// delivery carries"): exactly these 8 fields, in this order, with these JSON types.
func TestFinalizedBodyFields(t *testing.T) {
	_, body, err := app.RenderBody(loadEnvelope(t, "package.finalized"))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, kind string }{
		{"event", "string"}, {"timestamp", "string"}, {"package_id", "string"}, {"title", "string"},
		{"recipient_email", "string"}, {"owner_user_id", "integer"}, {"file_count", "integer"}, {"expires_at", "string"},
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", body)
	}
	values := map[string]any{}
	for i := 0; dec.More(); i++ {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		key := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if i >= len(want) {
			t.Fatalf("extra field %q", key)
		}
		if key != want[i].name {
			t.Fatalf("field %d is %q, want %q", i, key, want[i].name)
		}
		switch want[i].kind {
		case "string":
			if _, ok := v.(string); !ok {
				t.Errorf("%s is %T, want a string", key, v)
			}
		case "integer":
			n, ok := v.(json.Number)
			if _, err := n.Int64(); !ok || err != nil {
				t.Errorf("%s is %v (%T), want an integer", key, v, v)
			}
		}
		values[key] = v
	}
	if len(values) != len(want) {
		t.Fatalf("%d fields, want %d", len(values), len(want))
	}
	if ts := values["timestamp"].(string); !strings.HasSuffix(ts, "Z") {
		t.Errorf("timestamp %q does not end in Z", ts)
	} else if _, err := time.Parse(time.RFC3339, ts); err != nil {
		t.Errorf("timestamp %q is not RFC 3339: %v", ts, err)
	}
	exp := values["expires_at"].(string)
	if _, err := time.Parse("2006-01-02T15:04:05", exp); err != nil {
		t.Errorf("expires_at %q is not an ISO 8601 date-time without zone: %v", exp, err)
	}
	if strings.ContainsAny(exp, "Z+") {
		t.Errorf("expires_at %q carries a zone", exp)
	}
}

// placedByType lists the Package fields a type places after the head itself (the
// fromPackage of bodyRules in body.go); every other field of Package is in the head of
// every package.* body.
var placedByType = map[string][]string{events.TypePackageCreated: {"direction"}}

// TestBodyCarriesEveryPackageField gives every field of Package a value, read off the
// descriptor, and renders each package.* golden envelope with that package: the body
// starts with the head, every field of the message in its order under its proto name
// (less the fields some type places), followed by those its own type places. A field of
// the message that does not reach the bodies, one they cannot render, or one whose name
// a payload field takes too, fails it.
func TestBodyCarriesEveryPackageField(t *testing.T) {
	pkg := &eventsv1.Package{}
	pm := pkg.ProtoReflect()
	placed := map[string]bool{}
	for _, names := range placedByType {
		for _, n := range names {
			placed[n] = true
		}
	}
	var head []string
	fields := pm.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		setTestValue(t, pm, fd)
		if !placed[string(fd.Name())] {
			head = append(head, string(fd.Name()))
		}
	}
	paths, err := filepath.Glob(filepath.Join(bodiesDir, "package.*.envelope.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no package.* golden envelopes in %s: %v", bodiesDir, err)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".envelope.json")
		t.Run(name, func(t *testing.T) {
			env := loadEnvelope(t, name)
			data := events.Data(env).ProtoReflect()
			fd := data.Descriptor().Fields().ByName("package")
			if fd == nil {
				t.Fatalf("%s has no field package", data.Descriptor().FullName())
			}
			data.Set(fd, protoreflect.ValueOfMessage(proto.Clone(pkg).ProtoReflect()))
			_, body, err := app.RenderBody(env)
			if err != nil {
				t.Fatal(err)
			}
			var members map[string]any
			if err := json.Unmarshal(body, &members); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			keys := bodyKeys(t, body)
			if len(members) != len(keys) {
				t.Fatalf("a key repeats in %q", keys)
			}
			want := append(append([]string{"event", "timestamp"}, head...), placedByType[env.GetType()]...)
			if len(keys) < len(want) || !slices.Equal(keys[:len(want)], want) {
				t.Fatalf("body starts with %q, want %q", keys, want)
			}
			for _, n := range want[2:] {
				v := pm.Get(fields.ByName(protoreflect.Name(n)))
				if got, ok := members[n].(string); ok && got != v.String() {
					t.Errorf("%s = %q, want %q", n, got, v.String())
				}
			}
		})
	}
}

// setTestValue sets fd of m to a value that is not its zero value.
func setTestValue(t *testing.T, m protoreflect.Message, fd protoreflect.FieldDescriptor) {
	t.Helper()
	if fd.IsList() && fd.Kind() == protoreflect.StringKind {
		m.Mutable(fd).List().Append(protoreflect.ValueOfString("v-" + string(fd.Name())))
		return
	}
	if fd.IsList() || fd.IsMap() {
		t.Fatalf("no test value for field %s: a webhook body has no mapping for it", fd.Name())
	}
	var v protoreflect.Value
	switch fd.Kind() {
	case protoreflect.StringKind:
		v = protoreflect.ValueOfString("v-" + string(fd.Name()))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		v = protoreflect.ValueOfInt32(7)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		v = protoreflect.ValueOfInt64(7)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		v = protoreflect.ValueOfUint32(7)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		v = protoreflect.ValueOfUint64(7)
	case protoreflect.BoolKind:
		v = protoreflect.ValueOfBool(true)
	default:
		t.Fatalf("no test value for field %s (%s): a webhook body has no mapping for it", fd.Name(), fd.Kind())
	}
	m.Set(fd, v)
}

// bodyKeys returns the keys of the JSON object body, in order.
func bodyKeys(t *testing.T, body []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", body)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestRenderBodyPoison(t *testing.T) {
	now := timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	pkg := &eventsv1.Package{PackageId: "p", OwnerUserId: 1}
	cases := []struct {
		name string
		env  *eventsv1.Envelope
	}{
		{"no event id", &eventsv1.Envelope{Type: events.TypePackageRevoked, OccurredAt: now,
			Data: &eventsv1.Envelope_PackageRevoked{PackageRevoked: &eventsv1.PackageRevoked{Package: pkg}}}},
		{"no data", &eventsv1.Envelope{EventId: "e", Type: events.TypePackageRevoked, OccurredAt: now}},
		{"data of another type", &eventsv1.Envelope{EventId: "e", Type: events.TypePackageDeleted, OccurredAt: now,
			Data: &eventsv1.Envelope_PackageRevoked{PackageRevoked: &eventsv1.PackageRevoked{Package: pkg}}}},
		{"unknown type", &eventsv1.Envelope{EventId: "e", Type: "package.renamed", OccurredAt: now}},
		{"no occurred_at", &eventsv1.Envelope{EventId: "e", Type: events.TypePackageRevoked,
			Data: &eventsv1.Envelope_PackageRevoked{PackageRevoked: &eventsv1.PackageRevoked{Package: pkg}}}},
		{"no package", &eventsv1.Envelope{EventId: "e", Type: events.TypePackageRevoked, OccurredAt: now,
			Data: &eventsv1.Envelope_PackageRevoked{PackageRevoked: &eventsv1.PackageRevoked{}}}},
		{"no expires_at", &eventsv1.Envelope{EventId: "e", Type: events.TypePackageExpired, OccurredAt: now,
			Data: &eventsv1.Envelope_PackageExpired{PackageExpired: &eventsv1.PackageExpired{Package: pkg}}}},
		{"test without hook", &eventsv1.Envelope{EventId: "e", Type: events.TypeWebhookTest, OccurredAt: now,
			Data: &eventsv1.Envelope_WebhookTest{WebhookTest: &eventsv1.WebhookTest{}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := app.RenderBody(c.env); !msgerr.IsPoison(err) {
				t.Errorf("err = %v, want a msgerr.Poison", err)
			}
		})
	}
}

func TestDeliveryIDIsStableUUIDv5(t *testing.T) {
	// Computed independently: uuid5(DeliveryNamespace, "<event id>:<hook id>").
	const want = "4527ab4b-476f-5b03-bbb6-7e9e56555f05"
	if got := app.DeliveryID("0193a5f1-0000-7000-8000-000000000002", 7); got != want {
		t.Errorf("DeliveryID = %s, want %s", got, want)
	}
	first, again, other := app.DeliveryID("e", 1), app.DeliveryID("e", 1), app.DeliveryID("e", 2)
	if first != again || first == other {
		t.Error("delivery ids must be stable per event and hook and differ between hooks")
	}
}
