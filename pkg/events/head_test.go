package events_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

func TestPackageHeadFromRow(t *testing.T) {
	tests := []struct {
		name string
		row  string
		want *eventsv1.Package
	}{
		{
			name: "a row of packages",
			row: `{"id": "0190a0c2-8f4e-7c3a-9b1d-2e5f6a7b8c9d", "title": "Q3", "recipient_email": "bob@example.com",
				"owner_user_id": 7, "direction": "inbound", "state": "active", "ttl_days": 7, "link_hash": null}`,
			want: &eventsv1.Package{PackageId: "0190a0c2-8f4e-7c3a-9b1d-2e5f6a7b8c9d", Title: "Q3",
				RecipientEmail: "bob@example.com", OwnerUserId: 7, Direction: "inbound"},
		},
		{
			name: "null columns stay empty",
			row:  `{"id": "p1", "title": "", "recipient_email": null, "owner_user_id": 1, "direction": "outbound"}`,
			want: &eventsv1.Package{PackageId: "p1", OwnerUserId: 1, Direction: "outbound"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := events.PackageHeadFromRow([]byte(tt.row))
			if err != nil {
				t.Fatal(err)
			}
			if got := h.Proto(); !proto.Equal(got, tt.want) {
				t.Fatalf("head = %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := events.PackageHeadFromRow([]byte(`{"owner_user_id": "x"}`)); err == nil {
		t.Fatal("a malformed row was read")
	}
}

// TestPackageHeadMapsEveryField fills every field of the head (PackageFields' too) and
// checks that Proto sets every field of the message and reads each from the head's
// field of the same name (the column's; package_id is the column id), so a field added
// to the message and the head but not to Proto, or to one of them alone, fails here.
func TestPackageHeadMapsEveryField(t *testing.T) {
	var h events.PackageHead
	names := map[string]string{} // the head's JSON name → the value filled in, as text
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		for i := 0; i < v.NumField(); i++ {
			f, sf := v.Field(i), v.Type().Field(i)
			if sf.Anonymous {
				fill(f)
				continue
			}
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			val := fmt.Sprintf("%s-%d", name, i+1)
			switch {
			case f.Kind() == reflect.String:
				f.SetString(val)
			case f.Kind() == reflect.Int64 || f.Kind() == reflect.Int32:
				f.SetInt(int64(100 + len(names)))
				val = fmt.Sprint(f.Int())
			case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.String:
				f.Set(reflect.ValueOf(&val))
			case f.Kind() == reflect.Bool:
				f.SetBool(true)
				val = "true"
			default:
				t.Fatalf("head field %s: kind %s is not covered by this test", sf.Name, f.Kind())
			}
			names[name] = val
		}
	}
	fill(reflect.ValueOf(&h).Elem())
	m := h.Proto().ProtoReflect()
	fields := m.Descriptor().Fields()
	if fields.Len() != len(names) {
		t.Errorf("eventsv1.Package has %d fields, the head %d", fields.Len(), len(names))
	}
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		name := string(fd.Name())
		if name == "package_id" {
			name = "id"
		}
		want, ok := names[name]
		if !ok {
			t.Errorf("eventsv1.Package.%s has no field of the head (json %q)", fd.Name(), name)
			continue
		}
		if !m.Has(fd) {
			t.Errorf("Proto leaves %s unset", fd.Name())
			continue
		}
		if got := fmt.Sprint(m.Get(fd).Interface()); got != want {
			t.Errorf("Proto sets %s to %q, want the head's %s (%q)", fd.Name(), got, name, want)
		}
	}
}
