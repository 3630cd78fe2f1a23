package packages

import (
	"time"
	"unicode/utf8"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// What the owner sets of a link's protection (docs/API.md, "Protected links"): its password,
// its download limit, and the rules of an edit's new expiry.
const (
	MinLinkPasswordLen = 8
	MaxLinkPasswordLen = 128
	MinMaxDownloads    = 1
	MaxMaxDownloads    = 10000
	// MaxExpiryAhead bounds a new expires_at set by an edit.
	MaxExpiryAhead = 90 * 24 * time.Hour
)

// UseHasher makes the package service hash and check link passwords through h.
func (s *Packages) UseHasher(h app.PasswordHasher) { s.hasher = h }

// ValidateLinkPassword checks the length rule of a link password.
func ValidateLinkPassword(pw string) error {
	if n := utf8.RuneCountInString(pw); n < MinLinkPasswordLen || n > MaxLinkPasswordLen || !utf8.ValidString(pw) {
		return app.Invalid("password must be %d to %d characters", MinLinkPasswordLen, MaxLinkPasswordLen)
	}
	return nil
}

// ValidateMaxDownloads checks a download limit (nil: none).
func ValidateMaxDownloads(n *int) error {
	if n != nil && (*n < MinMaxDownloads || *n > MaxMaxDownloads) {
		return app.Invalid("max_downloads must be between %d and %d, or null", MinMaxDownloads, MaxMaxDownloads)
	}
	return nil
}

// ValidateExpiry checks a new expires_at: in the future, at most MaxExpiryAhead from now.
func ValidateExpiry(t, now time.Time) error {
	if !t.After(now) || t.After(now.Add(MaxExpiryAhead)) {
		return app.Invalid("expires_at must be in the future and at most 90 days from now")
	}
	return nil
}
