package app

import (
	"net/mail"
	"strings"
)

// Limits shared by identity and packages.
const (
	MaxEmailLen    = 254
	MinPasswordLen = 10
	MaxPasswordLen = 1024
)

// IsControl reports a C0 control character or DEL.
func IsControl(r rune) bool { return r < 0x20 || r == 0x7f }

// NormalizeEmail checks that s is a bare e-mail address and returns it trimmed.
func NormalizeEmail(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > MaxEmailLen {
		return "", Invalid("email must be a valid address of at most %d characters", MaxEmailLen)
	}
	addr, err := mail.ParseAddress(s)
	if err != nil || addr.Address != s || addr.Name != "" {
		return "", Invalid("email must be a valid address")
	}
	return s, nil
}
