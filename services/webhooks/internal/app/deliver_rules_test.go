package app

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// schedule is the default SHIPFILE_WEBHOOK_RETRY_SCHEDULE (docs/CONFIGURATION.md): 8
// attempts a round.
var schedule = []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour}

// within reports whether d is base ± the schedule's jitter.
func within(d, base time.Duration) bool {
	return d >= base*90/100 && d <= base*110/100
}

func TestDecideAttempt(t *testing.T) {
	last := len(schedule) + 1
	for _, c := range []struct {
		name       string
		resp       Response
		round      int
		status     string
		outcome    string
		disable    string
		wantErr    string        // substring of Error; "" means no error
		waitAbout  time.Duration // the wait ± jitter, when pending
		waitExact  time.Duration // the exact wait (a Retry-After above the schedule)
		waitAtMost time.Duration // an upper bound instead (jitter could exceed a small Retry-After)
	}{
		{name: "200 succeeds", resp: Response{StatusCode: 200}, round: 1, status: StatusSucceeded, outcome: OutcomeSucceeded},
		{name: "204 on the last attempt succeeds", resp: Response{StatusCode: 204}, round: last, status: StatusSucceeded, outcome: OutcomeSucceeded},
		{name: "299 succeeds", resp: Response{StatusCode: 299}, round: 3, status: StatusSucceeded, outcome: OutcomeSucceeded},
		{name: "410 disables on the first attempt", resp: Response{StatusCode: 410}, round: 1, status: StatusFailed, outcome: OutcomeDisabled, disable: ReasonGone, wantErr: "410 Gone"},
		{name: "410 disables on the last attempt", resp: Response{StatusCode: 410}, round: last, status: StatusFailed, outcome: OutcomeDisabled, disable: ReasonGone, wantErr: "410"},
		{name: "500 retries after the first wait", resp: Response{StatusCode: 500}, round: 1, status: StatusPending, outcome: OutcomeRetried, wantErr: "500 Internal Server Error", waitAbout: 10 * time.Second},
		{name: "500 retries after the third wait", resp: Response{StatusCode: 500}, round: 3, status: StatusPending, outcome: OutcomeRetried, wantErr: "500", waitAbout: 5 * time.Minute},
		{name: "500 on the 7th attempt waits the last wait", resp: Response{StatusCode: 500}, round: last - 1, status: StatusPending, outcome: OutcomeRetried, wantErr: "500", waitAbout: 12 * time.Hour},
		{name: "500 on the last attempt fails", resp: Response{StatusCode: 500}, round: last, status: StatusFailed, outcome: OutcomeFailed, wantErr: "500"},
		{name: "400 retries like 5xx", resp: Response{StatusCode: 400}, round: 2, status: StatusPending, outcome: OutcomeRetried, wantErr: "400 Bad Request", waitAbout: time.Minute},
		{name: "404 retries", resp: Response{StatusCode: 404}, round: 1, status: StatusPending, outcome: OutcomeRetried, wantErr: "404", waitAbout: 10 * time.Second},
		{name: "3xx is not followed and retries", resp: Response{StatusCode: 302}, round: 1, status: StatusPending, outcome: OutcomeRetried, wantErr: "redirects are not followed", waitAbout: 10 * time.Second},
		{name: "no response retries with the transport error", resp: Response{Err: errors.New("dial tcp: connection refused")}, round: 1, status: StatusPending, outcome: OutcomeRetried, wantErr: "connection refused", waitAbout: 10 * time.Second},
		{name: "no response and no error", resp: Response{}, round: 2, status: StatusPending, outcome: OutcomeRetried, wantErr: "no response", waitAbout: time.Minute},
		{name: "429 Retry-After above the schedule is honoured", resp: Response{StatusCode: 429, RetryAfter: time.Hour}, round: 1, status: StatusPending, outcome: OutcomeRetried, wantErr: "429", waitExact: time.Hour},
		{name: "503 Retry-After above the schedule is honoured", resp: Response{StatusCode: 503, RetryAfter: 2 * time.Minute}, round: 2, status: StatusPending, outcome: OutcomeRetried, wantErr: "503", waitExact: 2 * time.Minute},
		{name: "429 Retry-After below the schedule keeps the schedule", resp: Response{StatusCode: 429, RetryAfter: time.Second}, round: 3, status: StatusPending, outcome: OutcomeRetried, wantErr: "429", waitAbout: 5 * time.Minute},
		{name: "429 without Retry-After keeps the schedule", resp: Response{StatusCode: 429}, round: 1, status: StatusPending, outcome: OutcomeRetried, wantErr: "429", waitAbout: 10 * time.Second},
		{name: "500 Retry-After is ignored", resp: Response{StatusCode: 500, RetryAfter: time.Hour}, round: 1, status: StatusPending, outcome: OutcomeRetried, wantErr: "500", waitAtMost: 11 * time.Second},
		{name: "502 Retry-After is ignored", resp: Response{StatusCode: 502, RetryAfter: time.Hour}, round: 1, status: StatusPending, outcome: OutcomeRetried, wantErr: "502", waitAtMost: 11 * time.Second},
		{name: "429 on the last attempt fails despite Retry-After", resp: Response{StatusCode: 429, RetryAfter: time.Minute}, round: last, status: StatusFailed, outcome: OutcomeFailed, wantErr: "429"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for range 20 { // the wait is jittered: try a few draws
				o := DecideAttempt(c.resp, c.round, schedule)
				if o.Status != c.status || o.Outcome != c.outcome || o.DisableReason != c.disable {
					t.Fatalf("got status %q outcome %q disable %q, want %q %q %q", o.Status, o.Outcome, o.DisableReason, c.status, c.outcome, c.disable)
				}
				if (c.wantErr == "") != (o.Error == "") || !strings.Contains(o.Error, c.wantErr) {
					t.Fatalf("error %q, want one containing %q", o.Error, c.wantErr)
				}
				switch {
				case c.status != StatusPending:
					if o.Wait != 0 {
						t.Fatalf("wait %s on a settled delivery", o.Wait)
					}
				case c.waitExact > 0:
					if o.Wait != c.waitExact {
						t.Fatalf("wait %s, want %s", o.Wait, c.waitExact)
					}
				case c.waitAtMost > 0:
					if o.Wait <= 0 || o.Wait > c.waitAtMost {
						t.Fatalf("wait %s, want (0, %s]", o.Wait, c.waitAtMost)
					}
				default:
					if !within(o.Wait, c.waitAbout) {
						t.Fatalf("wait %s, want %s ± 10%%", o.Wait, c.waitAbout)
					}
				}
			}
		})
	}
}

