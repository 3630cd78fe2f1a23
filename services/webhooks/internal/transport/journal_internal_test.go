package transport

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// TestDecodeJournal: a journal message reads back as the records written into it;
// anything else is refused (the consumer terminates it as poison).
func TestDecodeJournal(t *testing.T) {
	const id = "0193a0b2-7c4e-7d1a-9c3b-2f1e0d9c8b7a"
	want := app.AttemptRecord{DeliveryID: id, SubscriptionID: 7, EventID: "ev", Event: "package.created",
		Body: []byte(`{}`), CreatedAt: time.UnixMilli(1700000000123), PackageID: "pkg", PackageSeq: 3,
		StatusCode: 204, Duration: 1500 * time.Microsecond, Excerpt: "ok", HasResponse: true,
		Status: app.StatusSucceeded, Succeeded: true}
	encode := func(recs ...app.AttemptRecord) []byte {
		var out []byte
		if err := journalMessages(recs, func(b []byte) error { out = append([]byte(nil), b...); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	good := encode(want)
	got, err := decodeJournal(good)
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, want)
	}
	noBody := want
	noBody.Body = []byte{}
	if got, err := decodeJournal(encode(noBody)); err != nil || got[0].Body == nil || len(got[0].Body) != 0 {
		t.Fatalf("an empty body: %+v, %v", got, err)
	}
	badID, noHook := want, want
	badID.DeliveryID, noHook.SubscriptionID = "x", 0
	for name, bad := range map[string][]byte{
		"empty": nil, "not protobuf": []byte("{}"), "cut short": good[:len(good)-3],
		"bad delivery id": encode(badID), "no hook": encode(noHook),
	} {
		if _, err := decodeJournal(bad); err == nil {
			t.Errorf("%s: no error", name)
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
