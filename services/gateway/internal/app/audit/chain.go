package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// ChainReader reads the chain as of one moment (a snapshot): what retention or new
// writers change meanwhile is not seen.
type ChainReader interface {
	// Head is the seq and hash of the last entry written (0 and GenesisHash before any).
	Head(ctx context.Context) (int64, string, error)
	// Anchor is the seq and hash of the last entry retention removed (0 and GenesisHash
	// while none was).
	Anchor(ctx context.Context) (int64, string, error)
	// Entries are the entries numbered after afterSeq up to uptoSeq and at most
	// afterSeq+limit, in seq order: one page of the chain's numbers, empty where none
	// of them is in the table.
	Entries(ctx context.Context, afterSeq, uptoSeq int64, limit int) ([]Entry, error)
	// SeqRange is the first and last seq of the entries written in [from, to) (0, 0
	// when none).
	SeqRange(ctx context.Context, from, to time.Time) (int64, int64, error)
}

// Store gives the chain's snapshots and records entries of its own.
type Store interface {
	// ReadChain calls fn with a reader of one snapshot of the chain.
	ReadChain(ctx context.Context, fn func(ChainReader) error) error
	// RecordAudit writes one audit entry.
	RecordAudit(ctx context.Context, a app.AuditEntry) error
}

// pageSize is how many entries verification and export read at a time.
const pageSize = 1000

// Chain verifies and exports the audit chain.
type Chain struct {
	store Store
}

// NewChain returns the chain kept in store.
func NewChain(store Store) *Chain { return &Chain{store: store} }

// Result is what a verification found.
type Result struct {
	// From is the first seq verified, Head the chain's head; Count entries were verified.
	From, Head int64
	Count      int64
	// Break is the first broken entry, nil when the chain is whole.
	Break *Break
}

// Verify recomputes the chain from the database: from its anchor, or from the entry
// from (when > 0), whose prev_hash is then taken as it is.
func (c *Chain) Verify(ctx context.Context, from int64) (Result, error) {
	var res Result
	err := c.store.ReadChain(ctx, func(r ChainReader) error {
		headSeq, headHash, err := r.Head(ctx)
		if err != nil {
			return err
		}
		anchorSeq, anchorHash, err := r.Anchor(ctx)
		if err != nil {
			return err
		}
		if from > anchorSeq+1 {
			first, err := r.Entries(ctx, from-1, from, 1)
			if err != nil {
				return err
			}
			anchorSeq, anchorHash = from-1, ""
			if len(first) == 1 {
				anchorHash = first[0].PrevHash
			}
		}
		res.From, res.Head = anchorSeq+1, headSeq
		v := NewVerifier(anchorSeq, anchorHash)
		for after := anchorSeq; after < headSeq; after = min(headSeq, after+pageSize) {
			page, err := r.Entries(ctx, after, headSeq, pageSize)
			if err != nil {
				return err
			}
			for _, e := range page {
				if b := v.Add(e); b != nil {
					res.Count, res.Break = v.Count(), b
					return nil
				}
			}
		}
		res.Break = v.End(headSeq, headHash)
		res.Count = v.Count()
		return nil
	})
	return res, err
}

// Export calls fn with every entry written in [from, to) and those between them in the
// chain, in seq order, a page at a time (memory stays flat whatever the range). A zero
// from or to leaves that end open.
func (c *Chain) Export(ctx context.Context, from, to time.Time, fn func(Entry) error) error {
	if from.IsZero() {
		from = time.Unix(0, 0)
	}
	if to.IsZero() {
		to = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return c.store.ReadChain(ctx, func(r ChainReader) error {
		first, last, err := r.SeqRange(ctx, from, to)
		if err != nil || first == 0 {
			return err
		}
		for after := first - 1; after < last; after = min(last, after+pageSize) {
			page, err := r.Entries(ctx, after, last, pageSize)
			if err != nil {
				return err
			}
			for _, e := range page {
				if err := fn(e); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Head is the chain's head now.
func (c *Chain) Head(ctx context.Context) (seq int64, hash string, err error) {
	err = c.store.ReadChain(ctx, func(r ChainReader) error {
		seq, hash, err = r.Head(ctx)
		return err
	})
	return seq, hash, err
}

// RecordExport writes the audit entry of an export asked by u, before it streams: an
// export is itself audited.
func (c *Chain) RecordExport(ctx context.Context, u app.User, cl app.Client, from, to time.Time, format string) error {
	id := u.ID
	stamp := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	return c.store.RecordAudit(ctx, app.AuditEntry{Actor: "user", ActorUserID: &id, Action: "audit.export", IP: cl.IP, UserAgent: cl.UserAgent,
		Detail: fmt.Sprintf("format %s, from %s to %s", format, stamp(from), stamp(to))})
}
