package qrtest_test

import (
	"fmt"
	"testing"

	"github.com/shipfile/shipfile/pkg/qrcode"
	"github.com/shipfile/shipfile/pkg/qrcode/qrtest"
)

// TestRoundTripManyLinks: the terminal and SVG codes of 300 links of the length the
// gateway makes each read back as their link, so a test that decodes one code fails for
// the code, never for the decoder.
func TestRoundTripManyLinks(t *testing.T) {
	for i := range 300 {
		link := fmt.Sprintf("http://127.0.0.1:%d/p/%043x", 40000+i*7, uint64(i)*2654435761)
		term, err := qrcode.Terminal(link)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := qrtest.DecodeTerminal(term); err != nil || got != link {
			t.Fatalf("terminal code of %s reads %q (%v)", link, got, err)
		}
		svg, err := qrcode.SVG(link, "QR code")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := qrtest.DecodeSVG(svg); err != nil || got != link {
			t.Fatalf("SVG code of %s reads %q (%v)", link, got, err)
		}
	}
}
