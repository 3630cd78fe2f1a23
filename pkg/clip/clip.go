// Package clip shortens text to a length limit in bytes without cutting a character in
// two, so that what it keeps is still valid UTF-8 (PostgreSQL text refuses anything
// else).
package clip

// Bytes returns s when it has at most n bytes, else its longest start of at most n
// bytes that ends between two characters.
func Bytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && s[cut]&0xC0 == 0x80 { // a continuation byte: inside a character
		cut--
	}
	return s[:cut]
}

// Marked is Bytes followed by "…" when s was shortened.
func Marked(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Bytes(s, n) + "…"
}
