package servicetest_test

import (
	"context"
	"errors"
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

// recorder counts Errorf calls instead of failing the test.
type recorder struct {
	testing.TB
	errors int
}

func (r *recorder) Errorf(string, ...any) { r.errors++ }
