// Package qrcode draws a text (a link) as a QR code: SVG for web pages and
// half-block characters for terminals. Nothing is logged or kept: the text of a
// link is a secret.
package qrcode

import (
	"fmt"
	"strings"

	qr "github.com/skip2/go-qrcode"
)

// Matrix is the QR code of text at error correction level M, quiet zone (four
// modules) included: Matrix[y][x] is true for a dark module.
func Matrix(text string) ([][]bool, error) {
	q, err := qr.New(text, qr.Medium)
	if err != nil {
		return nil, fmt.Errorf("qrcode: %w", err)
	}
	return q.Bitmap(), nil
}

// SVG is the QR code of text as an inline <svg> element, one module a unit of its
// viewBox, dark modules drawn as one path on a white background. The element
// carries the class "qr" and the accessible label given.
func SVG(text, label string) (string, error) {
	m, err := Matrix(text)
	if err != nil {
		return "", err
	}
	n := len(m)
	var b strings.Builder
	b.Grow(n * n * 4)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="qr" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" shape-rendering="crispEdges">`,
		n, n, n*4, n*4, escapeAttr(label))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/><path fill="#000" d="`, n, n)
	for y, row := range m {
		for x := 0; x < len(row); {
			if !row[x] {
				x++
				continue
			}
			// One rectangle for each run of dark modules in a row.
			start := x
			for x < len(row) && row[x] {
				x++
			}
			fmt.Fprintf(&b, "M%d %dh%dv1h-%dz", start, y, x-start, x-start)
		}
	}
	b.WriteString(`"/></svg>`)
	return b.String(), nil
}

// Terminal is the QR code of text in half-block characters, two rows of modules a
// line, drawn dark on light whatever the terminal's colours: a dark module is a
// space, a light one a block, so the code reads on a dark background, where most
// terminals are. Every line ends with a newline.
func Terminal(text string) (string, error) {
	m, err := Matrix(text)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for y := 0; y < len(m); y += 2 {
		for x := range m[y] {
			top := m[y][x]
			bottom := y+1 < len(m) && m[y+1][x]
			if y+1 >= len(m) {
				bottom = true // below the code: the terminal's own background
			}
			switch {
			case !top && !bottom:
				b.WriteString("█")
			case !top && bottom:
				b.WriteString("▀")
			case top && !bottom:
				b.WriteString("▄")
			default:
				b.WriteString(" ")
			}
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

func escapeAttr(s string) string {
	return strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;", `"`, "&quot;", `'`, "&#39;").Replace(s)
}
