package app_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/msgerr"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// mapSubs is a SubscriptionStore in memory.
type mapSubs map[int64]app.Subscription

func (m mapSubs) Subscriptions(context.Context) ([]app.Subscription, error) {
	var out []app.Subscription
	for _, s := range m {
		out = append(out, s)
	}
	return out, nil
}

func (m mapSubs) Subscription(_ context.Context, id int64) (app.Subscription, error) {
	if s, ok := m[id]; ok {
		return s, nil
	}
	return app.Subscription{}, app.ErrNotFound
}

func (m mapSubs) LastSubscriptionID(context.Context) (int64, error) {
	var last int64
	for id := range m {
		last = max(last, id)
	}
	return last, nil
}

func newEventJobs(t *testing.T, subs mapSubs) *app.EventJobs {
	t.Helper()
	c := app.NewSubscriptions(subs)
	c.Listening(true)
	if err := c.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	return app.NewEventJobs(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// TestEventJobs: an event becomes the delivery job of each subscription that takes it
// (its type, after its creation, while active), carrying the row's fields; a test goes
// to its one subscription whatever it selects; anything else is no job.
func TestEventJobs(t *testing.T) {
	occurred := time.Date(2026, 11, 21, 17, 26, 5, 0, time.UTC) // the golden envelopes'
	before, after := occurred.Add(-time.Hour), occurred.Add(time.Hour)
	f := newEventJobs(t, mapSubs{
		1:  {ID: 1, Active: true, CreatedAt: before},
		2:  {ID: 2, Active: true, CreatedAt: before, Events: []string{events.TypePackageFinalized}},
		3:  {ID: 3, Active: true, CreatedAt: after},
		4:  {ID: 4, Active: false, CreatedAt: before},
		12: {ID: 12, Active: false, CreatedAt: after, Events: []string{}},
	})
	created := data(t, "package.created")
	test := data(t, "webhook.test") // for subscription 12
	published := time.UnixMilli(1764000000123)
	cases := []struct {
		name string
		data []byte
		hook int64
		want bool
	}{
		{"selects every type", created, 1, true},
		{"selects another type", created, 2, false},
		{"created after the event", created, 3, false},
		{"disabled", created, 4, false},
		{"gone", created, 99, false},
		{"its test, though disabled and selecting nothing", test, 12, true},
		{"another subscription's test", test, 1, false},
	}
	for _, c := range cases {
		job, err := f.Job(context.Background(), c.data, c.hook, published, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (job != nil) != c.want {
			t.Errorf("%s: job %v, want one: %v", c.name, job, c.want)
		}
	}
	env := loadEnvelope(t, "package.created")
	typ, body, _ := app.RenderBody(env)
	job, _ := f.Job(context.Background(), created, 1, published, 0)
	if job.GetDeliveryId() != app.DeliveryID(env.GetEventId(), 1) || job.GetHookId() != 1 || job.GetEvent() != typ ||
		string(job.GetBody()) != string(body) || job.GetEventId() != env.GetEventId() || job.GetCreatedAtUnixMs() != published.UnixMilli() {
		t.Errorf("job %v", job)
	}
	if _, err := f.Job(context.Background(), []byte("\xff\xff"), 1, published, 0); !msgerr.IsPoison(err) {
		t.Errorf("garbage: %v, want poison", err)
	}
}

// TestEventJobsRenderOncePerEvent: the subscriptions handed the same message share one
// rendering (the cache, by stream sequence); another message under that sequence (a
// stream created anew) is rendered for itself.
func TestEventJobsRenderOncePerEvent(t *testing.T) {
	f := newEventJobs(t, mapSubs{1: {ID: 1, Active: true}, 2: {ID: 2, Active: true}})
	created, revoked := data(t, "package.created"), data(t, "package.revoked")
	a, _ := f.Job(context.Background(), created, 1, time.Now(), 42)
	b, _ := f.Job(context.Background(), created, 2, time.Now(), 42)
	if a == nil || b == nil || &a.Body[0] != &b.Body[0] {
		t.Fatalf("two subscriptions' jobs of one message do not share its body")
	}
	c, _ := f.Job(context.Background(), revoked, 1, time.Now(), 42)
	if c == nil || c.GetEvent() != events.TypePackageRevoked || c.GetDeliveryId() == a.GetDeliveryId() {
		t.Errorf("another message under the same sequence got %v", c)
	}
}

// data is the encoded golden envelope name.
func data(t *testing.T, name string) []byte {
	t.Helper()
	b, err := events.MarshalEnvelope(loadEnvelope(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEventJobsCarryThePackagePosition: a package's event's job carries its package and
// its number (Envelope.package_seq), which Position gives too; an event without a number
// has neither.
func TestEventJobsCarryThePackagePosition(t *testing.T) {
	f := newEventJobs(t, mapSubs{1: {ID: 1, Active: true}})
	env := loadEnvelope(t, "package.finalized")
	if env.GetPackageFinalized().GetPackage().GetPackageId() == "" {
		t.Fatal("the golden envelope has no package id")
	}
	env.PackageSeq = 7
	numbered, err := events.MarshalEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		data   []byte
		pkg    string
		pkgSeq uint64
	}{
		{"numbered", numbered, env.GetPackageFinalized().GetPackage().GetPackageId(), 7},
		{"not numbered", data(t, "package.finalized"), "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, err := f.Job(context.Background(), tc.data, 1, time.Now(), 0)
			if err != nil || job == nil {
				t.Fatalf("job %v %v", job, err)
			}
			if job.GetPackageId() != tc.pkg || job.GetPackageSeq() != tc.pkgSeq {
				t.Errorf("job's package %q #%d, want %q #%d", job.GetPackageId(), job.GetPackageSeq(), tc.pkg, tc.pkgSeq)
			}
			pkg, seq, err := f.Position(tc.data, 0)
			if err != nil || pkg != tc.pkg || seq != tc.pkgSeq {
				t.Errorf("Position: %q #%d %v, want %q #%d", pkg, seq, err, tc.pkg, tc.pkgSeq)
			}
		})
	}
}
