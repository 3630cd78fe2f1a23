package app

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// benchStore is an in-memory store: one subscription, and attempts recorded as
// numbered at once.
type benchStore struct{ sub Subscription }

func (s *benchStore) Subscriptions(context.Context) ([]Subscription, error) {
	return []Subscription{s.sub}, nil
}
func (s *benchStore) Subscription(context.Context, int64) (Subscription, error) {
	return s.sub, nil
}
func (s *benchStore) LastSubscriptionID(context.Context) (int64, error) { return s.sub.ID, nil }
func (s *benchStore) Deliveries(context.Context, []string) (map[string]Delivery, error) {
	return nil, nil
}
func (s *benchStore) MarkFailed(context.Context, Delivery, string) error { return nil }
func (s *benchStore) RecordAttempts(_ context.Context, recs []AttemptRecord) (map[string]Recorded, error) {
	out := make(map[string]Recorded, len(recs))
	for _, r := range recs {
		out[r.DeliveryID] = Recorded{Attempt: 1}
	}
	return out, nil
}
func (s *benchStore) DisableSubscription(context.Context, int64, string) error { return nil }
func (s *benchStore) OldestPending(context.Context) (time.Duration, error)     { return 0, nil }

type okSender struct{}

func (okSender) Send(context.Context, Request) Response {
	return Response{StatusCode: 200, Duration: time.Millisecond}
}

// BenchmarkDeliverFresh is the dispatcher's own work for a fan-out's job (no HTTP, no
// database): decode, headers with their signatures, the group commit's hand-off.
func BenchmarkDeliverFresh(b *testing.B) {
	st := &benchStore{sub: Subscription{ID: 7, URL: "http://127.0.0.1/hook", Secret: "whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0dGVzdHRlc3Q=", Active: true, MaxInFlight: 16}}
	subs := NewSubscriptions(st)
	subs.Listening(true) // changes are pushed: the cache serves Get
	if err := subs.Reload(context.Background()); err != nil {
		b.Fatal(err)
	}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	d := NewDeliverer(st, subs, nil, okSender{}, m, slog.New(slog.NewTextHandler(io.Discard, nil)), DeliveryOptions{Schedule: []time.Duration{time.Second}})
	defer d.Close()
	data, err := proto.Marshal(&eventsv1.WebhookJob{
		DeliveryId: DeliveryID("0193a0b2-7c4e-7d1a-9c3b-2f1e0d9c8b7a", 7), HookId: 7, Event: "package.created",
		Body:    []byte(`{"event":"package.created","timestamp":"2026-11-26T18:00:00Z","package_id":"0193a0b2-7c4e-7d1a-9c3b-2f1e0d9c8b7a","title":"bench","recipient_email":"recipient@example.com","owner_user_id":1,"direction":"outbound","ttl_days":7,"expires_at":"2026-12-03T18:00:00"}`),
		EventId: "0193a0b2-7c4e-7d1a-9c3b-2f1e0d9c8b7a", CreatedAtUnixMs: 1700000000000,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Deliver(ctx, data, 1); err != nil {
			b.Fatal(err)
		}
	}
}
