package audit

import (
	"fmt"
)

// BreakKind says how a chain is broken.
type BreakKind string

// The ways a chain breaks.
const (
	// Changed: the entry's content or hash is not what was chained.
	Changed BreakKind = "changed"
	// Deleted: the entry is missing (deleted, or moved elsewhere in an export).
	Deleted BreakKind = "deleted"
	// Reordered: an entry comes after one with a greater or equal seq.
	Reordered BreakKind = "reordered"
)

// Break is the first entry at which a chain stops verifying.
type Break struct {
	Seq  int64
	Kind BreakKind
	Why  string
}

func (b *Break) Error() string {
	return fmt.Sprintf("audit entry %d %s: %s", b.Seq, b.Kind, b.Why)
}

// Verifier checks entries handed to it in seq order against the chain: each entry's
// seq follows the last, its prev_hash is the last entry's hash, and its hash is what
// Hash computes. It starts from an anchor (the seq and hash before the first entry).
type Verifier struct {
	seq    int64
	hash   string
	count  int64
	broken *Break
}

// NewVerifier starts a verification after the entry anchorSeq whose hash is anchorHash
// (0 and GenesisHash for a whole chain).
func NewVerifier(anchorSeq int64, anchorHash string) *Verifier {
	return &Verifier{seq: anchorSeq, hash: anchorHash}
}

// Add checks the next entry and returns the first break, nil while the chain holds.
// After a break, Add returns that break again.
func (v *Verifier) Add(e Entry) *Break {
	if v.broken != nil {
		return v.broken
	}
	switch {
	case e.Seq <= v.seq:
		v.broken = &Break{Seq: e.Seq, Kind: Reordered, Why: fmt.Sprintf("comes after entry %d", v.seq)}
	case e.Seq > v.seq+1:
		v.broken = &Break{Seq: v.seq + 1, Kind: Deleted, Why: fmt.Sprintf("entry %d follows entry %d", e.Seq, v.seq)}
	case Hash(e, e.PrevHash) != e.Hash:
		v.broken = &Break{Seq: e.Seq, Kind: Changed, Why: "its hash does not match its content"}
	case e.PrevHash != v.hash:
		// The entry itself is intact, so the one before it was rewritten (with a hash
		// to match) or replaced.
		v.broken = &Break{Seq: v.seq, Kind: Changed, Why: fmt.Sprintf("entry %d's prev_hash is not its hash", e.Seq)}
		if v.count == 0 {
			v.broken = &Break{Seq: e.Seq, Kind: Changed, Why: "its prev_hash is not the anchor's hash"}
		}
	default:
		v.seq, v.hash = e.Seq, e.Hash
		v.count++
	}
	return v.broken
}

// End checks that the chain reached its head (the last seq and hash written, which the
// database keeps apart from the entries): entries missing at the end, or a last entry
// rewritten, break it.
func (v *Verifier) End(headSeq int64, headHash string) *Break {
	if v.broken != nil {
		return v.broken
	}
	switch {
	case headSeq > v.seq:
		v.broken = &Break{Seq: v.seq + 1, Kind: Deleted, Why: fmt.Sprintf("the chain's head is entry %d, the last entry is %d", headSeq, v.seq)}
	case headSeq < v.seq:
		v.broken = &Break{Seq: headSeq + 1, Kind: Changed, Why: fmt.Sprintf("entries after the chain's head %d", headSeq)}
	case headHash != v.hash:
		v.broken = &Break{Seq: v.seq, Kind: Changed, Why: "its hash is not the chain head's"}
	}
	return v.broken
}

// Last is the seq and hash of the last entry verified (the anchor before any).
func (v *Verifier) Last() (int64, string) { return v.seq, v.hash }

// Count is the number of entries verified.
func (v *Verifier) Count() int64 { return v.count }
