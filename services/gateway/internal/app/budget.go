package app

import (
	"fmt"

	"github.com/google/uuid"
)

// The download limit as a byte budget (docs/API.md, "Download limit"): with max_downloads = N
// each file has, per link, N × its size bytes to give. Every answer through the link
// (a whole file, one range, its entry in the archive) takes the bytes it will send
// when it starts and gives back what it did not send when it ends, so a broken
// download can be resumed, but no combination of ranges, aborts, HEADs, parallel
// connections and archives gets more than N whole copies. An empty file has N units,
// one per whole copy.

// Span is what an answer through a link sends of a file: Length bytes from Start.
// Partial: one range, answered 206; else the whole file, 200. Bodiless: the answer
// sends no body (a HEAD, or a 304 that the request's validators ask for).
type Span struct {
	Start, Length int64
	Partial       bool
	Bodiless      bool
}

// WholeFile is the span of all of f.
func WholeFile(f File) Span { return Span{Length: f.Size} }

// RangeNotSatisfiableError answers a Range that no byte of a file of Size bytes
// satisfies (416, with Content-Range: bytes */Size).
type RangeNotSatisfiableError struct{ Size int64 }

func (e *RangeNotSatisfiableError) Error() string {
	return fmt.Sprintf("the range asks for no byte of this %d-byte file", e.Size)
}

// budgetUnit is what one whole copy of a file of size bytes takes.
func budgetUnit(size int64) int64 { return max(size, 1) }

// LinkBudget is the budget of a file of size bytes through a link with limit
// downloads.
func LinkBudget(size int64, limit int) int64 { return int64(limit) * budgetUnit(size) }

// AnswerCost is what an answer sending span of a file of size bytes takes from its
// budget: the bytes it sends; nothing without a body; one unit for a whole empty file.
func AnswerCost(size int64, s Span) int64 {
	switch {
	case s.Bodiless:
		return 0
	case size == 0 && !s.Partial:
		return 1
	}
	return s.Length
}

// Sent is what an answer through a link sent of its span: Bytes of its body went out,
// Whole when the body went out to its last byte.
type Sent struct {
	Bytes int64
	Whole bool
}

// Counted reports whether an answer of span counts a download and fires
// package.downloaded: it sends a body that starts at byte 0.
func (s Span) Counted() bool { return !s.Bodiless && s.Start == 0 }

// GiveBack is what an answer that took cost gives back to the budget once it sent
// sent: what it did not send.
func GiveBack(cost int64, sent Sent) int64 {
	if sent.Whole {
		return 0
	}
	return cost - min(max(sent.Bytes, 0), cost)
}

// BudgetLeft is what is left of f's budget through the link under limit; ok is false
// when there is no limit.
func (f File) BudgetLeft(limit *int) (left int64, ok bool) {
	if limit == nil {
		return 0, false
	}
	return max(0, LinkBudget(f.Size, *limit)-f.LinkTaken), true
}

// BudgetSpent reports whether f's budget through the link is spent: it answers 410.
func (f File) BudgetSpent(limit *int) bool {
	left, ok := f.BudgetLeft(limit)
	return ok && left == 0
}

// DownloadsLeft is f's budget left through the link in whole copies under limit (nil:
// no limit, nil returned).
func (f File) DownloadsLeft(limit *int) *int {
	left, ok := f.BudgetLeft(limit)
	if !ok {
		return nil
	}
	n := int(left / budgetUnit(f.Size))
	return &n
}

// LinkMayDownload reports whether a file may be downloaded through its package's
// link: files the owner put in may, files uploaded through the link never (whoever
// holds a forwarded request link must not read what the recipient sent).
func LinkMayDownload(f File) bool { return f.UploadedBy != ByRecipient }

// Finish ends an answer through a link: what it took and did not send goes back to
// the budget.
type Finish func(Sent)

// ArchiveFinish ends an archive through a link: sent says what went out of each
// file's entry (a file missing from it sent nothing). What the entries took and did
// not send goes back to the budgets; entries sent whole keep what they took.
type ArchiveFinish func(sent map[uuid.UUID]Sent)
