package msgerr_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/msgerr"
)

func TestKinds(t *testing.T) {
	t.Parallel()
	cause := errors.New("database down")
	tests := []struct {
		name      string
		err       error
		poison    bool
		retry     bool
		delay     time.Duration
		wantCause error
		text      string
	}{
		{"retry with a cause", msgerr.RetryAfter(time.Minute, cause), false, true, time.Minute, cause, "database down"},
		{"retry without a cause", msgerr.RetryAfter(5*time.Second, nil), false, true, 5 * time.Second, nil, "retry in 5s"},
		{"negative delay is at once", msgerr.RetryAfter(-time.Second, nil), false, true, 0, nil, "retry in 0s"},
		{"wrapped retry", fmt.Errorf("job 7: %w", msgerr.RetryAfter(time.Second, cause)), false, true, time.Second, cause, "job 7: database down"},
		{"poison", msgerr.Poison(cause), true, false, 0, nil, "database down"},
		{"poison without a cause", msgerr.Poison(nil), true, false, 0, nil, "poison message"},
		{"plain error", cause, false, false, 0, nil, "database down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := msgerr.IsPoison(tt.err); got != tt.poison {
				t.Errorf("IsPoison = %v, want %v", got, tt.poison)
			}
			d, c, ok := msgerr.Delay(tt.err)
			if ok != tt.retry || d != tt.delay || c != tt.wantCause {
				t.Errorf("Delay = %v %v %v, want %v %v %v", d, c, ok, tt.delay, tt.wantCause, tt.retry)
			}
			if tt.err.Error() != tt.text {
				t.Errorf("Error() = %q, want %q", tt.err.Error(), tt.text)
			}
		})
	}
	if !errors.Is(msgerr.Poison(cause), cause) || !errors.Is(msgerr.RetryAfter(0, cause), cause) {
		t.Error("the wrappers do not unwrap to their cause")
	}
	if !errors.Is(fmt.Errorf("job 7: %w", msgerr.Poison(cause)), msgerr.ErrPoison) || errors.Is(cause, msgerr.ErrPoison) {
		t.Error("a poison error, and only one, matches ErrPoison")
	}
}
