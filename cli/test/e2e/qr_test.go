package e2e

import (
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/qrcode/qrtest"
)

// TestSendQR: send --qr prints, under each recipient's address, a QR code that
// reads as that recipient's link; standard output stays the links alone.
func TestSendQR(t *testing.T) {
	sys := startSystem(t)
	u := newUser(t)
	u.ok(sys.token+"\n", "login", "--url", sys.url)
	p, _ := randomFile(t, t.TempDir(), "photo.bin", 2000)

	r := u.ok("", "send", p, "--to", "ivan@example.com", "--to", "judy@example.com", "--qr")
	links := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(links) != 2 || !strings.HasPrefix(links[0], sys.url+"/p/") {
		t.Fatalf("send --qr printed on standard output %q", r.stdout)
	}
	for i, email := range []string{"ivan@example.com", "judy@example.com"} {
		head := "QR code of the link for " + email + ":\n"
		at := strings.Index(r.stderr, head)
		if at < 0 {
			t.Fatalf("no QR code for %s on standard error:\n%s", email, r.stderr)
		}
		got, err := qrtest.DecodeTerminal(r.stderr[at+len(head):])
		if err != nil || got != links[i] {
			t.Fatalf("the QR code for %s reads %q (%v), want %q", email, got, err, links[i])
		}
	}

	// Without --qr, nothing of the kind.
	r = u.ok("", "send", p, "--to", "ivan@example.com")
	if strings.Contains(r.stderr, "QR code") || strings.ContainsRune(r.stderr, '▀') {
		t.Fatalf("send without --qr printed a QR code:\n%s", r.stderr)
	}
}
