package app

import "testing"

func TestLinkBudgetRules(t *testing.T) {
	limit := func(n int) *int { return &n }
	for _, c := range []struct {
		name       string
		size       int64
		taken      int64
		limit      *int
		left       *int
		spent      bool
		budgetLeft int64
	}{
		{"no limit", 100, 500, nil, nil, false, 0},
		{"untouched", 100, 0, limit(2), limit(2), false, 200},
		{"a range taken", 100, 3, limit(2), limit(1), false, 197},
		{"a broken copy: no whole copy left, but a resume", 100, 150, limit(2), limit(0), false, 50},
		{"spent", 100, 200, limit(2), limit(0), true, 0},
		{"over (a lowered limit)", 100, 500, limit(2), limit(0), true, 0},
		{"empty file", 0, 1, limit(3), limit(2), false, 2},
		{"empty file spent", 0, 3, limit(3), limit(0), true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := File{Size: c.size, LinkTaken: c.taken}
			left := f.DownloadsLeft(c.limit)
			if (left == nil) != (c.left == nil) || (left != nil && *left != *c.left) {
				t.Errorf("DownloadsLeft = %v, want %v", deref(left), deref(c.left))
			}
			if f.BudgetSpent(c.limit) != c.spent {
				t.Errorf("BudgetSpent = %v", !c.spent)
			}
			if b, _ := f.BudgetLeft(c.limit); b != c.budgetLeft {
				t.Errorf("BudgetLeft = %d, want %d", b, c.budgetLeft)
			}
		})
	}
}

func deref(n *int) any {
	if n == nil {
		return nil
	}
	return *n
}

func TestAnswerCostAndGiveBack(t *testing.T) {
	for _, c := range []struct {
		name string
		size int64
		span Span
		sent Sent
		cost int64
		back int64
	}{
		{"whole file sent whole", 100, Span{Length: 100}, Sent{Bytes: 100, Whole: true}, 100, 0},
		{"whole file cut at 40", 100, Span{Length: 100}, Sent{Bytes: 40}, 100, 60},
		{"a 304 sends nothing", 100, Span{Length: 100}, Sent{}, 100, 100},
		{"a range", 100, Span{Start: 90, Length: 10, Partial: true}, Sent{Bytes: 10, Whole: true}, 10, 0},
		{"a suffix of the whole file", 100, Span{Length: 100, Partial: true}, Sent{Bytes: 100, Whole: true}, 100, 0},
		{"HEAD", 100, Span{Length: 100, Bodiless: true}, Sent{}, 0, 0},
		{"empty file", 0, Span{}, Sent{Whole: true}, 1, 0},
		{"empty file not sent", 0, Span{}, Sent{}, 1, 1},
		{"more written than taken (headers)", 100, Span{Length: 10, Partial: true}, Sent{Bytes: 50}, 10, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cost := AnswerCost(c.size, c.span)
			if cost != c.cost {
				t.Fatalf("AnswerCost = %d, want %d", cost, c.cost)
			}
			if back := GiveBack(cost, c.sent); back != c.back {
				t.Fatalf("GiveBack = %d, want %d", back, c.back)
			}
		})
	}
}

// TestBudgetAgainstEveryTrick plays the games against the rules alone: with
// max_downloads = N, however answers are combined, the bytes that go out never add up
// to more than N copies, and a broken download can still be resumed.
func TestBudgetAgainstEveryTrick(t *testing.T) {
	const size = 100_000
	n := 1
	f := File{Size: size}
	var out int64 // bytes that went out
	take := func(span Span) bool {
		cost := AnswerCost(size, span)
		left, _ := f.BudgetLeft(&n)
		if left == 0 || cost > left {
			return false
		}
		f.LinkTaken += cost
		return true
	}
	// A suffix range of the whole file four times, then a plain GET: one copy.
	got := 0
	for range 4 {
		if take(Span{Start: 0, Length: size, Partial: true}) {
			got++
			out += size
		}
	}
	if take(WholeFile(f)) {
		got++
	}
	if got != 1 || out != size {
		t.Fatalf("%d answers, %d bytes out, want 1 and one copy", got, out)
	}
	// Broken after 40 %, then resumed: the two halves make one copy.
	f, out = File{Size: size}, 0
	if !take(WholeFile(f)) {
		t.Fatal("first GET refused")
	}
	out += 40_000
	f.LinkTaken -= GiveBack(size, Sent{Bytes: 40_000})
	if !take(Span{Start: 40_000, Length: 60_000, Partial: true}) {
		t.Fatal("the resume was refused")
	}
	out += 60_000
	if take(Span{Start: 0, Length: 1, Partial: true}) || out != size {
		t.Fatalf("a byte more after a whole copy: taken %d, out %d", f.LinkTaken, out)
	}
}
