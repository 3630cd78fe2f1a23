package servicetest

import (
	"context"
	"testing"
	"time"
)

// BackgroundStopTimeout is how long Background.Stop waits for the run function to
// return.
const BackgroundStopTimeout = 60 * time.Second

// Background is a service's run function (a consumer's Run, say) running in a
// goroutine of a test, until Stop or the end of the test.
type Background struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{} // closed when run returned
	err    error
}

// RunInBackground calls run in a goroutine with a context that Stop cancels; the end
// of the test calls Stop.
func RunInBackground(t testing.TB, name string, run func(context.Context) error) *Background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &Background{name: name, cancel: cancel, done: make(chan struct{})}
	go func() {
		b.err = run(ctx)
		close(b.done)
	}()
	t.Cleanup(func() { b.Stop(t) })
	return b
}

// Stop cancels the run function's context and waits for it to return, as a SIGTERM
// would; an error it returned, or not returning within BackgroundStopTimeout, fails
// the test. Stopping twice, or from several goroutines at once, is fine.
func (b *Background) Stop(t testing.TB) {
	t.Helper()
	b.cancel()
	select {
	case <-b.done:
		if b.err != nil {
			t.Errorf("%s: %v", b.name, b.err)
		}
	case <-time.After(BackgroundStopTimeout):
		t.Errorf("%s did not stop within %s", b.name, BackgroundStopTimeout)
	}
}
