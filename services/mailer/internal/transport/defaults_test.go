package transport

import (
	"testing"
	"time"
)

// TestDefaults: an empty name and a zero or negative number or duration take the
// default; anything else is kept.
func TestDefaults(t *testing.T) {
	o := Options{Stream: "S", AckWait: -time.Second, Workers: 9}
	o.defaults()
	d := DefaultOptions()
	if o.Stream != "S" || o.Filter != d.Filter || o.Consumer != d.Consumer || o.AckWait != d.AckWait ||
		o.Workers != 9 || o.MaxAckPending != d.MaxAckPending || o.StatsInterval != d.StatsInterval {
		t.Errorf("Options.defaults: %+v", o)
	}
	n := NotifyOptions{Consumer: "C", Poll: time.Minute, Workers: -1}
	n.defaults()
	nd := DefaultNotifyOptions()
	if n.Stream != nd.Stream || n.Consumer != "C" || n.Poll != time.Minute || n.Workers != nd.Workers || n.ShutdownTimeout != nd.ShutdownTimeout {
		t.Errorf("NotifyOptions.defaults: %+v", n)
	}
}

// An event held by a mailer that dies comes back after AckWait; it must be back before
// its burst can be closed as quiet.
func TestNotifyAckWait(t *testing.T) {
	for _, tc := range []struct{ quiet, want time.Duration }{
		{time.Minute, 30 * time.Second},
		{3 * time.Second, 1500 * time.Millisecond},
		{time.Second, time.Second},
		{time.Hour, 30 * time.Second},
	} {
		t.Run(tc.quiet.String(), func(t *testing.T) {
			got := NotifyAckWait(tc.quiet)
			if got != tc.want {
				t.Fatalf("NotifyAckWait(%v) = %v, want %v", tc.quiet, got, tc.want)
			}
			if tc.quiet > time.Second && got >= tc.quiet {
				t.Fatalf("NotifyAckWait(%v) = %v, not shorter than the quiet period", tc.quiet, got)
			}
		})
	}
}
