package transport

import (
	"strings"
	"testing"

	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// TestDecodeJournal: a journal message is a JSON list of delivered attempts; anything
// else is refused (the consumer terminates it as poison).
func TestDecodeJournal(t *testing.T) {
	const id = "0193a0b2-7c4e-7d1a-9c3b-2f1e0d9c8b7a"
	good := `[{"DeliveryID":"` + id + `","SubscriptionID":7,"Status":"succeeded","Body":"e30="}]`
	recs, err := decodeJournal([]byte(good))
	if err != nil || len(recs) != 1 || recs[0].DeliveryID != id || string(recs[0].Body) != "{}" {
		t.Fatalf("decode %s: %+v, %v", good, recs, err)
	}
	for _, bad := range []string{
		``, `{}`, `[{"DeliveryID":"x","SubscriptionID":7,"Status":"succeeded"}]`,
		`[{"DeliveryID":"` + id + `","SubscriptionID":7,"Status":"pending"}]`,
		`[{"DeliveryID":"` + id + `","SubscriptionID":0,"Status":"succeeded"}]`,
	} {
		if _, err := decodeJournal([]byte(bad)); err == nil {
			t.Errorf("decode %q: no error", bad)
		}
	}
}

// TestJournalMessagesStayUnderTheBound: records are split into messages under
// journalMessageBytes, each one a list decodeJournal reads, none lost.
func TestJournalMessagesStayUnderTheBound(t *testing.T) {
	body := []byte(strings.Repeat("x", journalMaxBody))
	var recs []app.AttemptRecord
	for i := range 40 {
		recs = append(recs, app.AttemptRecord{DeliveryID: app.DeliveryID(strings.Repeat("e", i+1), 7), SubscriptionID: 7,
			Status: app.StatusSucceeded, Succeeded: true, Body: body})
	}
	var msgs [][]byte
	if err := journalMessages(recs, func(b []byte) error { msgs = append(msgs, append([]byte(nil), b...)); return nil }); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range msgs {
		if len(m) > journalMessageBytes {
			t.Errorf("a message of %d bytes, over %d", len(m), journalMessageBytes)
		}
		got, err := decodeJournal(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			if r.DeliveryID != recs[n].DeliveryID || len(r.Body) != len(body) {
				t.Fatalf("record %d: %s with %d bytes", n, r.DeliveryID, len(r.Body))
			}
			n++
		}
	}
	if n != len(recs) || len(msgs) < 2 {
		t.Fatalf("%d records in %d messages, want %d in several", n, len(msgs), len(recs))
	}
}
