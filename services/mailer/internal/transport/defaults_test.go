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
