// Package printable makes text from a server (titles, notes, file names, error details)
// safe to write to a terminal: control characters (ESC and the rest of Unicode Cc),
// format characters (Cf: bidi overrides, zero-width characters), line and paragraph
// separators and bytes that are not UTF-8 are written as Go escapes (\x1b, \u202e, \n),
// so that no escape sequence reaches the terminal and no text is reordered; everything
// else, non-ASCII letters included, is kept as it is.
package printable

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with its unsafe characters escaped (the package's doc says which). A
// backslash is doubled only where s needs escaping at all, so that the escapes cannot be
// forged; text with nothing to escape comes back unchanged.
func String(s string) string {
	if Safe(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case r == '\\':
			b.WriteString(`\\`)
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r) // e.g. '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Safe says s can be written to a terminal as it is.
func Safe(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 || unsafeRune(r) {
			return false
		}
		i += size
	}
	return true
}

func unsafeRune(r rune) bool {
	return r == '\u2028' || r == '\u2029' || unicode.In(r, unicode.Cc, unicode.Cf)
}
