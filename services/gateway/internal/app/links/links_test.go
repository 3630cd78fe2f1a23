package links

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

func TestGrant(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	p := app.Package{ID: uuid.New(), LinkHash: []byte("hash-of-link"), PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$a2V5"}
	grant, exp := NewGrant(p, now)
	if exp != now.Add(GrantLifetime) {
		t.Fatalf("expires %v", exp)
	}
	other := p
	other.ID = uuid.New()
	newPassword := p
	newPassword.PasswordHash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdDI$a2V5Mg"
	noPassword := p
	noPassword.PasswordHash = ""
	for _, c := range []struct {
		name  string
		p     app.Package
		grant string
		at    time.Time
		want  bool
	}{
		{"valid", p, grant, now.Add(time.Hour), true},
		{"expired", p, grant, exp, false},
		{"another link", other, grant, now, false},
		{"new password", newPassword, grant, now, false},
		{"password removed", noPassword, grant, now, false},
		{"empty", p, "", now, false},
		{"mangled", p, mangle(grant, len(grant)-10, flipBits(grant[len(grant)-10], 0b100000)), now, false},
		{"same MAC, other padding bits", p, mangle(grant, len(grant)-1, flipBits(grant[len(grant)-1], 0b1)), now, false},
		{"later expiry", p, strings.Replace(grant, ".", ".9", 1), now, false},
		{"not a grant", p, "v1.x.y", now, false},
	} {
		if got := CheckGrant(c.p, c.grant, c.at); got != c.want {
			t.Errorf("%s: CheckGrant = %v, want %v", c.name, got, c.want)
		}
	}
}

// mangle replaces grant's character at i with c.
func mangle(grant string, i int, c byte) string { return grant[:i] + string(c) + grant[i+1:] }

// flipBits gives the base64url character whose 6-bit value is c's with mask flipped.
func flipBits(c byte, mask int) byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	return alphabet[strings.IndexByte(alphabet, c)^mask]
}

func TestUnlockRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ago := func(d ...time.Duration) []time.Time {
		var out []time.Time
		for _, x := range d {
			out = append(out, now.Add(-x))
		}
		return out
	}
	m := time.Minute
	for _, c := range []struct {
		name    string
		earlier []time.Time
		want    time.Duration
		limited bool
	}{
		{"none", nil, 0, false},
		{"four", ago(1*m, 2*m, 3*m, 4*m), 0, false},
		{"five", ago(1*m, 2*m, 3*m, 4*m, 5*m), 10 * m, true},
		{"six: the fifth newest decides", ago(1*m, 2*m, 3*m, 4*m, 6*m, 14*m), 9 * m, true},
		{"one out of the window", ago(1*m, 2*m, 3*m, 4*m, 15*m), 0, false},
	} {
		got, limited := UnlockRetryAfter(c.earlier, now)
		if got != c.want || limited != c.limited {
			t.Errorf("%s: %v %v, want %v %v", c.name, got, limited, c.want, c.limited)
		}
	}
}
