// Package app is what the expiry service does: every interval it expires the packages
// whose expires_at has passed (state expired, so their link is dead; their objects
// queued for deletion; package.expired and an audit entry written in the same
// transaction), then removes the queued objects from storage and aborts stale
// multipart uploads. Several instances may run at once: the store locks the rows it
// works on with FOR UPDATE SKIP LOCKED, so no package is expired twice.
package app

import (
	"context"
	"time"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// Package is a package the expiry service has just expired.
type Package struct {
	// PackageHead is its id and the head its events carry, read off its row.
	events.PackageHead
	// PreviousState is the state it was in: draft, active or revoked.
	PreviousState string
	ExpiresAt     time.Time
	// ObjectKeys are the keys of its files' objects, now queued for deletion.
	ObjectKeys []string
}

// Checkpoint is the audit chain's head and anchor at a moment.
type Checkpoint struct {
	At                   time.Time
	HeadSeq, AnchorSeq   int64
	HeadHash, AnchorHash string
}

// AuditEntry is a row of the audit log written by the system.
type AuditEntry struct {
	Action    string
	PackageID string
}

// Effects are what an expiry writes beside the state change, in its transaction.
type Effects struct {
	Events []*eventsv1.Envelope
	Audit  []AuditEntry
}

// Store is the persistence the expirer needs.
type Store interface {
	// ExpireDue locks up to limit packages overdue at now (lifecycle.Overdue: not
	// expired, expires_at <= now; oldest deadline first, skipping rows another transaction holds), sets
	// them expired, queues their files' objects for deletion and writes the effects
	// that effects returns for them, all in one transaction. It returns the packages
	// it expired; an error rolls everything back.
	ExpireDue(ctx context.Context, now time.Time, limit int, effects func([]Package) (Effects, error)) ([]Package, error)
	// SweepDeletions locks up to limit queued object keys (oldest first, skipping keys
	// another transaction holds), calls remove with them, forgets the keys remove
	// reports removed and commits. It returns how many keys it locked and how many it
	// forgot; remove's error is returned (wrapped) after the removed keys are forgotten.
	SweepDeletions(ctx context.Context, limit int, remove func(keys []string) (removed []string, err error)) (locked, forgotten int, err error)
	// SweepOrphans locks up to limit object key reservations older than grace (by the
	// database's clock, oldest first, skipping keys another transaction holds: a
	// gateway committing the key's file row, or another sweep). Keys whose file row
	// exists are forgotten; the others go to remove, and those it reports removed are
	// forgotten, then it commits. The locks keep a gateway from committing a file row
	// of a key whose object is being removed. It returns how many keys it locked and
	// how many objects were removed; remove's error is returned (wrapped).
	SweepOrphans(ctx context.Context, grace time.Duration, limit int, remove func(keys []string) (removed []string, err error)) (locked, removed int, err error)
	// RemoveOldAudit removes up to limit audit entries older than retention (by the
	// database's clock) from the front of the audit chain, up to the first younger or
	// legally held one, keeping the last one's hash as the chain's anchor, and returns
	// how many it removed.
	RemoveOldAudit(ctx context.Context, retention time.Duration, limit int) (int, error)
	// CheckpointAudit writes an audit.checkpoint event (checkpoint builds it from the
	// chain's head and anchor and the claim's time) when every has passed since the
	// last one, whichever instance wrote it; it reports whether it wrote one.
	CheckpointAudit(ctx context.Context, every time.Duration, checkpoint func(Checkpoint) *eventsv1.Envelope) (bool, error)
	// OverdueLag returns how long before now the oldest package overdue at now reached
	// its expires_at; 0 when there is none.
	OverdueLag(ctx context.Context, now time.Time) (time.Duration, error)
	// PendingDeletions counts the object keys queued for deletion.
	PendingDeletions(ctx context.Context) (int64, error)
}

// Objects is the object store.
type Objects interface {
	// Remove deletes the objects under keys and returns the keys that are gone
	// (including keys that were missing already). err describes the failures.
	Remove(ctx context.Context, keys []string) (removed []string, err error)
	// AbortStaleUploads aborts the incomplete multipart uploads under prefix started
	// before before, and returns how many it aborted.
	AbortStaleUploads(ctx context.Context, prefix string, before time.Time) (int, error)
}
