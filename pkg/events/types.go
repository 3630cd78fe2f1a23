package events

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// The event types are read once from the descriptor of eventsv1.Envelope: each field of
// its oneof data carries one event, named by the field's event_type option (and marked
// synthetic when no subscription selects it). Adding an event type is adding a field
// there; Types, AllTypes, TypeOf, DataField and SetData follow without an edit here.

// dataOneof is the name of Envelope's oneof of event payloads.
const dataOneof = "data"

// eventKind is one field of Envelope.data.
type eventKind struct {
	typ       string
	field     protoreflect.FieldDescriptor
	synthetic bool
}

var (
	kinds       = mustKinds()
	kindByType  = map[string]eventKind{}
	kindByField = map[protoreflect.FieldNumber]eventKind{}
	kindByMsg   = map[protoreflect.FullName]eventKind{}

	// Types lists every package event type subscriptions can select (every field of
	// Envelope.data not marked synthetic), in the order of the oneof in
	// proto/events/v1/events.proto. Treat it as read-only.
	Types []string

	// AllTypes lists every event type an Envelope can carry: Types and the synthetic
	// ones (webhook.test), in the order of the oneof. Treat it as read-only.
	AllTypes []string
)

func init() {
	for _, k := range kinds {
		kindByType[k.typ] = k
		kindByField[k.field.Number()] = k
		kindByMsg[k.field.Message().FullName()] = k
		AllTypes = append(AllTypes, k.typ)
		if !k.synthetic {
			Types = append(Types, k.typ)
		}
	}
}

// mustKinds reads the event kinds from the descriptor. The descriptor is compiled into
// the binary, so an error here is a defect of events.proto that every test shows at once.
func mustKinds() []eventKind {
	ks, err := readKinds((&eventsv1.Envelope{}).ProtoReflect().Descriptor())
	if err != nil {
		panic(err)
	}
	return ks
}

// readKinds returns the fields of md's oneof data with their event_type options. Every
// field needs a distinct event_type that is a valid subject suffix, and a message type
// of its own.
func readKinds(md protoreflect.MessageDescriptor) ([]eventKind, error) {
	od := md.Oneofs().ByName(dataOneof)
	if od == nil {
		return nil, fmt.Errorf("events: %s has no oneof %s", md.FullName(), dataOneof)
	}
	var ks []eventKind
	seenType := map[string]bool{}
	seenMsg := map[protoreflect.FullName]bool{}
	fields := od.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		typ, _ := proto.GetExtension(fd.Options(), eventsv1.E_EventType).(string)
		synthetic, _ := proto.GetExtension(fd.Options(), eventsv1.E_Synthetic).(bool)
		switch {
		case fd.Message() == nil:
			return nil, fmt.Errorf("events: field %s of %s.%s is not a message", fd.Name(), md.Name(), dataOneof)
		case !validTokens(typ):
			return nil, fmt.Errorf("events: field %s of %s.%s has no valid (event_type) option: %q", fd.Name(), md.Name(), dataOneof, typ)
		case seenType[typ]:
			return nil, fmt.Errorf("events: event type %q is on two fields of %s.%s", typ, md.Name(), dataOneof)
		case seenMsg[fd.Message().FullName()]:
			return nil, fmt.Errorf("events: message %s is on two fields of %s.%s", fd.Message().FullName(), md.Name(), dataOneof)
		}
		seenType[typ], seenMsg[fd.Message().FullName()] = true, true
		ks = append(ks, eventKind{typ: typ, field: fd, synthetic: synthetic})
	}
	return ks, nil
}

// TypeOf returns the event type that matches the envelope's data, or "" when its data
// is unset.
func TypeOf(env *eventsv1.Envelope) string {
	if env == nil {
		return ""
	}
	m := env.ProtoReflect()
	fd := m.WhichOneof(m.Descriptor().Oneofs().ByName(dataOneof))
	if fd == nil {
		return ""
	}
	return kindByField[fd.Number()].typ
}

// Known reports whether eventType is a type an Envelope can carry (one of AllTypes).
func Known(eventType string) bool {
	_, ok := kindByType[eventType]
	return ok
}

// Selectable reports whether subscriptions can select eventType (one of Types).
func Selectable(eventType string) bool {
	k, ok := kindByType[eventType]
	return ok && !k.synthetic
}

// DataField returns the name of the field of Envelope.data that carries eventType
// (e.g. "file_uploaded" for "package.file_uploaded"), or "" for an unknown type.
func DataField(eventType string) string {
	k, ok := kindByType[eventType]
	if !ok {
		return ""
	}
	return string(k.field.Name())
}

// Data returns the payload message of env's data (e.g. a *eventsv1.PackageCreated), or
// nil when its data is unset.
func Data(env *eventsv1.Envelope) proto.Message {
	if env == nil {
		return nil
	}
	m := env.ProtoReflect()
	fd := m.WhichOneof(m.Descriptor().Oneofs().ByName(dataOneof))
	if fd == nil {
		return nil
	}
	return m.Get(fd).Message().Interface()
}

// SetData puts payload into the field of env's data that carries its message type and
// sets env's type to that field's event type, e.g. SetData(env, &eventsv1.PackageExpired{…})
// makes env a "package.expired" event. A message no field of Envelope.data carries is an
// error wrapping ErrInvalid.
func SetData(env *eventsv1.Envelope, payload proto.Message) error {
	if env == nil || payload == nil {
		return fmt.Errorf("%w: nil envelope or payload", ErrInvalid)
	}
	k, ok := kindByMsg[payload.ProtoReflect().Descriptor().FullName()]
	if !ok {
		return fmt.Errorf("%w: %s is not an event payload of the Envelope (known: %s)",
			ErrInvalid, payload.ProtoReflect().Descriptor().FullName(), strings.Join(AllTypes, ", "))
	}
	env.ProtoReflect().Set(k.field, protoreflect.ValueOfMessage(payload.ProtoReflect()))
	env.Type = k.typ
	return nil
}
