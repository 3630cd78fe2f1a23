package events_test

import (
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
