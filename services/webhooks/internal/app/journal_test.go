package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/msgerr"
)

// journalStore is benchStore with the rows Deliveries finds and the records it commits.
type journalStore struct {
	benchStore
	mu        sync.Mutex
	rows      map[string]Delivery
	committed []AttemptRecord
}

func (s *journalStore) Deliveries(_ context.Context, ids []string) (map[string]Delivery, error) {
	out := map[string]Delivery{}
	for _, id := range ids {
		if d, ok := s.rows[id]; ok {
			out[id] = d
		}
	}
	return out, nil
}

func (s *journalStore) RecordAttempts(ctx context.Context, recs []AttemptRecord) (map[string]Recorded, error) {
	s.mu.Lock()
	s.committed = append(s.committed, recs...)
	s.mu.Unlock()
	return s.benchStore.RecordAttempts(ctx, recs)
}

// fakeJournal keeps what it is given, or fails with err.
type fakeJournal struct {
	mu   sync.Mutex
	recs []AttemptRecord
	err  error
}

func (j *fakeJournal) Append(_ context.Context, rec AttemptRecord) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return j.err
	}
	j.recs = append(j.recs, rec)
	return nil
}

type statusSender int

func (s statusSender) Send(context.Context, Request) Response {
	return Response{StatusCode: int(s), Duration: time.Millisecond}
}

// TestJournalTakesOnlyFirstTryDeliveries: only the attempt that delivers a delivery
// without a row, on an unordered subscription, goes through the journal; every other
// attempt is committed before its job is acknowledged, and a journal that fails leaves
// the job to be tried again.
func TestJournalTakesOnlyFirstTryDeliveries(t *testing.T) {
	const hook = 7
	const eventID = "0193a0b2-7c4e-7d1a-9c3b-2f1e0d9c8b7a"
	id := DeliveryID(eventID, hook)
	job, err := proto.Marshal(&eventsv1.WebhookJob{
		DeliveryId: id, HookId: hook, Event: "package.created", Body: []byte(`{"event":"package.created"}`),
		EventId: eventID, CreatedAtUnixMs: 1700000000000,
	})
	if err != nil {
		t.Fatal(err)
	}
	pendingRow := Delivery{ID: id, SubscriptionID: hook, EventID: eventID, Event: "package.created",
		Body: []byte(`{}`), Status: StatusPending, Attempts: 1, RoundAttempts: 1}
	tests := []struct {
		name         string
		status       int
		numDelivered uint64
		rows         map[string]Delivery
		journalErr   error
		noJournal    bool
		wantJournal  bool
		wantErr      bool
	}{
		{name: "first try delivered", status: 200, numDelivered: 1, wantJournal: true},
		{name: "handed out again, no row yet", status: 204, numDelivered: 2, wantJournal: true},
		{name: "first try failed", status: 500, numDelivered: 1, wantErr: true},
		{name: "gone disables", status: 410, numDelivered: 1},
		{name: "delivered at a retry", status: 200, numDelivered: 2, rows: map[string]Delivery{id: pendingRow}},
		{name: "too large for the journal", status: 200, numDelivered: 1, journalErr: ErrNotJournaled},
		{name: "journal down", status: 200, numDelivered: 1, journalErr: errors.New("nats: timeout"), wantErr: true},
		{name: "no journal", status: 200, numDelivered: 1, noJournal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &journalStore{benchStore: benchStore{sub: Subscription{ID: hook, URL: "http://127.0.0.1/hook",
				Secret: "whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0dGVzdHRlc3Q=", Active: true, MaxInFlight: 16}}, rows: tt.rows}
			subs := NewSubscriptions(st)
			subs.Listening(true)
			if err := subs.Reload(context.Background()); err != nil {
				t.Fatal(err)
			}
			m, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			j := &fakeJournal{err: tt.journalErr}
			opts := DeliveryOptions{Schedule: []time.Duration{time.Second}, Journal: j}
			if tt.noJournal {
				opts.Journal = nil
			}
			d := NewDeliverer(st, subs, nil, statusSender(tt.status), m, slog.New(slog.NewTextHandler(io.Discard, nil)), opts)
			defer d.Close()

			err = d.Deliver(context.Background(), job, tt.numDelivered)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Deliver: %v, want an error: %v", err, tt.wantErr)
			}
			if err != nil && msgerr.IsPoison(err) {
				t.Fatalf("Deliver: %v is poison", err)
			}
			journaled, committed := len(j.recs), len(st.committed)
			switch {
			case tt.wantJournal && (journaled != 1 || committed != 0):
				t.Fatalf("journaled %d, committed %d; want the attempt in the journal only", journaled, committed)
			case tt.wantJournal:
				if r := j.recs[0]; r.DeliveryID != id || r.Status != StatusSucceeded || r.StatusCode != tt.status || r.EventID != eventID || string(r.Body) != `{"event":"package.created"}` {
					t.Fatalf("journaled %+v", r)
				}
			case tt.journalErr != nil && !errors.Is(tt.journalErr, ErrNotJournaled):
				if committed != 0 {
					t.Fatalf("committed %d records though the journal failed; want the job tried again", committed)
				}
			case journaled != 0 || committed != 1:
				t.Fatalf("journaled %d, committed %d; want the attempt committed", journaled, committed)
			}
		})
	}
}
