package servicetest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestRunInBackground: the run function runs until Stop cancels its context, Stop
// waits for it to return, and a second Stop is harmless.
func TestRunInBackground(t *testing.T) {
	started, returned := make(chan struct{}), make(chan struct{})
	b := servicetest.RunInBackground(t, "loop", func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		close(returned)
		return nil
	})
	<-started
	select {
	case <-returned:
		t.Fatal("returned before Stop")
	default:
	}
	b.Stop(t)
	select {
	case <-returned:
	default:
		t.Fatal("Stop came back before the run function returned")
	}
	b.Stop(t)
}

// TestRunInBackgroundReportsTheError: an error the run function returns fails the
// test that started it.
func TestRunInBackgroundReportsTheError(t *testing.T) {
	r := &recorder{TB: t}
	servicetest.RunInBackground(r, "loop", func(ctx context.Context) error {
		<-ctx.Done()
		return errors.New("broken")
	}).Stop(r)
	if r.errors != 1 {
		t.Fatalf("%d errors reported, want 1", r.errors)
	}
}

// recorder counts Errorf and Fatalf calls, and keeps their messages, instead of
// failing the test (its Fatalf returns).
type recorder struct {
	testing.TB
	errors   int
	messages []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors++
	r.messages = append(r.messages, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }
