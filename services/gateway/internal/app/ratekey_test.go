package app

import "testing"

func TestRateKey(t *testing.T) {
	cases := map[string]string{
		"192.0.2.7":            "192.0.2.7",
		"::ffff:192.0.2.7":     "192.0.2.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1": "2001:db8:1:2::/64",
		"not an address":       "not an address",
	}
	for in, want := range cases {
		if got := RateKey(in); got != want {
			t.Errorf("RateKey(%q) = %q, want %q", in, got, want)
		}
	}
}
