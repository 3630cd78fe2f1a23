package packages

import (
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

func TestEditRules(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		at time.Time
		ok bool
	}{
		{now.Add(time.Minute), true},
		{now.Add(MaxExpiryAhead), true},
		{now, false},
		{now.Add(-time.Hour), false},
		{now.Add(MaxExpiryAhead + time.Second), false},
	} {
		if err := ValidateExpiry(c.at, now); (err == nil) != c.ok {
			t.Errorf("ValidateExpiry(%v) = %v", c.at, err)
		}
	}
	for _, c := range []struct {
		pw string
		ok bool
	}{{"1234567", false}, {"12345678", true}, {strings.Repeat("é", 128), true}, {strings.Repeat("p", 129), false}} {
		if err := ValidateLinkPassword(c.pw); (err == nil) != c.ok {
			t.Errorf("ValidateLinkPassword(%d runes) = %v", len([]rune(c.pw)), err)
		}
	}
	for _, c := range []struct {
		n  *int
		ok bool
	}{{nil, true}, {new(1), true}, {new(10000), true}, {new(0), false}, {new(10001), false}} {
		if err := ValidateMaxDownloads(c.n); (err == nil) != c.ok {
			t.Errorf("ValidateMaxDownloads(%v) = %v", c.n, err)
		}
	}
	if err := (&app.Package{State: app.StateRevoked, ExpiresAt: now.Add(time.Hour)}).Apply(app.OpEdit, now); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("edit of a revoked package: %v", err)
	}
	if err := (&app.Package{State: app.StateActive, ExpiresAt: now.Add(-time.Second)}).Apply(app.OpEdit, now); err == nil {
		t.Error("edit of an overdue package allowed")
	}
}
