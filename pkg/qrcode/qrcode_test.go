package qrcode_test

import (
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/qrcode"
	"github.com/shipfile/shipfile/pkg/qrcode/qrtest"
)

const link = "https://files.example.com/l/Yh3kN0pQ7sVbX2cWmZ4rT9uE1aL6dF8gJ5oI"

func TestSVGDecodesToTheText(t *testing.T) {
	for name, text := range map[string]string{
		"link":       link,
		"short":      "https://x.test/l/a",
		"long query": link + "?p=" + strings.Repeat("q", 300),
	} {
		t.Run(name, func(t *testing.T) {
			svg, err := qrcode.SVG(text, `QR code of the "link"`)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(svg, "<svg ") || !strings.HasSuffix(svg, "</svg>") {
				t.Fatalf("not one svg element: %.80s", svg)
			}
			if strings.Contains(svg, text) {
				t.Fatal("the SVG carries the text in the clear")
			}
			if !strings.Contains(svg, `aria-label="QR code of the &quot;link&quot;"`) {
				t.Fatalf("label not escaped: %.300s", svg)
			}
			if got, err := qrtest.DecodeSVG(svg); err != nil || got != text {
				t.Fatalf("decoded %q, %v; want %q", got, err, text)
			}
		})
	}
}

func TestTerminalDecodesToTheText(t *testing.T) {
	out, err := qrcode.Terminal(link)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := qrcode.Matrix(link)
	if lines := strings.Count(out, "\n"); lines != (len(want)+1)/2 {
		t.Fatalf("%d lines for %d rows of modules", lines, len(want))
	}
	m, err := qrtest.TerminalModules(out)
	if err != nil {
		t.Fatal(err)
	}
	for y := range want {
		for x := range want[y] {
			if m[y][x] != want[y][x] {
				t.Fatalf("module %d,%d differs", x, y)
			}
		}
	}
	if got, err := qrtest.DecodeTerminal("before\n" + out + "after\n"); err != nil || got != link {
		t.Fatalf("decoded %q, %v", got, err)
	}
}

func TestTooLong(t *testing.T) {
	if _, err := qrcode.SVG(strings.Repeat("x", 5000), "qr"); err == nil {
		t.Fatal("a text past a QR code's capacity was drawn")
	}
}
