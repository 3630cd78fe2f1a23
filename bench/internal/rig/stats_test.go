package rig

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"median of 4 is the 2nd", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(seq(100)...), 99, 99 * time.Millisecond},
		{"p100 is the max", ms(5, 9, 1), 100, 9 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.in, tc.p); got != tc.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.in, tc.p, got, tc.want)
			}
		})
	}
	if got := Median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("Median = %v, want 2", got)
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestCount(t *testing.T) {
	ds := []Delivery{
		{Hook: "a", Event: "package.created", ID: "1", PackageID: "p1"},
		{Hook: "a", Event: "package.created", ID: "1", PackageID: "p1"}, // a retry: same id
		{Hook: "b", Event: "package.created", ID: "2", PackageID: "p1"},
		{Hook: "a", Event: "package.created", ID: "3", PackageID: "p1"}, // same event, another id
	}
	got := Count(ds)
	want := DeliveryCount{Requests: 4, Unique: 3, Duplicates: 1, Conflicts: 1}
	if got != want {
		t.Errorf("Count = %+v, want %+v", got, want)
	}
}
