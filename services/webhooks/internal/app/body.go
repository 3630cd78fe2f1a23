package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/msgerr"
)

// Formats of the body's times: timestamp is RFC 3339 UTC ending in Z, expires_at is
// ISO 8601 UTC without a zone suffix, both to the second.
const (
	timestampLayout = "2006-01-02T15:04:05Z"
	expiresLayout   = "2006-01-02T15:04:05"
)

// A body is derived from the event's payload message (the field of Envelope.data that
// carries it), in the order of the message's fields: "event" and "timestamp", then for
// each field of the payload its JSON value under its proto name, except
//   - the field "package" (a Package), which must be set with a package_id and stands
//     for the package head (packageHead, then the type's fromPackage fields),
//   - a google.protobuf.Timestamp, which must be set and is formatted like expires_at,
//   - a repeated string field (a JSON array) or a proto3 optional field, left out when
//     empty or unset.
// Adding an event type whose body follows this needs no edit here; bodyRules holds the
// few per-type extras docs/WEBHOOKS.md lists ("What a delivery carries").

// packageHead lists the Package fields every package.* body starts with: the message's
// fields in their order, under their proto names, less those a type places itself
// (bodyRule.fromPackage). A field added to Package reaches every package.* body with no
// edit here; an unset optional one is left out.
var packageHead = headFields()

// headFields returns the fields of packageHead, read once off the descriptor.
func headFields() []protoreflect.FieldDescriptor {
	placed := map[protoreflect.Name]bool{}
	for _, r := range bodyRules {
		for _, n := range r.fromPackage {
			placed[n] = true
		}
	}
	fields := (&eventsv1.Package{}).ProtoReflect().Descriptor().Fields()
	head := make([]protoreflect.FieldDescriptor, 0, fields.Len())
	for i := range fields.Len() {
		if fd := fields.Get(i); !placed[fd.Name()] {
			head = append(head, fd)
		}
	}
	return head
}

// bodyRule is what one event type's body needs beyond the mechanical mapping.
type bodyRule struct {
	// fromPackage lists the Package fields that follow the head in this body.
	fromPackage []protoreflect.Name
	// nullIfEmpty lists the string fields rendered null when empty.
	nullIfEmpty []protoreflect.Name
	// positive lists the integer fields that must be > 0.
	positive []protoreflect.Name
}

// bodyRules holds the per-type extras of the bodies (docs/WEBHOOKS.md, "What a delivery
// carries").
var bodyRules = map[string]bodyRule{
	events.TypePackageCreated:    {fromPackage: []protoreflect.Name{"direction"}},
	events.TypePackageDownloaded: {nullIfEmpty: []protoreflect.Name{"file_id"}}, // null for the zip of all files
	events.TypeWebhookTest:       {positive: []protoreflect.Name{"hook_id"}},
}

// Full names of the messages the mapping treats apart.
var (
	packageMessage   = (&eventsv1.Package{}).ProtoReflect().Descriptor().FullName()
	timestampMessage = (&timestamppb.Timestamp{}).ProtoReflect().Descriptor().FullName()
)

// RenderBody returns the event type and the exact JSON body of the webhook requests of
// env. An envelope that cannot be rendered (no data, data of another type, a missing
// package or time) yields a msgerr.Poison.
func RenderBody(env *eventsv1.Envelope) (string, []byte, error) {
	typ := env.GetType()
	if env.GetEventId() == "" {
		return typ, nil, msgerr.Poison(errors.New("envelope without event_id"))
	}
	if got := events.TypeOf(env); got != typ {
		return typ, nil, msgerr.Poison(fmt.Errorf("envelope %s of type %q carries data of %q", env.GetEventId(), typ, got))
	}
	ts, err := formatTime(env.GetOccurredAt(), timestampLayout, "occurred_at")
	if err != nil {
		return typ, nil, msgerr.Poison(fmt.Errorf("envelope %s: %w", env.GetEventId(), err))
	}
	b, err := body(env, typ, ts)
	if err != nil {
		return typ, nil, msgerr.Poison(fmt.Errorf("envelope %s (%s): %w", env.GetEventId(), typ, err))
	}
	return typ, b, nil
}

