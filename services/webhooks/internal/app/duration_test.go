package app

import (
	"testing"
	"time"
)

func TestHumanDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{120 * time.Hour, "5 days"},
		{24 * time.Hour, "1 day"},
		{36 * time.Hour, "36 hours"},
		{time.Hour, "1 hour"},
		{90 * time.Minute, "90 minutes"},
		{1500 * time.Millisecond, "1.5s"},
	} {
		if got := humanDuration(c.d); got != c.want {
			t.Errorf("humanDuration(%s) = %q, want %q", c.d, got, c.want)
		}
	}
}
