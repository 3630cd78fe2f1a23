// Package rig runs shipfile's real binaries and their dependencies for the benchmark
// program (cmd/shipbench) and the fault scenarios (faults/): it builds the services once,
// starts them as processes with SHIPFILE_* settings, kills and restarts them, runs private
// PostgreSQL clusters, and drives the REST API and a webhook receiver. Its helpers take a
// testing.TB, like the e2e tests' helpers; the benchmark program, which runs outside
// `go test`, gets one from Run.
package rig

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// scope is a testing.TB for code that runs outside `go test`, so that the benchmark
// program can use the same helpers as the tests (rig, servicetest, pgtest). Fatal ends
// the function that Run started, as it ends a test (runtime.Goexit); cleanups run when
// that function ends, last registered first.
//
// The embedded testing.TB is nil: it is there because testing.TB has an unexported
// method, which only an embedding can provide. Every method the helpers call is defined
// on scope; calling another one panics, and Run reports the panic as a failure.
type scope struct {
	testing.TB
	name string
	log  io.Writer

	mu       sync.Mutex
	failed   bool
	errs     []string
	cleanups []func()
}

// Run calls fn with a testing.TB named name whose logs go to log, waits for it to end
// (returning, calling Fatal or panicking), runs its cleanups, and returns an error
// listing what failed, or nil.
func Run(name string, log io.Writer, fn func(t testing.TB)) error {
	s := &scope{name: name, log: log}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				buf := make([]byte, 8<<10)
				buf = buf[:runtime.Stack(buf, false)]
				s.Errorf("panic: %v\n%s", r, buf)
			}
		}()
		fn(s)
	}()
	<-done
	s.runCleanups()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.failed {
		return nil
	}
	if len(s.errs) == 0 {
		return fmt.Errorf("%s failed", name)
	}
	return errors.New(strings.Join(s.errs, "; "))
}

func (s *scope) runCleanups() {
	for {
		s.mu.Lock()
		n := len(s.cleanups)
		if n == 0 {
			s.mu.Unlock()
			return
		}
		f := s.cleanups[n-1]
		s.cleanups = s.cleanups[:n-1]
		s.mu.Unlock()
		func() {
			defer func() {
				if r := recover(); r != nil {
					s.Errorf("cleanup panicked: %v", r)
				}
			}()
			f()
		}()
	}
}

func (s *scope) Name() string { return s.name }
func (s *scope) Helper()      {}

func (s *scope) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *scope) Log(args ...any) { s.Logf("%s", fmt.Sprintln(args...)) }

func (s *scope) Logf(format string, args ...any) {
	msg := strings.TrimSuffix(fmt.Sprintf(format, args...), "\n")
	fmt.Fprintf(s.log, "    %s: %s\n", s.name, msg)
}

func (s *scope) Error(args ...any) { s.Errorf("%s", strings.TrimSuffix(fmt.Sprintln(args...), "\n")) }

func (s *scope) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.Logf("ERROR: %s", msg)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = true
	s.errs = append(s.errs, msg)
}

func (s *scope) Fail() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = true
}

func (s *scope) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *scope) FailNow() {
	s.Fail()
	runtime.Goexit()
}

func (s *scope) Fatal(args ...any) {
	s.Error(args...)
	runtime.Goexit()
}

func (s *scope) Fatalf(format string, args ...any) {
	s.Errorf(format, args...)
	runtime.Goexit()
}

func (s *scope) Skip(args ...any) {
	s.Log(args...)
	runtime.Goexit()
}

func (s *scope) Skipf(format string, args ...any) {
	s.Logf(format, args...)
	runtime.Goexit()
}

func (s *scope) SkipNow()      { runtime.Goexit() }
func (s *scope) Skipped() bool { return false }

// TempDir returns a new directory removed when the function ends.
func (s *scope) TempDir() string {
	dir, err := os.MkdirTemp("", "shipbench-")
	if err != nil {
		s.Fatalf("temp dir: %v", err)
	}
	s.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Setenv sets an environment variable until the function ends.
func (s *scope) Setenv(key, value string) {
	old, had := os.LookupEnv(key)
	if err := os.Setenv(key, value); err != nil {
		s.Fatalf("setenv %s: %v", key, err)
	}
	s.Cleanup(func() {
		if had {
			_ = os.Setenv(key, old)
		} else {
			_ = os.Unsetenv(key)
		}
	})
}
