package rig

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
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

// CPUTimes is a reading of /proc/stat's total and idle CPU time (in clock ticks); Idle
// includes IOWait, the idle time while some task waited for the disk.
type CPUTimes struct{ Total, Idle, IOWait uint64 }

// ReadCPU reads the machine's CPU times.
func ReadCPU() CPUTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var c CPUTimes
	for i, f := range strings.Fields(line)[1:] {
		n, _ := strconv.ParseUint(f, 10, 64)
		c.Total += n
		if i == 3 || i == 4 { // idle, iowait
			c.Idle += n
		}
		if i == 4 {
			c.IOWait = n
		}
	}
	return c
}

// BusySince is the share of the machine's CPU time that was busy since c.
func (c CPUTimes) BusySince() float64 { return c.busySince(false) }

// LoadSince is BusySince with the time waiting for the disk counted as busy: a disk kept
// busy by another process (MinIO's removals) slows every fsync (PostgreSQL's commits).
func (c CPUTimes) LoadSince() float64 { return c.busySince(true) }

// busySince is the share of the CPU time since c that was not idle; with ioWaitBusy,
// idle time while a task waited for the disk counts as busy.
func (c CPUTimes) busySince(ioWaitBusy bool) float64 {
	now := ReadCPU()
	total := now.Total - c.Total
	if total == 0 {
		return 0
	}
	idle := now.Idle - c.Idle
	if ioWaitBusy {
		idle -= now.IOWait - c.IOWait
	}
	return 1 - float64(idle)/float64(total)
}

// WaitQuiet waits until the machine's CPU was less than busy busy over one second,
// the time waiting for the disk counted as busy (work a row left behind: MinIO removing
// the expiry row's 100,000 deleted objects in the background, PostgreSQL's autovacuum of
// its tables), for at most max or until ctx is done. It returns how long it waited and
// that share over the last second.
func WaitQuiet(ctx context.Context, busy float64, max time.Duration) (time.Duration, float64) {
	start := time.Now()
	for {
		c := ReadCPU()
		select {
		case <-ctx.Done():
			return time.Since(start), c.LoadSince()
		case <-time.After(time.Second):
		}
		b := c.LoadSince()
		if b < busy || time.Since(start) >= max {
			return time.Since(start), b
		}
	}
}

// ProcCPU returns the CPU time (user + system) a process has used so far.
func ProcCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces) in parentheses.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseUint(fields[11], 10, 64)
	stime, _ := strconv.ParseUint(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ is 100 on Linux
}

// TreeCPU returns the CPU time a process and its children have used so far: its own,
// that of its children it has reaped (a PostgreSQL backend that ended), and that of
// its live children (PostgreSQL's backends and workers, when pid is the postmaster).
func TreeCPU(pid int) time.Duration {
	self := procStat(pid)
	if len(self) < 16 {
		return 0
	}
	var ticks uint64
	for _, f := range self[11:15] { // utime, stime, cutime, cstime
		v, _ := strconv.ParseUint(f, 10, 64)
		ticks += v
	}
	total := time.Duration(ticks) * time.Second / 100
	want := strconv.Itoa(pid)
	for _, child := range allPids() {
		if st := procStat(child); len(st) > 1 && st[1] == want {
			total += ProcCPU(child)
		}
	}
	return total
}

// allPids returns the ids of the machine's processes (the numeric entries of /proc).
func allPids() []int {
	dirs, _ := os.ReadDir("/proc")
	pids := make([]int, 0, len(dirs))
	for _, d := range dirs {
		if pid, err := strconv.Atoi(d.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Parent returns the parent of process pid, 0 when it cannot be read.
func Parent(pid int) int {
	st := procStat(pid)
	if len(st) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(st[1])
	return ppid
}

// procStat returns the fields of /proc/pid/stat after the command name: state, ppid, …
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// PidsNamed returns the processes whose command name (/proc/pid/comm) is name, e.g. the
// machine's MinIO server, whose CPU the transfer rows report beside the gateway's.
func PidsNamed(name string) []int {
	var pids []int
	for _, pid := range allPids() {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(b)) == name {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ProcsCPU returns the CPU time the processes pids have used so far, together.
func ProcsCPU(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		total += ProcCPU(pid)
	}
	return total
}
