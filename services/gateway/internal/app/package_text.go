package app

import (
	"strings"
	"unicode/utf8"
)

// The texts of a package are checked by these rules on create and on every edit
// (docs/API.md, "Hostile clients": an edit refuses what create refuses).

// ValidateTitle accepts a package title: 1 to MaxTitleLen characters of valid
// UTF-8, not blank, without control characters or Unicode format characters.
func ValidateTitle(t string) error {
	if n := utf8.RuneCountInString(t); strings.TrimSpace(t) == "" || n > MaxTitleLen || !utf8.ValidString(t) || strings.ContainsFunc(t, isHiddenRune) {
		return Invalid("title must be 1 to %d characters without control or format characters", MaxTitleLen)
	}
	return nil
}

// ValidateRecipientName accepts a recipient's name: at most MaxRecipientLen
// characters of valid UTF-8, without control characters or bidi overrides.
// (Other format characters stay allowed: names in some scripts need the
// zero-width joiners.)
func ValidateRecipientName(n string) error {
	if utf8.RuneCountInString(n) > MaxRecipientLen || !utf8.ValidString(n) || strings.ContainsFunc(n, isNameHidden) {
		return Invalid("recipient_name must be at most %d characters without control characters or bidi overrides", MaxRecipientLen)
	}
	return nil
}

// ValidateNote accepts a note: at most MaxNoteLen characters of valid UTF-8, lines
// and tabs allowed, no other control characters and no bidi overrides.
func ValidateNote(n string) error {
	if utf8.RuneCountInString(n) > MaxNoteLen || !utf8.ValidString(n) || HasHiddenText(n) {
		return Invalid("note must be at most %d characters without control characters or bidi overrides", MaxNoteLen)
	}
	return nil
}

// HasHiddenText reports whether a free text (a note, a hold's reason) holds what it
// may not: a control character other than a line break or a tab, or a bidi override.
func HasHiddenText(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return IsNoteControl(r) || isBidiOverride(r) })
}

// isNameHidden reports the characters a name may not hold: every control character
// (C0 and C1) and the bidi overrides.
func isNameHidden(r rune) bool { return IsControl(r) || (r >= 0x80 && r <= 0x9f) || isBidiOverride(r) }

// isBidiOverride reports the Unicode bidi embeddings, overrides and isolates
// (U+202A–U+202E, U+2066–U+2069) and the bidi marks (U+200E, U+200F, U+061C), which
// make a text display as something other than what it is.
func isBidiOverride(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
}
