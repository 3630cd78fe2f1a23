package app

import (
	"slices"
	"time"

	"github.com/shipfile/shipfile/pkg/lifecycle"
)

// Op is an operation on a package that the state table governs.
type Op string

// The operations of the state table.
const (
	OpOwnerUpload     Op = "add files to"
	OpRemoveFile      Op = "remove files from"
	OpFinalize        Op = "finalize"
	OpRecipientUpload Op = "upload to"
	OpRevoke          Op = "revoke"
	OpUseLink         Op = "use the link of"
	OpOwnerDownload   Op = "download files of"
	OpEdit            Op = "edit"
)

// transition is one row of the state table: the states an operation is allowed from,
// and the state it leads to ("" keeps the state).
type transition struct {
	from []State
	to   State
}

// transitions is the package state table, the one place that decides which moves are
// allowed. Deletion is allowed from every state and expiry belongs to the expiry service.
var transitions = map[Op]transition{
	OpOwnerUpload:     {from: []State{StateDraft}},
	OpRemoveFile:      {from: []State{StateDraft}},
	OpFinalize:        {from: []State{StateDraft}, to: StateActive},
	OpRecipientUpload: {from: []State{StateActive}},
	OpRevoke:          {from: []State{StateActive}, to: StateRevoked},
	OpUseLink:         {from: []State{StateActive}},
	// An expired package's objects are deleted: its files are still listed, not served.
	OpOwnerDownload: {from: []State{StateDraft, StateActive, StateRevoked}},
	OpEdit:          {from: []State{StateDraft, StateActive}},
}

// apply checks that op is allowed in the package's state at now and moves it to the
// next state. A move that is not allowed is a conflict naming the state. A package whose
// expires_at has passed counts as expired even before the expiry service has marked it
// (it does so within one interval), so an overdue draft cannot be finalized nor an
// overdue link used: lifecycle.EffectiveState, the rule every service shares.
func (p *Package) apply(op Op, now time.Time) error {
	state := State(lifecycle.EffectiveState(string(p.State), p.ExpiresAt, now))
	t, ok := transitions[op]
	if !ok || !slices.Contains(t.from, state) {
		return Conflict("cannot %s a package in state %s", op, state)
	}
	if t.to != "" {
		p.State = t.to
	}
	return nil
}
