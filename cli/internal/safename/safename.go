// Package safename turns the file names a server or an uploader chose into names that
// are safe to create in a download directory, on Linux, macOS and Windows alike.
//
// The rule (For), applied in this order:
//
//   - bytes that are not UTF-8, control characters (Unicode Cc), format characters (Cf:
//     bidi overrides, zero-width characters), line and paragraph separators, path
//     separators ('/' and '\') and the characters Windows refuses in names
//     (':', '*', '?', '"', '<', '>', '|') each become '_';
//   - a name longer than MaxBytes is shortened, keeping its extension;
//   - a leading '.' becomes '_' (".bashrc" → "_bashrc": no hidden files, no "." or "..");
//   - trailing dots and spaces each become '_' (Windows drops them silently);
//   - a name whose part before its first dot is a Windows device name (CON, PRN, AUX, NUL,
//     COM0-COM9, LPT0-LPT9, also with superscript digits; any case; trailing spaces
//     ignored) gets a '_' in front ("CON.txt" → "_CON.txt");
//   - an empty name becomes "_".
//
// For is a pure function; Set makes the names of one download unique.
package safename

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxBytes is the longest name For returns, in bytes: room for a ".part" or a " (N)"
// suffix within the 255 bytes most file systems allow.
const MaxBytes = 200

// For returns the safe form of name (the rule is in the package's doc). A name that is
// safe already comes back unchanged.
func For(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError && size <= 1 || unsafeRune(r) {
			b.WriteByte('_')
		} else {
			b.WriteString(name[i : i+size])
		}
		i += size
	}
	s := shorten(b.String())
	if strings.HasPrefix(s, ".") {
		s = "_" + s[1:]
	}
	if t := strings.TrimRight(s, ". "); len(t) < len(s) {
		s = t + strings.Repeat("_", len(s)-len(t))
	}
	if reserved(s) {
		s = "_" + s
	}
	if s == "" {
		return "_"
	}
	return s
}

// unsafeRune says r is replaced wherever it is in a name.
func unsafeRune(r rune) bool {
	switch r {
	case '/', '\\', ':', '*', '?', '"', '<', '>', '|', '\u2028', '\u2029':
		return true
	}
	return unicode.In(r, unicode.Cc, unicode.Cf)
}

// devices are the names Windows keeps for devices, whatever the extension.
var devices = map[string]bool{"CON": true, "PRN": true, "AUX": true, "NUL": true, "CONIN$": true, "CONOUT$": true}

func init() {
	for _, d := range []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "¹", "²", "³"} {
		devices["COM"+d] = true
		devices["LPT"+d] = true
	}
}

// reserved says name is a Windows device name, with or without an extension.
func reserved(name string) bool {
	stem, _, _ := strings.Cut(name, ".")
	return devices[strings.ToUpper(strings.TrimRight(stem, " "))]
}

// shorten cuts s to at most MaxBytes, keeping an extension of up to 20 bytes.
func shorten(s string) string {
	if len(s) <= MaxBytes {
		return s
	}
	ext := extension(s)
	if len(ext) > 20 {
		ext = ""
	}
	return cut(strings.TrimSuffix(s, ext), MaxBytes-len(ext)) + ext
}

// cut returns the longest prefix of s of at most n bytes that ends on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Set hands out the names of one download directory: each different, also when
// compared without case (macOS and Windows file systems ignore it).
type Set struct {
	used map[string]bool
}

// Name returns the safe form of name, with " (2)", " (3)"… before its extension when a
// name handed out before by s is the same but for case.
func (s *Set) Name(name string) string {
	if s.used == nil {
		s.used = map[string]bool{}
	}
	name = For(name)
	ext := extension(name)
	stem := strings.TrimSuffix(name, ext)
	out := name
	for i := 2; s.used[fold(out)]; i++ {
		suffix := " (" + strconv.Itoa(i) + ")"
		out = cut(stem, MaxBytes-len(suffix)-len(ext)) + suffix + ext
	}
	s.used[fold(out)] = true
	return out
}

// extension is name's extension: from its last dot, "" when it has none (or only a
// leading one).
func extension(name string) string {
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		return name[i:]
	}
	return ""
}

func fold(s string) string { return strings.ToLower(s) }
