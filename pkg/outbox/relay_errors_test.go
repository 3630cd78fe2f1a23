package outbox_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/events/eventstest"
	"github.com/shipfile/shipfile/pkg/outbox"
)

func TestPublishErrorKeepsOrderAndRetries(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var logs safeBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	// A subject no stream binds yet: JetStream answers "no responders".
	unbound := eventstest.Prefix()
	first := outbox.Message{ID: uuid.Must(uuid.NewV7()).String(), Subject: unbound + ".x", Data: []byte("secret-first"), Ephemeral: true}
	second := outbox.Message{ID: uuid.Must(uuid.NewV7()).String(), Subject: unbound + ".x", Data: []byte("secret-second"), Ephemeral: true}
	f.insert(t, first, second)
	reg := prometheus.NewRegistry()
	run(t, outbox.NewRelay(f.pool, f.js, outbox.Options{PollInterval: 50 * time.Millisecond, Log: log, Registerer: reg, Open: unsealed}))

	waitFor(t, 10*time.Second, "failure recorded twice", func() bool {
		r := f.row(t, first.ID)
		return r.attempts >= 2 && r.lastError != nil
	})
	if r := f.row(t, second.ID); r.published || r.attempts != 0 {
		t.Errorf("second row: published %v attempts %d; want it waiting behind the first", r.published, r.attempts)
	}
	if n := metric(t, reg, "shipfile_outbox_publish_errors_total"); n < 2 {
		t.Errorf("shipfile_outbox_publish_errors_total = %v, want ≥ 2", n)
	}
	waitFor(t, 5*time.Second, "pending gauge", func() bool {
		return metric(t, reg, "shipfile_outbox_pending") == 2
	})

	// The stream appears: the relay's retry publishes both, in order.
	s, err := f.js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name:       eventstest.StreamName(unbound),
		Subjects:   []string{unbound + ".>"},
		Storage:    jetstream.FileStorage,
		Duplicates: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	eventstest.DeleteOnCleanup(t, f.js, eventstest.StreamName(unbound))
	waitFor(t, 45*time.Second, "published after the stream appeared", func() bool { return f.pending(t) == 0 })
	for i, m := range []outbox.Message{first, second} {
		got, err := s.GetMsg(t.Context(), uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if got.Header.Get(jetstream.MsgIDHeader) != m.ID || string(got.Data) != string(m.Data) {
			t.Errorf("seq %d = %s %q, want %s %q", i+1, got.Header.Get(jetstream.MsgIDHeader), got.Data, m.ID, m.Data)
		}
	}
	if r := f.row(t, first.ID); r.lastError != nil {
		t.Errorf("last_error %q kept after success", *r.lastError)
	}
	out := logs.String()
	if !strings.Contains(out, "outbox: publish") || !strings.Contains(out, first.ID) {
		t.Errorf("the failure was not logged with the message id:\n%s", out)
	}
	if strings.Contains(out, "secret") {
		t.Errorf("a payload reached the log:\n%s", out)
	}
}

// TestRefusedRowDoesNotHoldBackOthers: a batch's rows go out together, so a row the
// stream refuses does not hold back the rows behind it that went through (each published
// once); it is tried again, after them, until it is published.
func TestRefusedRowDoesNotHoldBackOthers(t *testing.T) {
	t.Parallel()
	f := setup(t)
	unbound := eventstest.Prefix() // no stream binds it yet: "no responders"
	refused := outbox.Message{ID: uuid.Must(uuid.NewV7()).String(), Subject: unbound + ".x", Data: []byte("refused")}
	behind := f.msg("behind")
	f.insert(t, refused, behind)
	relay := outbox.NewRelay(f.pool, f.js, outbox.Options{})
	if err := relay.Flush(t.Context()); err == nil || !strings.Contains(err.Error(), refused.ID) {
		t.Fatalf("Flush = %v, want the refused row's error", err)
	}
	if r := f.row(t, refused.ID); r.published || r.attempts != 1 || r.lastError == nil {
		t.Fatalf("refused row: published %v, attempts %d, last_error %v; want pending, one attempt, its error", r.published, r.attempts, r.lastError)
	}
	if r := f.row(t, behind.ID); !r.gone {
		t.Fatalf("the row behind the refused one: still in the table (attempts %d); want published at once", r.attempts)
	}

	s, err := f.js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: eventstest.StreamName(unbound), Subjects: []string{unbound + ".>"}, Storage: jetstream.FileStorage,
	})
	if err != nil {
		t.Fatal(err)
	}
	eventstest.DeleteOnCleanup(t, f.js, eventstest.StreamName(unbound))
	if err := relay.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := f.row(t, refused.ID); !r.gone {
		t.Fatalf("refused row once its stream exists: still in the table, last_error %v", r.lastError)
	}
	if info, err := s.Info(t.Context()); err != nil || info.State.Msgs != 1 {
		t.Fatalf("its stream holds %v messages (%v), want 1", info.State.Msgs, err)
	}
	if n := f.count(t); n != 1 {
		t.Fatalf("the fixture's stream holds %d messages, want the row behind once", n)
	}
}
