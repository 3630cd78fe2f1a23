package rig

import (
	"fmt"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p ≤ 100, nearest rank) of ds, or 0 when
// ds is empty. ds is sorted in place.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(p/100*float64(len(ds))+0.999999) - 1
	return ds[min(max(rank, 0), len(ds)-1)]
}

// Median returns the median of xs (the lower middle one for an even count), or 0.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// MiB formats a byte count in MiB.
func MiB(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

// MBps formats a throughput in MB/s (10^6 bytes per second).
func MBps(bytesPerSecond float64) string { return fmt.Sprintf("%.0f MB/s", bytesPerSecond/1e6) }

// Ms formats a duration in milliseconds.
func Ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
