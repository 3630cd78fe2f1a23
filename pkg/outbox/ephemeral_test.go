package outbox_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/outbox"
)

// TestSealedEphemeralPayloadOpened: an ephemeral row written sealed is published
// opened (Options.Open), and a plain row is published as it is; a row that cannot be
// opened is a failed publish: it stays pending with its error, and holds the rows
// after it back until it can be opened.
func TestSealedEphemeralPayloadOpened(t *testing.T) {
	t.Parallel()
	f := setup(t)
	seal := func(s string) []byte { return []byte("sealed:" + strings.ToUpper(s)) }
	broken := true
	open := func(p []byte) ([]byte, error) {
		s, ok := strings.CutPrefix(string(p), "sealed:")
		if !ok {
			return p, nil // written before sealing
		}
		if s == "BAD" && broken {
			return nil, errors.New("unknown key")
		}
		return []byte(strings.ToLower(s)), nil
	}
	sealed, legacy, plain := f.msg("magic link: secret"), f.msg("old job"), f.msg("public")
	sealed.Ephemeral, legacy.Ephemeral = true, true
	sealed.Data = seal("magic link: secret")
	f.insert(t, sealed, legacy, plain)
	relay := outbox.NewRelay(f.pool, f.js, outbox.Options{Open: open})
	if err := relay.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{}
	for _, m := range f.stored(t) {
		stored[m.id] = m.data
	}
	if stored[sealed.ID] != "magic link: secret" || stored[legacy.ID] != "old job" || stored[plain.ID] != "public" {
		t.Fatalf("stream holds %q", stored)
	}
	if r := f.row(t, sealed.ID); !r.published || r.payload != nil {
		t.Fatalf("sealed row: published %v, payload %q; want published and erased", r.published, r.payload)
	}

	bad, after := f.msg(""), f.msg("after")
	bad.Ephemeral, bad.Data = true, seal("bad")
	f.insert(t, bad, after)
	if err := relay.Flush(t.Context()); err == nil || !strings.Contains(err.Error(), "open sealed payload") {
		t.Fatalf("Flush = %v, want the open error", err)
	}
	if r := f.row(t, bad.ID); r.published || r.attempts != 1 || r.lastError == nil || !strings.Contains(*r.lastError, "unknown key") {
		t.Fatalf("unopened row: published %v, attempts %d, last_error %v", r.published, r.attempts, r.lastError)
	}
	if f.row(t, after.ID).published {
		t.Fatal("a row after the unopened one was published out of order")
	}
	broken = false // the key is back (SHIPFILE_SECRET_KEY_PREVIOUS)
	if err := relay.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !f.row(t, bad.ID).published || !f.row(t, after.ID).published {
		t.Fatal("the rows were not published once the payload could be opened")
	}
}

// TestRelayWithoutOpenLeavesEphemeralRows: a relay that cannot open sealed payloads
// (the expiry's, the scanner's) publishes the plain rows and leaves the ephemeral ones
// to a relay that can (the gateway's), which publishes them opened: the stream never
// gets a sealed mail job, whichever relay gets to a row first.
func TestRelayWithoutOpenLeavesEphemeralRows(t *testing.T) {
	t.Parallel()
	f := setup(t)
	sealed, plain := f.msg(""), f.msg("public")
	sealed.Ephemeral, sealed.Data = true, []byte("sealed:MAGIC LINK")
	f.insert(t, sealed, plain)
	other := outbox.NewRelay(f.pool, f.js, outbox.Options{})
	if err := other.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.stored(t); len(got) != 1 || got[0].id != plain.ID {
		t.Fatalf("a relay without Open published %+v, want the plain row alone", got)
	}
	if f.row(t, sealed.ID).published {
		t.Fatal("a relay without Open took the sealed row")
	}
	open := func(p []byte) ([]byte, error) {
		s, _ := strings.CutPrefix(string(p), "sealed:")
		return []byte(strings.ToLower(s)), nil
	}
	if err := outbox.NewRelay(f.pool, f.js, outbox.Options{Open: open}).Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{}
	for _, m := range f.stored(t) {
		stored[m.id] = m.data
	}
	if len(stored) != 2 || stored[sealed.ID] != "magic link" {
		t.Fatalf("stream holds %q, want the sealed row opened", stored)
	}
}
