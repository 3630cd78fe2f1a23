package audit

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestCanonicalMatchesPostgreSQL: an entry PostgreSQL chained (audit_canonical and
// audit_hash of migration 00033) has the same canonical bytes and hash in Go.
func TestCanonicalMatchesPostgreSQL(t *testing.T) {
	at, _ := time.Parse(TimeLayout, "2026-11-28T22:46:35.932632Z")
	e := Entry{Seq: 1, CreatedAt: at.In(time.FixedZone("x", 3600)), Actor: "system", Action: "x", IP: "1.2.3.4",
		Detail: "a\"b\\c\n\t\x01é<>&"}
	want := `{"seq":1,"created_at":"2026-11-28T22:46:35.932632Z","actor":"system","actor_user_id":null,"action":"x","package_id":null,"file_id":null,"recipient_id":null,"ip":"1.2.3.4","user_agent":"","detail":"a\"b\\c\n\t\u0001é<>&"}`
	if got := string(Canonical(e)); got != want {
		t.Fatalf("canonical:\n got %s\nwant %s", got, want)
	}
	if got := Hash(e, GenesisHash); got != "2b781d3f83e943f0a7763e322a60e74b2f51fe64223cbefcfcefcc929f39bd45" {
		t.Fatalf("hash = %s", got)
	}
}

func TestCanonicalFields(t *testing.T) {
	uid := int64(42)
	pkg := uuid.MustParse("0190c0de-0000-7000-8000-000000000001")
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	cases := []struct {
		name string
		e    Entry
		want string
	}{
		{"ids set", Entry{Seq: 7, CreatedAt: at, Actor: "user", ActorUserID: &uid, Action: "package.create", PackageID: &pkg, FileID: &pkg, RecipientID: &pkg},
			`{"seq":7,"created_at":"2026-01-02T03:04:05.000006Z","actor":"user","actor_user_id":42,"action":"package.create","package_id":"0190c0de-0000-7000-8000-000000000001","file_id":"0190c0de-0000-7000-8000-000000000001","recipient_id":"0190c0de-0000-7000-8000-000000000001","ip":"","user_agent":"","detail":""}`},
		{"nanoseconds truncated", Entry{Seq: 1, CreatedAt: at.Add(999)},
			`{"seq":1,"created_at":"2026-01-02T03:04:05.000006Z","actor":"","actor_user_id":null,"action":"","package_id":null,"file_id":null,"recipient_id":null,"ip":"","user_agent":"","detail":""}`},
		{"control characters", Entry{Seq: 1, CreatedAt: at, Detail: "\b\f\r\x1f\x7f\u2028"},
			`{"seq":1,"created_at":"2026-01-02T03:04:05.000006Z","actor":"","actor_user_id":null,"action":"","package_id":null,"file_id":null,"recipient_id":null,"ip":"","user_agent":"","detail":"\b\f\r\u001f` + "\x7f\u2028" + `"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := string(Canonical(c.e)); got != c.want {
				t.Fatalf("\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

// chain links n entries from the genesis.
func chain(n int) []Entry {
	es := make([]Entry, n)
	prev := GenesisHash
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range es {
		uid := int64(i)
		es[i] = Entry{Seq: int64(i + 1), CreatedAt: at.Add(time.Duration(i) * time.Second), Actor: "user", ActorUserID: &uid,
			Action: "package.create", Detail: fmt.Sprintf("entry %d, \"quoted\"\n", i), PrevHash: prev}
		es[i].Hash = Hash(es[i], prev)
		prev = es[i].Hash
	}
	return es
}

func verify(es []Entry, headSeq int64, headHash string) *Break {
	v := NewVerifier(0, GenesisHash)
	for _, e := range es {
		if b := v.Add(e); b != nil {
			return b
		}
	}
	return v.End(headSeq, headHash)
}

func TestVerifier(t *testing.T) {
	whole := chain(6)
	head := whole[5]
	cases := []struct {
		name string
		edit func([]Entry) []Entry
		want *Break
	}{
		{"whole", func(es []Entry) []Entry { return es }, nil},
		{"content changed", func(es []Entry) []Entry { es[2].Detail = "other"; return es }, &Break{Seq: 3, Kind: Changed}},
		{"changed with its hash recomputed", func(es []Entry) []Entry {
			es[2].Detail = "other"
			es[2].Hash = Hash(es[2], es[2].PrevHash)
			return es
		}, &Break{Seq: 3, Kind: Changed}},
		{"deleted", func(es []Entry) []Entry { return append(es[:3:3], es[4:]...) }, &Break{Seq: 4, Kind: Deleted}},
		{"last deleted", func(es []Entry) []Entry { return es[:5] }, &Break{Seq: 6, Kind: Deleted}},
		{"swapped seqs", func(es []Entry) []Entry {
			es[1].Seq, es[2].Seq = es[2].Seq, es[1].Seq
			es[1], es[2] = es[2], es[1]
			return es
		}, &Break{Seq: 2, Kind: Changed}},
		{"swapped lines", func(es []Entry) []Entry { es[1], es[2] = es[2], es[1]; return es }, &Break{Seq: 2, Kind: Deleted}},
		{"repeated", func(es []Entry) []Entry { return append(es[:3:3], es[2:]...) }, &Break{Seq: 3, Kind: Reordered}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			es := c.edit(append([]Entry(nil), whole...))
			got := verify(es, head.Seq, head.Hash)
			if (got == nil) != (c.want == nil) || got != nil && (got.Seq != c.want.Seq || got.Kind != c.want.Kind) {
				t.Fatalf("break = %v, want %v", got, c.want)
			}
		})
	}
}

// TestVerifierFromAnchor: what remains after the first entries were removed verifies
// from the anchor (the last removed entry's seq and hash), and not from the genesis.
func TestVerifierFromAnchor(t *testing.T) {
	es := chain(5)
	v := NewVerifier(es[1].Seq, es[1].Hash)
	for _, e := range es[2:] {
		if b := v.Add(e); b != nil {
			t.Fatalf("from the anchor: %v", b)
		}
	}
	if b := v.End(es[4].Seq, es[4].Hash); b != nil || v.Count() != 3 {
		t.Fatalf("end: %v, %d verified", b, v.Count())
	}
	if b := verify(es[2:], 5, es[4].Hash); b == nil || b.Seq != 1 || b.Kind != Deleted {
		t.Fatalf("from the genesis: %v, want entry 1 deleted", b)
	}
}

func TestExportRoundTrip(t *testing.T) {
	es := chain(50)
	for _, format := range []string{"jsonl", "csv"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			if format == "jsonl" {
				for _, e := range es[10:] {
					buf.Write(AppendJSONL(nil, e))
				}
			} else {
				writeCSV(&buf, es[10:])
			}
			n, b, err := VerifyExport(bytes.NewReader(buf.Bytes()))
			if err != nil || b != nil || n != 40 {
				t.Fatalf("whole export: %d entries, %v, %v", n, b, err)
			}
			changed := strings.Replace(buf.String(), "entry 20,", "entry 21,", 1)
			n, b, err = VerifyExport(strings.NewReader(changed))
			if err != nil || b == nil || b.Seq != 21 || b.Kind != Changed || n != 10 {
				t.Fatalf("one line changed: %d entries, %v, %v; want entry 21 changed after 10", n, b, err)
			}
		})
	}
}

func writeCSV(buf *bytes.Buffer, es []Entry) {
	w := csv.NewWriter(buf)
	_ = w.Write(CSVHeader)
	for _, e := range es {
		_ = w.Write(CSVRecord(e))
	}
	w.Flush()
}
