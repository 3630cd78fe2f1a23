// Package qrtest reads back the QR codes that package qrcode draws, with a real
// decoder (gozxing), for tests.
package qrtest

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"regexp"
	"strconv"
	"strings"

	"github.com/makiuchi-d/gozxing"
	gzqr "github.com/makiuchi-d/gozxing/qrcode"
)

// Decode reads the text of a QR code given as modules (m[y][x] true for dark),
// drawn 4 pixels a module.
func Decode(m [][]bool) (string, error) {
	if len(m) == 0 {
		return "", errors.New("qrtest: no modules")
	}
	const px = 4
	img := image.NewGray(image.Rect(0, 0, len(m[0])*px, len(m)*px))
	for y := range img.Rect.Dy() {
		for x := range img.Rect.Dx() {
			c := color.Gray{Y: 255}
			if x/px < len(m[y/px]) && m[y/px][x/px] {
				c = color.Gray{}
			}
			img.SetGray(x, y, c)
		}
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		return "", err
	}
	// The image is a perfect, upright code: read its modules straight off the grid
	// rather than searching for finder patterns, which misses now and then.
	hints := map[gozxing.DecodeHintType]interface{}{gozxing.DecodeHintType_PURE_BARCODE: true}
	res, err := gzqr.NewQRCodeReader().Decode(bmp, hints)
	if err != nil {
		return "", fmt.Errorf("qrtest: decode: %w", err)
	}
	return res.GetText(), nil
}

var (
	svgRe     = regexp.MustCompile(`(?s)<svg [^>]*class="qr".*?</svg>`)
	viewBoxRe = regexp.MustCompile(`viewBox="0 0 (\d+) (\d+)"`)
	pathRe    = regexp.MustCompile(` d="([^"]*)"`)
	runRe     = regexp.MustCompile(`M(\d+) (\d+)h(\d+)v1h-(\d+)z`)
)

// FindSVGs returns every QR code's <svg> element in an HTML page, in order.
func FindSVGs(html string) []string { return svgRe.FindAllString(html, -1) }

// SVGModules draws an SVG of qrcode.SVG back into modules.
func SVGModules(svg string) ([][]bool, error) {
	vb := viewBoxRe.FindStringSubmatch(svg)
	d := pathRe.FindStringSubmatch(svg)
	if vb == nil || d == nil {
		return nil, errors.New("qrtest: no viewBox or path")
	}
	if rest := runRe.ReplaceAllString(d[1], ""); rest != "" {
		return nil, fmt.Errorf("qrtest: path holds more than runs: %q", rest)
	}
	n, _ := strconv.Atoi(vb[1])
	m := make([][]bool, n)
	for i := range m {
		m[i] = make([]bool, n)
	}
	for _, r := range runRe.FindAllStringSubmatch(d[1], -1) {
		x, _ := strconv.Atoi(r[1])
		y, _ := strconv.Atoi(r[2])
		w, _ := strconv.Atoi(r[3])
		if y >= n || x+w > n {
			return nil, fmt.Errorf("qrtest: run %s outside the viewBox", r[0])
		}
		for i := x; i < x+w; i++ {
			m[y][i] = true
		}
	}
	return m, nil
}

// DecodeSVG reads the text of an SVG of qrcode.SVG.
func DecodeSVG(svg string) (string, error) {
	m, err := SVGModules(svg)
	if err != nil {
		return "", err
	}
	return Decode(m)
}

// TerminalModules reads half-block lines of qrcode.Terminal back into modules
// (a light module is a block half, a dark one a space half). Lines that hold
// anything else end the code: the first run of such lines is read.
func TerminalModules(out string) ([][]bool, error) {
	var m [][]bool
	for _, line := range strings.Split(out, "\n") {
		var top, bottom []bool
		ok := line != ""
		for _, r := range line {
			switch r {
			case '█':
				top, bottom = append(top, false), append(bottom, false)
			case '▀':
				top, bottom = append(top, false), append(bottom, true)
			case '▄':
				top, bottom = append(top, true), append(bottom, false)
			case ' ':
				top, bottom = append(top, true), append(bottom, true)
			default:
				ok = false
			}
		}
		if !ok {
			if m != nil {
				break
			}
			continue
		}
		m = append(m, top, bottom)
	}
	if m == nil {
		return nil, errors.New("qrtest: no half-block lines")
	}
	// A QR code is square and its side odd, so the last line's lower half is the
	// terminal's background below the code, not a row of modules: read as one, it is
	// a dark row under the quiet zone, which the decoder's finder search can trip on.
	if len(m) == len(m[0])+1 {
		m = m[:len(m)-1]
	}
	return m, nil
}

// DecodeTerminal reads the text of the first QR code of qrcode.Terminal in out.
func DecodeTerminal(out string) (string, error) {
	m, err := TerminalModules(out)
	if err != nil {
		return "", err
	}
	return Decode(m)
}
