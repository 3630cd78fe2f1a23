package webhooktest

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// ExpiresAt is the fixed expiry of Envelopes' packages.
var ExpiresAt = time.Date(2026, 11, 28, 16, 32, 5, 0, time.UTC)

// samples holds the fixed contents of Envelopes' payload fields, by field name; a field
// not named here gets a value of its kind (a string names the field, a number is 1, a
// time is ExpiresAt), so a new event type needs no edit here.
var samples = map[protoreflect.Name]func(hookID int64) any{
	"package": func(int64) any {
		return &eventsv1.Package{
			PackageId:      "0193a5f0-7d4e-7b7c-9f3e-2c1d4b5a6e7f",
			Title:          "Q4 <report> & \"notes\"",
			RecipientEmail: "ada@example.com",
			OwnerUserId:    42,
			Direction:      "outbound",
		}
	},
	"ttl_days":      func(int64) any { return int32(7) },
	"file_count":    func(int64) any { return int32(3) },
	"file_id":       func(int64) any { return uuid.NewString() },
	"filename":      func(int64) any { return "report.pdf" },
	"size":          func(int64) any { return int64(1048576) },
	"uploaded_by":   func(int64) any { return "owner" },
	"actor_user_id": func(int64) any { return int64(1) },
	"hook_id":       func(hookID int64) any { return hookID },
	"message":       func(int64) any { return "This is a test delivery from shipfile." },
}

// typeSamples overrides samples for one event type: package.downloaded is the zip of
// all files (no file_id, so its body carries file_id null).
var typeSamples = map[string]map[protoreflect.Name]any{
	events.TypePackageDownloaded: {"file_id": "", "filename": "Q4.zip"},
}

// Envelope returns an event of type typ that occurs now (subscriptions get only the
// events that occur after they were created), with a new event id and fixed contents;
// for webhook.test, hookID names the subscription. The payload is filled from its
// descriptor, so every type of events.AllTypes has one. An unknown typ panics.
func Envelope(typ string, hookID int64) *eventsv1.Envelope {
	env := events.NewEnvelope(typ, time.Now())
	m := env.ProtoReflect()
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(events.DataField(typ)))
	if fd == nil {
		panic(fmt.Sprintf("webhooktest.Envelope: unknown event type %q", typ))
	}
	payload := m.NewField(fd).Message()
	fields := payload.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.IsList() || f.HasOptionalKeyword() {
			continue // what only some packages carry (several recipients): left unset, as one recipient's events
		}
		var v any
		if s, ok := samples[f.Name()]; ok {
			v = s(hookID)
		}
		if o, ok := typeSamples[typ][f.Name()]; ok {
			v = o
		}
		payload.Set(f, sampleValue(f, v))
	}
	m.Set(fd, protoreflect.ValueOfMessage(payload))
	return env
}

// sampleValue returns v (or, when nil, a value of f's kind) as f's value.
func sampleValue(f protoreflect.FieldDescriptor, v any) protoreflect.Value {
	if m, ok := v.(interface{ ProtoReflect() protoreflect.Message }); ok {
		return protoreflect.ValueOfMessage(m.ProtoReflect())
	}
	if v != nil {
		return protoreflect.ValueOf(v)
	}
	switch {
	case f.Message() != nil && f.Message().FullName() == "google.protobuf.Timestamp":
		return protoreflect.ValueOfMessage(timestamppb.New(ExpiresAt).ProtoReflect())
	case f.Kind() == protoreflect.StringKind:
		return protoreflect.ValueOfString(string(f.Name()))
	case f.Kind() == protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case f.Kind() == protoreflect.Int32Kind, f.Kind() == protoreflect.Sint32Kind, f.Kind() == protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(1)
	case f.Kind() == protoreflect.Int64Kind, f.Kind() == protoreflect.Sint64Kind, f.Kind() == protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(1)
	case f.Kind() == protoreflect.Uint32Kind, f.Kind() == protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(1)
	case f.Kind() == protoreflect.Uint64Kind, f.Kind() == protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(1)
	default:
		panic(fmt.Sprintf("webhooktest.Envelope: no sample for field %s", f.FullName()))
	}
}

// PackageEnvelope returns Envelope(typ, 0) for package pkg as its package's event
// number seq (Envelope.package_seq, which the outbox's trigger sets on the real
// writers' events). typ must be a package event.
func PackageEnvelope(typ, pkg string, seq uint64) *eventsv1.Envelope {
	env := Envelope(typ, 0)
	m := env.ProtoReflect()
	data := m.Get(m.WhichOneof(m.Descriptor().Oneofs().ByName("data"))).Message()
	p := data.Get(data.Descriptor().Fields().ByName("package")).Message().Interface().(*eventsv1.Package)
	p.PackageId = pkg
	env.PackageSeq = seq
	return env
}