// TestDecideAttemptRoundLength: a round has len(schedule)+1 attempts whatever the
// schedule, and an empty schedule gives one attempt.
func TestDecideAttemptRoundLength(t *testing.T) {
	for _, s := range [][]time.Duration{nil, {time.Second}, schedule} {
		for round := 1; round <= len(s)+1; round++ {
			o := DecideAttempt(Response{StatusCode: 500}, round, s)
			want := StatusPending
			if round == len(s)+1 {
				want = StatusFailed
			}
			if o.Status != want {
				t.Errorf("schedule of %d waits, attempt %d: status %q, want %q", len(s), round, o.Status, want)
			}
		}
	}
}

func TestDuplicateJob(t *testing.T) {
	for _, c := range []struct {
		status string
		round  int
		dup    bool
	}{
		{StatusPending, 0, false},
		{StatusPending, 3, false},
		{StatusSucceeded, 0, true},
		{StatusSucceeded, 2, true},
		{StatusFailed, 8, true},
		{StatusFailed, 1, true},
		// failed then redelivered through the gateway: a new round starts at 0
		{StatusFailed, 0, false},
	} {
		got := duplicateJob(Delivery{Status: c.status, RoundAttempts: c.round}) != ""
		if got != c.dup {
			t.Errorf("status %s round attempts %d: duplicate %v, want %v", c.status, c.round, got, c.dup)
		}
	}
}

func TestFailsWithoutAttempt(t *testing.T) {
	for _, c := range []struct {
		active bool
		event  string
		want   bool
	}{
		{true, events.TypePackageFinalized, false},
		{true, events.TypeWebhookTest, false},
		{false, events.TypePackageFinalized, true},
		{false, events.TypePackageDownloaded, true},
		{false, events.TypeWebhookTest, false}, // a test reaches a disabled subscription
	} {
		if got := failsWithoutAttempt(Subscription{Active: c.active}, c.event); got != c.want {
			t.Errorf("active %v event %s: %v, want %v", c.active, c.event, got, c.want)
		}
	}
}

