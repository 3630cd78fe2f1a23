package app

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/lifecycle"
)

// tableStates are the package states, in the order of the state tables.
var tableStates = []State{StateDraft, StateActive, StateRevoked, StateExpired}

var allOps = []Op{OpOwnerUpload, OpRemoveFile, OpFinalize, OpRecipientUpload, OpRevoke, OpUseLink, OpOwnerDownload, OpEdit}

// TestUnitStateTable checks every state × operation of apply against the table of
// docs/API.md, "States and errors", written out here on its own: what is allowed, and the state it
// leads to; anything else is a 409 naming the state, and leaves the package as it was.
func TestUnitStateTable(t *testing.T) {
	t.Parallel()
	allowed := map[Op]map[State]State{ // op → from → to
		OpOwnerUpload:     {StateDraft: StateDraft},
		OpRemoveFile:      {StateDraft: StateDraft},
		OpFinalize:        {StateDraft: StateActive},
		OpRecipientUpload: {StateActive: StateActive},
		OpRevoke:          {StateActive: StateRevoked},
		OpUseLink:         {StateActive: StateActive},
		OpOwnerDownload:   {StateDraft: StateDraft, StateActive: StateActive, StateRevoked: StateRevoked},
		OpEdit:            {StateDraft: StateDraft, StateActive: StateActive},
	}
	for op := range transitions {
		if _, ok := allowed[op]; !ok || !slices.Contains(allOps, op) {
			t.Errorf("operation %q of the state table is not in this test: add its row", op)
		}
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, op := range allOps {
		for _, from := range tableStates {
			t.Run(fmt.Sprintf("%s/%s", op, from), func(t *testing.T) {
				p := Package{State: from, ExpiresAt: now.Add(time.Hour)}
				err := p.apply(op, now)
				to, ok := allowed[op][from]
				if ok {
					if err != nil || p.State != to {
						t.Fatalf("apply = %v, state %s; want allowed, state %s", err, p.State, to)
					}
					return
				}
				if KindOf(err) != KindConflict || !strings.Contains(err.Error(), "state "+string(from)) {
					t.Fatalf("apply = %v; want a conflict naming state %s", err, from)
				}
				if p.State != from {
					t.Fatalf("a refused move changed the state to %s", p.State)
				}
			})
		}
	}
}

// TestUnitOverdueCountsAsExpired: from the instant expires_at passes, every operation
// is refused as in state expired, whatever the stored state (lifecycle.EffectiveState).
func TestUnitOverdueCountsAsExpired(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, op := range allOps {
		for _, from := range []State{StateDraft, StateActive, StateRevoked} {
			for _, at := range []time.Duration{0, time.Nanosecond, time.Hour} {
				p := Package{State: from, ExpiresAt: deadline}
				err := p.apply(op, deadline.Add(at))
				if KindOf(err) != KindConflict || !strings.Contains(err.Error(), "state expired") || p.State != from {
					t.Errorf("%s a %s package %s past its deadline = %v (state %s); want a conflict naming state expired",
						op, from, at, err, p.State)
				}
			}
			// A nanosecond before the deadline the stored state decides.
			p := Package{State: from, ExpiresAt: deadline}
			if err := p.apply(op, deadline.Add(-time.Nanosecond)); err != nil && strings.Contains(err.Error(), "state expired") {
				t.Errorf("%s a %s package before its deadline: %v", op, from, err)
			}
		}
	}
	if string(StateExpired) != lifecycle.StateExpired {
		t.Errorf("StateExpired %q differs from lifecycle.StateExpired %q", StateExpired, lifecycle.StateExpired)
	}
}
