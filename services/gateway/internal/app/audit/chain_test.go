package audit

import (
	"context"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// pagedStore is a Store over entries in memory whose reader answers Entries as the
// database's does (the numbers after afterSeq up to uptoSeq and at most afterSeq+limit)
// and counts the pages read.
type pagedStore struct {
	entries  []Entry
	headHash string
	pages    int
}

func (s *pagedStore) ReadChain(_ context.Context, fn func(ChainReader) error) error { return fn(s) }

func (s *pagedStore) RecordAudit(context.Context, app.AuditEntry) error { return nil }

func (s *pagedStore) Head(context.Context) (int64, string, error) {
	return 3500, s.headHash, nil
}

func (s *pagedStore) Anchor(context.Context) (int64, string, error) { return 0, GenesisHash, nil }

func (s *pagedStore) Entries(_ context.Context, afterSeq, uptoSeq int64, limit int) ([]Entry, error) {
	s.pages++
	var out []Entry
	for _, e := range s.entries {
		if e.Seq > afterSeq && e.Seq <= min(uptoSeq, afterSeq+int64(limit)) && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *pagedStore) SeqRange(context.Context, time.Time, time.Time) (int64, int64, error) {
	return s.entries[0].Seq, s.entries[len(s.entries)-1].Seq, nil
}

// TestChainStepsOverEmptyPages: export and verification read the chain a page of
// numbers at a time and go on past a page with no entry (numbers deleted in the
// database), so an export still has every entry after it and verify names the first
// missing one, not the end of the chain.
func TestChainStepsOverEmptyPages(t *testing.T) {
	whole := chain(3500)
	gapped := append(append([]Entry(nil), whole[:1000]...), whole[2500:]...)
	for _, c := range []struct {
		name      string
		entries   []Entry
		exported  int
		wantBreak *Break
	}{
		{"whole", whole, 3500, nil},
		{"numbers 1001–2500 deleted", gapped, 2000, &Break{Seq: 1001, Kind: Deleted}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &pagedStore{entries: c.entries, headHash: whole[3499].Hash}
			var n int
			if err := NewChain(s).Export(context.Background(), time.Time{}, time.Time{}, func(Entry) error { n++; return nil }); err != nil {
				t.Fatal(err)
			}
			if n != c.exported || s.pages != 4 {
				t.Fatalf("exported %d entries in %d pages, want %d in 4", n, s.pages, c.exported)
			}
			res, err := NewChain(s).Verify(context.Background(), 0)
			if err != nil {
				t.Fatal(err)
			}
			if (res.Break == nil) != (c.wantBreak == nil) || res.Break != nil && (res.Break.Seq != c.wantBreak.Seq || res.Break.Kind != c.wantBreak.Kind) {
				t.Fatalf("verify: break %v, want %v", res.Break, c.wantBreak)
			}
		})
	}
}
