package printable

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain text is kept", "Tax papers 2026", "Tax papers 2026"},
		{"non-ASCII letters are kept", "Übersicht – café 日本", "Übersicht – café 日本"},
		{"a backslash alone is kept", `C:\files`, `C:\files`},
		{"ESC sequences", "\x1b[2J\x1b]0;pwned\x07title", `\x1b[2J\x1b]0;pwned\atitle`},
		{"newline, carriage return and tab", "a\nb\rc\td", `a\nb\rc\td`},
		{"a backslash beside an escape is doubled", "a\\x1b\x1b", `a\\x1b\x1b`},
		{"NUL and DEL", "a\x00b\x7f", `a\x00b\x7f`},
		{"C1 controls (CSI)", "a\u009b31m", `a\u009b31m`},
		{"right-to-left override", "invoice\u202Efdp.exe", `invoice\u202efdp.exe`},
		{"zero-width space and BOM", "a\u200bb\ufeff", `a\u200bb\ufeff`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"a byte that is not UTF-8", "a\xffb", `a\xffb`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := String(tt.in)
			if got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if strings.ContainsAny(got, "\x1b\x00\n\r\u009b\u202e") || !Safe(got) {
				t.Errorf("String(%q) = %q still holds an unsafe character", tt.in, got)
			}
			if Safe(tt.in) != (got == tt.in) {
				t.Errorf("Safe(%q) = %v, but String changed it: %v", tt.in, Safe(tt.in), got != tt.in)
			}
		})
	}
}
