package commands

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/shipfile/shipfile/cli/internal/progress"
	"github.com/shipfile/shipfile/cli/internal/ptytest"
)

// TestProgressKind: bars when standard error is a terminal (also under --json, whose
// document goes to standard output), plain lines when it is not, nothing under --quiet or
// under --json off a terminal.
func TestProgressKind(t *testing.T) {
	tty, _ := ptytest.Open(t, 100, 40)
	file, err := os.Create(filepath.Join(t.TempDir(), "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var buf bytes.Buffer
	for _, tc := range []struct {
		name        string
		err         any
		json, quiet bool
		want        any
	}{
		{"terminal", tty, false, false, progress.Bars{}},
		{"terminal, --json", tty, true, false, progress.Bars{}},
		{"terminal, --quiet", tty, false, true, progress.None{}},
		{"file", file, false, false, progress.Lines{}},
		{"pipe", &buf, false, false, progress.Lines{}},
		{"file, --json", file, true, false, progress.None{}},
		{"file, --quiet", file, false, true, progress.None{}},
	} {
		w, _ := tc.err.(interface{ Write([]byte) (int, error) })
		a := &app{io: IO{Err: w}, json: tc.json, quiet: tc.quiet}
		got := a.progress()
		var ok bool
		switch tc.want.(type) {
		case progress.Bars:
			_, ok = got.(progress.Bars)
		case progress.Lines:
			_, ok = got.(progress.Lines)
		case progress.None:
			_, ok = got.(progress.None)
		}
		if !ok {
			t.Errorf("%s: progress is %T, want %T", tc.name, got, tc.want)
		}
	}
}
