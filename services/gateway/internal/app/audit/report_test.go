package audit

import (
	"testing"
	"time"
)

func TestReportRange(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	cases := []struct {
		name             string
		from, to         time.Time
		wantFrom, wantTo time.Time
		wantErr          bool
	}{
		{"defaults", time.Time{}, time.Time{}, now.Add(-30 * day), now, false},
		{"from only", now.Add(-2 * day), time.Time{}, now.Add(-2 * day), now, false},
		{"to only", time.Time{}, now.Add(-day), now.Add(-31 * day), now.Add(-day), false},
		{"reversed", now, now.Add(-day), time.Time{}, time.Time{}, true},
		{"empty", now, now, time.Time{}, time.Time{}, true},
		{"too long", now.Add(-400 * day), now, time.Time{}, time.Time{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			from, to, err := ReportRange(c.from, c.to, now)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if !c.wantErr && (!from.Equal(c.wantFrom) || !to.Equal(c.wantTo)) {
				t.Fatalf("range %s – %s, want %s – %s", from, to, c.wantFrom, c.wantTo)
			}
		})
	}
}
