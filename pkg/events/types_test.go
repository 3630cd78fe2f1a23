package events

import (
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/events/internal/typegen"
)

// envelopeWith builds a descriptor of an Envelope whose oneof data has one field per
// option set (nil: no options), each of a message type of its own unless shared.
func envelopeWith(t *testing.T, shared bool, opts ...*descriptorpb.FieldOptions) protoreflect.MessageDescriptor {
	t.Helper()
	f := &descriptorpb.FileDescriptorProto{
		Name:       proto.String("test/envelope.proto"),
		Package:    proto.String("test"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"events/v1/events.proto"},
	}
	env := &descriptorpb.DescriptorProto{
		Name:      proto.String("Envelope"),
		OneofDecl: []*descriptorpb.OneofDescriptorProto{{Name: proto.String(dataOneof)}},
	}
	for i, o := range opts {
		msg := "M" + string(rune('a'+i))
		if shared {
			msg = "Ma"
		}
		if !shared || i == 0 {
			f.MessageType = append(f.MessageType, &descriptorpb.DescriptorProto{Name: proto.String(msg)})
		}
		env.Field = append(env.Field, &descriptorpb.FieldDescriptorProto{
			Name:       proto.String("f" + string(rune('a'+i))),
			Number:     proto.Int32(int32(i + 1)),
			Label:      descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			Type:       descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(),
			TypeName:   proto.String(".test." + msg),
			OneofIndex: proto.Int32(0),
			Options:    o,
		})
	}
	f.MessageType = append(f.MessageType, env)
	fd, err := protodesc.NewFile(f, protoFiles{})
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().ByName("Envelope")
}

// protoFiles resolves events.proto for envelopeWith.
type protoFiles struct{}

func (protoFiles) FindFileByPath(p string) (protoreflect.FileDescriptor, error) {
	return eventsv1.File_events_v1_events_proto, nil
}

func (protoFiles) FindDescriptorByName(n protoreflect.FullName) (protoreflect.Descriptor, error) {
	return nil, os.ErrNotExist
}

func typeOpt(typ string, synthetic bool) *descriptorpb.FieldOptions {
	o := &descriptorpb.FieldOptions{}
	if typ != "" {
		proto.SetExtension(o, eventsv1.E_EventType, typ)
	}
	if synthetic {
		proto.SetExtension(o, eventsv1.E_Synthetic, true)
	}
	return o
}

// TestReadKinds checks the rules events.proto's oneof must follow.
func TestReadKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		md      protoreflect.MessageDescriptor
		want    []string // types, "!" before a synthetic one
		wantErr string
	}{
		{"two events and a synthetic one", envelopeWith(t, false, typeOpt("a.one", false), typeOpt("b.two", true), typeOpt("a.three", false)),
			[]string{"a.one", "!b.two", "a.three"}, ""},
		{"a field without event_type", envelopeWith(t, false, typeOpt("a.one", false), nil), nil, "no valid (event_type)"},
		{"an event_type that is no subject suffix", envelopeWith(t, false, typeOpt("a.*", false)), nil, "no valid (event_type)"},
		{"one type twice", envelopeWith(t, false, typeOpt("a.one", false), typeOpt("a.one", false)), nil, "on two fields"},
		{"one message twice", envelopeWith(t, true, typeOpt("a.one", false), typeOpt("a.two", false)), nil, "on two fields"},
		{"no oneof data", (&eventsv1.Package{}).ProtoReflect().Descriptor(), nil, "no oneof"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks, err := readKinds(tt.md)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range ks {
				s := k.typ
				if k.synthetic {
					s = "!" + s
				}
				got = append(got, s)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("kinds = %v, want %v", got, tt.want)
			}
		})
	}
}

// openAPIFile is the REST API's contract; its EventType enum is what subscriptions select.
const openAPIFile = "../../proto/openapi.yaml"

// TestOpenAPIEventTypesMatchDescriptor fails when the OpenAPI EventType enum (the
// events a webhook subscription selects) differs from Types, the descriptor's
// non-synthetic events, in content or order.
func TestOpenAPIEventTypesMatchDescriptor(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Enum []string `yaml:"enum"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", openAPIFile, err)
	}
	enum := doc.Components.Schemas["EventType"].Enum
	if !slices.Equal(enum, Types) {
		t.Errorf("%s components.schemas.EventType.enum = %v\nproto/events/v1/events.proto Envelope.data = %v\n"+
			"list the non-synthetic event types of the proto in the enum, in the same order", openAPIFile, enum, Types)
	}
}

// TestTypesGenIsCurrent fails when types.gen.go, the Type* constants, differs from what
// the descriptor gives (events.proto edited without `make generate`).
func TestTypesGenIsCurrent(t *testing.T) {
	t.Parallel()
	want, err := typegen.Render((&eventsv1.Envelope{}).ProtoReflect().Descriptor())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(typegen.File)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is stale: run make generate (scripts/generate.sh)", typegen.File)
	}
}

func TestConstName(t *testing.T) {
	t.Parallel()
	for typ, want := range map[string]string{
		"package.created":       "TypePackageCreated",
		"package.file_uploaded": "TypePackageFileUploaded",
		"webhook.test":          "TypeWebhookTest",
	} {
		if got := typegen.ConstName(typ); got != want {
			t.Errorf("ConstName(%q) = %q, want %q", typ, got, want)
		}
	}
}
