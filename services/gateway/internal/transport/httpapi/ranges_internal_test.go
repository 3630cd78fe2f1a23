package httpapi

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

func TestLinkSpan(t *testing.T) {
	created := time.Date(2026, 11, 20, 10, 0, 0, 500, time.UTC)
	f := app.File{Size: 100_000, SHA256: "abc", CreatedAt: created}
	whole := app.Span{Length: 100_000}
	part := func(start, n int64) app.Span { return app.Span{Start: start, Length: n, Partial: true} }
	const unsatisfiable = -1
	for _, c := range []struct {
		name, rng, ifRange string
		want               app.Span
		status             int
	}{
		{"no range", "", "", whole, 0},
		{"a-b", "bytes=10-19", "", part(10, 10), 0},
		{"a-", "bytes=99990-", "", part(99_990, 10), 0},
		{"-n", "bytes=-10", "", part(99_990, 10), 0},
		{"a suffix past the size is the whole file, as one range", "bytes=-999999999", "", part(0, 100_000), 0},
		{"leading zeros", "bytes=00-", "", part(0, 100_000), 0},
		{"leading zeros of both ends", "bytes=0010-0019", "", part(10, 10), 0},
		{"an end past the size", "bytes=99999-200000", "", part(99_999, 1), 0},
		{"a huge end", "bytes=5-99999999999999999999999", "", part(5, 99_995), 0},
		{"spaces", "bytes = 1 - 2", "", part(1, 2), 0},
		{"unit in capitals", "BYTES=1-2", "", part(1, 2), 0},
		{"several ranges: the whole file", "bytes=1-,0-", "", whole, 0},
		{"several equal ranges: the whole file", "bytes=0-0,0-0", "", whole, 0},
		{"a trailing comma is one range", "bytes=1-2,", "", part(1, 2), 0},
		{"another unit: ignored", "items=0-5", "", whole, 0},
		{"garbage: ignored", "bytes=abc", "", whole, 0},
		{"end before start: ignored", "bytes=5-2", "", whole, 0},
		{"no dash: ignored", "bytes=5", "", whole, 0},
		{"negative: ignored", "bytes=--5", "", whole, 0},
		{"start past the end", "bytes=100000-", "", app.Span{}, unsatisfiable},
		{"huge start", "bytes=99999999999999999999999-", "", app.Span{}, unsatisfiable},
		{"empty suffix", "bytes=-0", "", app.Span{}, unsatisfiable},
		{"If-Range with the ETag", "bytes=10-19", `"abc"`, part(10, 10), 0},
		{"If-Range with another ETag", "bytes=10-19", `"other"`, whole, 0},
		{"If-Range with a weak ETag", "bytes=10-19", `W/"abc"`, whole, 0},
		{"If-Range with the date", "bytes=10-19", created.Format(http.TimeFormat), part(10, 10), 0},
		{"If-Range with another date", "bytes=10-19", created.Add(time.Hour).Format(http.TimeFormat), whole, 0},
		{"If-Range with garbage", "bytes=10-19", "yesterday", whole, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := http.NewRequest("GET", "/", nil)
			if c.rng != "" {
				r.Header.Set("Range", c.rng)
			}
			if c.ifRange != "" {
				r.Header.Set("If-Range", c.ifRange)
			}
			got, err := linkSpan(r, f)
			var rne *app.RangeNotSatisfiableError
			if c.status == unsatisfiable {
				if !errors.As(err, &rne) || rne.Size != f.Size {
					t.Fatalf("linkSpan = %+v, %v; want 416", got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("linkSpan = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
	// An empty file satisfies no range.
	r, _ := http.NewRequest("GET", "/", nil)
	r.Header.Set("Range", "bytes=0-")
	if _, err := linkSpan(r, app.File{}); err == nil {
		t.Fatal("a range of an empty file was satisfied")
	}
}
