package safename

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFor(t *testing.T) {
	long := strings.Repeat("a", 300)
	tests := []struct {
		name, in, want string
	}{
		{"an ordinary name is kept", "report 2026.pdf", "report 2026.pdf"},
		{"non-ASCII letters are kept", "Übersicht – café.txt", "Übersicht – café.txt"},
		{"a dotfile loses its dot", ".bashrc", "_bashrc"},
		{"a dotted alias file", ".bash_aliases", "_bash_aliases"},
		{"dot", ".", "_"},
		{"dot dot", "..", "__"},
		{"empty", "", "_"},
		{"slash", "../../.ssh/authorized_keys", "_._.._.ssh_authorized_keys"},
		{"absolute path", "/etc/passwd", "_etc_passwd"},
		{"backslash", `..\..\evil.bat`, `_._.._evil.bat`},
		{"colon", "a:b.txt", "a_b.txt"},
		{"NTFS stream", "file.txt::$DATA", "file.txt__$DATA"},
		{"windows-invalid characters", `a*b?c"d<e>f|g`, "a_b_c_d_e_f_g"},
		{"trailing dot", "notes.", "notes_"},
		{"trailing spaces and dots", "notes. .", "notes___"},
		{"CON", "CON", "_CON"},
		{"con in lower case with an extension", "con.txt", "_con.txt"},
		{"NUL with two extensions", "NUL.tar.gz", "_NUL.tar.gz"},
		{"PRN", "Prn.log", "_Prn.log"},
		{"AUX", "aux", "_aux"},
		{"COM1", "COM1.exe", "_COM1.exe"},
		{"LPT9", "lpt9", "_lpt9"},
		{"COM superscript", "COM¹.txt", "_COM¹.txt"},
		{"a device name with trailing spaces before the extension", "CON .txt", "_CON .txt"},
		{"a device name with a trailing dot", "CON.", "CON_"},
		{"CONSOLE is not a device", "CONSOLE.txt", "CONSOLE.txt"},
		{"COM10 is not a device", "COM10", "COM10"},
		{"a device name later in the name is fine", "my.CON", "my.CON"},
		{"escape sequences", "a\x1b[31mred\x1b[0m.txt", "a_[31mred_[0m.txt"},
		{"newline and tab", "a\nb\tc", "a_b_c"},
		{"NUL byte", "a\x00b", "a_b"},
		{"DEL and C1 controls", "a\x7fb\u0085c\u009bd", "a_b_c_d"},
		{"right-to-left override", "invoice\u202Efdp.exe", "invoice_fdp.exe"},
		{"bidi isolate", "a\u2066b\u2069", "a_b_"},
		{"zero-width joiner and BOM", "a\u200db\ufeff", "a_b_"},
		{"line separator", "a\u2028b", "a_b"},
		{"not UTF-8", "a\xffb.txt", "a_b.txt"},
		{"a replaced leading control char is not a dot", "\x1b.bashrc", "_.bashrc"},
		{"a long name keeps its extension", long + ".pdf", strings.Repeat("a", MaxBytes-4) + ".pdf"},
		{"a long name without extension", long, strings.Repeat("a", MaxBytes)},
		{"a long name is cut on a rune boundary", strings.Repeat("é", 150), strings.Repeat("é", MaxBytes/2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := For(tt.in)
			if got != tt.want {
				t.Errorf("For(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if For(got) != got {
				t.Errorf("For(%q) = %q is not safe by its own rule: For gives %q", tt.in, got, For(got))
			}
			if len(got) > MaxBytes || !utf8.ValidString(got) {
				t.Errorf("For(%q) = %q: %d bytes, valid UTF-8 %v", tt.in, got, len(got), utf8.ValidString(got))
			}
		})
	}
}

func TestSet(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"different names stay", []string{"a.txt", "b.txt"}, []string{"a.txt", "b.txt"}},
		{"two names that map to one", []string{"a:b.txt", "a_b.txt", "a|b.txt"}, []string{"a_b.txt", "a_b (2).txt", "a_b (3).txt"}},
		{"a dotfile and its safe form", []string{".bashrc", "_bashrc"}, []string{"_bashrc", "_bashrc (2)"}},
		{"names that differ only by case", []string{"Report.PDF", "report.pdf"}, []string{"Report.PDF", "report (2).pdf"}},
		{"the same name twice", []string{"x", "x", "x (2)"}, []string{"x", "x (2)", "x (2) (2)"}},
		{"a suffix fits in a long name", []string{strings.Repeat("b", 300) + ".txt", strings.Repeat("b", 300) + ".txt"},
			[]string{strings.Repeat("b", MaxBytes-4) + ".txt", strings.Repeat("b", MaxBytes-8) + " (2).txt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Set
			for i, in := range tt.in {
				if got := s.Name(in); got != tt.want[i] {
					t.Errorf("name %d: Name(%q) = %q, want %q", i, in, got, tt.want[i])
				}
			}
		})
	}
}
