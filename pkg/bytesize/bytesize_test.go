package bytesize

import (
	"math"
	"testing"
)

func TestIEC(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{-5, "-5 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{1536, "1.5 KiB"},
		{10 << 30, "10 GiB"},
		{10307921510, "9.6 GiB"},
		{1<<20 - 1, "1024 KiB"},
		{5 << 40, "5 TiB"},
		{math.MaxInt64, "8 EiB"},
	} {
		if got := IEC(tc.n); got != tc.want {
			t.Errorf("IEC(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestScaleStopsAtMaxExp(t *testing.T) {
	v, exp := Scale(3<<50, 4)
	if exp != 4 || v != 3072 {
		t.Fatalf("Scale(3 PiB, 4) = %v, %d; want 3072 TiB", v, exp)
	}
	if u := Unit(exp); u != "TiB" {
		t.Fatalf("Unit(4) = %q", u)
	}
	if v, exp := Scale(100, 4); v != 100 || exp != 0 || Unit(exp) != "B" {
		t.Fatalf("Scale(100) = %v, %d", v, exp)
	}
}
