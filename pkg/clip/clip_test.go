package clip_test

import (
	"testing"
	"unicode/utf8"

	"github.com/shipfile/shipfile/pkg/clip"
)

func TestBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, s string
		n       int
		want    string
		marked  string
	}{
		{"short", "short", 10, "short", "short"},
		{"exact", "exact", 5, "exact", "exact"},
		{"ascii", "abcdef", 3, "abc", "abc…"},
		{"inside a character", "aé", 2, "a", "a…"}, // é is two bytes
		{"between characters", "éé", 2, "é", "é…"},
		{"inside the first", "€uro", 2, "", "…"}, // € is three bytes
		{"zero", "abc", 0, "", "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := clip.Bytes(tt.s, tt.n)
			if got != tt.want || !utf8.ValidString(got) {
				t.Errorf("Bytes(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
			}
			if m := clip.Marked(tt.s, tt.n); m != tt.marked {
				t.Errorf("Marked(%q, %d) = %q, want %q", tt.s, tt.n, m, tt.marked)
			}
		})
	}
}
