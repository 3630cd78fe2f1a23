package events

import (
	"encoding/json"
	"fmt"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// PackageHead is the package part every package event carries (eventsv1.Package), in
// the shape of the gateway's packages row: its JSON names are the columns, so a service
// that selects `to_jsonb(p)` of a row of packages reads it with PackageHeadFromRow and
// needs no column list of its own. It is the one mapping of the head: a new head field
// is a field of PackageFields (named for its column), a line in Proto, and the proto
// message (TestPackageHeadMapsEveryField fails when one of them is missing).
type PackageHead struct {
	ID             string `json:"id"`
	Title          string `json:"title"`
	RecipientEmail string `json:"recipient_email"`
	OwnerUserID    int64  `json:"owner_user_id"`
	Direction      string `json:"direction"`
	PackageFields
}

// PackageFields are the head's fields that a package's model holds as they are: the
// gateway's app.Package embeds them, so a new one reaches the gateway's events with no
// mapping of its own there. The five above are mapped by the gateway (its id is a UUID,
// its direction a type of its own, and a package read through a link names that link's
// recipient).
type PackageFields struct{}

// Proto is the head as the events carry it.
func (h PackageHead) Proto() *eventsv1.Package {
	return &eventsv1.Package{
		PackageId:      h.ID,
		Title:          h.Title,
		RecipientEmail: h.RecipientEmail,
		OwnerUserId:    h.OwnerUserID,
		Direction:      h.Direction,
	}
}

// PackageHeadFromRow reads the head from a packages row as PostgreSQL's to_jsonb gives
// it (the other columns are ignored; a NULL column leaves its field zero).
func PackageHeadFromRow(row []byte) (PackageHead, error) {
	var h PackageHead
	if err := json.Unmarshal(row, &h); err != nil {
		return PackageHead{}, fmt.Errorf("events: package head: %w", err)
	}
	return h, nil
}