func TestFailureText(t *testing.T) {
	for _, c := range []struct {
		resp Response
		want string
	}{
		{Response{Err: errors.New("context deadline exceeded")}, "context deadline exceeded"},
		{Response{}, "no response"},
		{Response{StatusCode: 301}, "the receiver answered 301 Moved Permanently; redirects are not followed"},
		{Response{StatusCode: 500}, "the receiver answered 500 Internal Server Error"},
		{Response{StatusCode: 418}, "the receiver answered 418 I'm a teapot"},
		{Response{StatusCode: 410, Err: errors.New("ignored")}, "the receiver answered 410 Gone"},
	} {
		if got := failureText(c.resp); got != c.want {
			t.Errorf("failureText(%+v) = %q, want %q", c.resp, got, c.want)
		}
	}
}

// TestDisableReason: the health pass disables with a reason naming the configured
// period (SHIPFILE_WEBHOOK_DISABLE_AFTER, 5 days by default: docs/WEBHOOKS.md).
func TestDisableReason(t *testing.T) {
	for _, c := range []struct {
		after time.Duration
		want  string
	}{
		{120 * time.Hour, "every delivery failed for 5 days"},
		{time.Hour, "every delivery failed for 1 hour"},
		{90 * time.Second, "every delivery failed for 1m30s"},
	} {
		h := NewHealth(nil, nil, nil, nil, HealthOptions{DisableAfter: c.after})
		if got := h.DisableReason(); got != c.want {
			t.Errorf("DisableAfter %s: %q, want %q", c.after, got, c.want)
		}
	}
}

// TestHeadersPreviousSecretGrace: the previous secret signs Webhook-Signature only
// until its grace ends; X-Service-Signature always uses the current secret alone.
func TestHeadersPreviousSecretGrace(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		until time.Time
		sigs  int
	}{
		{now.Add(time.Hour), 2},
		{now.Add(time.Nanosecond), 2},
		{now, 1}, // the grace ends at until
		{now.Add(-time.Hour), 1},
	} {
		del := Delivery{ID: "d", SubscriptionID: 7, Event: events.TypePackageFinalized, Body: []byte(`{}`),
			Subscription: Subscription{ID: 7, Secret: "new", PreviousSecret: "old", PreviousSecretUntil: c.until}}
		h := Headers(del, now)
		if got := len(strings.Fields(h.Get(HeaderWebhookSignature))); got != c.sigs {
			t.Errorf("grace until %s: %d signatures, want %d", c.until.Sub(now), got, c.sigs)
		}
		if strings.Contains(h.Get(HeaderSignature), " ") {
			t.Errorf("X-Service-Signature carries more than one signature: %q", h.Get(HeaderSignature))
		}
		if h.Get(HeaderHookID) != "7" || h.Get(HeaderDelivery) != "d" || h.Get(HeaderWebhookID) != "d" ||
			h.Get(HeaderWebhookTimestamp) != "1700000000" || h.Get("User-Agent") != UserAgent || h.Get(HeaderEvent) != events.TypePackageFinalized {
			t.Errorf("headers %v", h)
		}
	}
}

func TestJobDelivery(t *testing.T) {
	full := &eventsv1.WebhookJob{DeliveryId: "d-1", HookId: 7, Event: "package.created", Body: []byte(`{"a":1}`),
		EventId: "ev-1", CreatedAtUnixMs: 1700000000123}
	// A job of a fan-out before rows came with the first attempt: its row exists.
	old := &eventsv1.WebhookJob{DeliveryId: "d-1", HookId: 7, Event: "package.created", Body: []byte(`{"a":1}`)}
	bare := &eventsv1.WebhookJob{DeliveryId: "d-1", HookId: 7}
	for _, c := range []struct {
		name string
		job  *eventsv1.WebhookJob
		ok   bool
	}{
		{"the fan-out's job", full, true},
		{"an older fan-out's job (its row exists)", old, false},
		{"a retry or a redelivery (ids only)", bare, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, ok := jobDelivery(c.job)
			if ok != c.ok {
				t.Fatalf("ok %v, want %v", ok, c.ok)
			}
			if !ok {
				return
			}
			if d.ID != "d-1" || d.SubscriptionID != 7 || d.EventID != "ev-1" || d.Event != "package.created" || string(d.Body) != `{"a":1}` ||
				d.Status != StatusPending || d.RoundAttempts != 0 || d.Attempts != 0 || d.CreatedAt.UnixMilli() != 1700000000123 {
				t.Fatalf("%+v", d)
			}
		})
	}
}