// body writes the JSON object of env's webhook body, whose type is typ and time ts.
func body(env *eventsv1.Envelope, typ, ts string) ([]byte, error) {
	data := events.Data(env)
	if data == nil {
		return nil, fmt.Errorf("no data")
	}
	rule := bodyRules[typ]
	o := newObjectWriter()
	o.key("event")
	o.string(typ)
	o.key("timestamp")
	o.string(ts)
	m := data.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := fd.Name()
		switch {
		case fd.Message() != nil && fd.Message().FullName() == packageMessage:
			pkg := m.Get(fd).Message()
			pfs := pkg.Descriptor().Fields()
			if !m.Has(fd) || pkg.Get(pfs.ByName("package_id")).String() == "" {
				return nil, fmt.Errorf("no package")
			}
			for _, pfd := range packageHead {
				if err := o.field(pkg, pfd); err != nil {
					return nil, err
				}
			}
			for _, n := range rule.fromPackage {
				if err := o.field(pkg, pfs.ByName(n)); err != nil {
					return nil, err
				}
			}
		case fd.Message() != nil && fd.Message().FullName() == timestampMessage:
			var t *timestamppb.Timestamp
			if m.Has(fd) {
				t, _ = m.Get(fd).Message().Interface().(*timestamppb.Timestamp)
			}
			v, err := formatTime(t, expiresLayout, string(name))
			if err != nil {
				return nil, err
			}
			o.key(string(name))
			o.string(v)
		case fd.IsList() || fd.HasOptionalKeyword():
			// Fields only some packages carry (docs/API.md, "Several recipients": recipients,
			// all_links): left out when empty or unset, so a package with one
			// recipient publishes the bodies it always did.
			if err := o.field(m, fd); err != nil {
				return nil, fmt.Errorf("%w of %s", err, m.Descriptor().FullName())
			}
		default:
			v := m.Get(fd)
			o.key(string(name))
			switch {
			case fd.Kind() == protoreflect.StringKind && v.String() == "" && slices.Contains(rule.nullIfEmpty, name):
				o.buf = append(o.buf, "null"...)
				continue
			case slices.Contains(rule.positive, name) && v.Int() <= 0:
				return nil, fmt.Errorf("%s %d", name, v.Int())
			}
			if err := o.scalar(fd, v); err != nil {
				return nil, fmt.Errorf("%w of %s", err, m.Descriptor().FullName())
			}
		}
	}
	o.buf = append(o.buf, '}')
	return o.buf, nil
}

// objectWriter writes a JSON object whose keys keep the order they were written in.
type objectWriter struct {
	buf []byte
}

func newObjectWriter() *objectWriter {
	return &objectWriter{buf: make([]byte, 0, 512)}
}

// key starts a member; k is a proto field name or a fixed key, which JSON needs no
// escape for.
func (o *objectWriter) key(k string) {
	if len(o.buf) == 0 {
		o.buf = append(o.buf, '{')
	} else {
		o.buf = append(o.buf, ',')
	}
	o.buf = append(o.buf, '"')
	o.buf = append(o.buf, k...)
	o.buf = append(o.buf, '"', ':')
}

// string writes s as a JSON string, escaped as encoding/json does without HTML escaping.
func (o *objectWriter) string(s string) {
	o.buf = appendJSONString(o.buf, s)
}

// field writes the member of m's field fd, a scalar or a list of strings; a list that
// is empty or a proto3 optional field that is unset is left out.
func (o *objectWriter) field(m protoreflect.Message, fd protoreflect.FieldDescriptor) error {
	if (fd.IsList() || fd.HasOptionalKeyword()) && !m.Has(fd) {
		return nil
	}
	o.key(string(fd.Name()))
	return o.value(fd, m.Get(fd))
}

// value writes v, a list of scalars as a JSON array, or a scalar.
func (o *objectWriter) value(fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	if !fd.IsList() {
		return o.scalar(fd, v)
	}
	if fd.Kind() != protoreflect.StringKind {
		return fmt.Errorf("no webhook body mapping for field %s", fd.Name())
	}
	l := v.List()
	o.buf = append(o.buf, '[')
	for i := range l.Len() {
		if i > 0 {
			o.buf = append(o.buf, ',')
		}
		o.string(l.Get(i).String())
	}
	o.buf = append(o.buf, ']')
	return nil
}

// scalar writes the value v of the singular scalar field fd.
func (o *objectWriter) scalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	if fd.IsList() || fd.IsMap() {
		return fmt.Errorf("no webhook body mapping for field %s", fd.Name())
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		o.string(v.String())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		o.buf = strconv.AppendInt(o.buf, v.Int(), 10)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		o.buf = strconv.AppendUint(o.buf, v.Uint(), 10)
	case protoreflect.BoolKind:
		o.buf = strconv.AppendBool(o.buf, v.Bool())
	default:
		return fmt.Errorf("no webhook body mapping for field %s", fd.Name())
	}
	return nil
}

// appendJSONString appends s as a JSON string exactly as encoding/json encodes it with
// SetEscapeHTML(false): valid UTF-8 without control characters, quote, backslash,
// U+2028 or U+2029 as is (the usual case), anything else through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s) && plain; {
		if c := s[i]; c < utf8.RuneSelf {
			plain = c >= 0x20 && c != '"' && c != '\\'
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		plain = !(r == utf8.RuneError && size == 1) && r != '\u2028' && r != '\u2029'
		i += size
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

func formatTime(ts *timestamppb.Timestamp, layout, name string) (string, error) {
	if ts == nil {
		return "", fmt.Errorf("no %s", name)
	}
	if err := ts.CheckValid(); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return ts.AsTime().UTC().Truncate(time.Second).Format(layout), nil
}
