package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/qrcode/qrtest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

var shownLink = regexp.MustCompile(`id="(magic-link[-0-9]*)" class="mono" value="([^"]+)"`)

// expectQRCodes checks that a page showing links shows each one's QR code once,
// beside it, and that each decodes to its link.
func expectQRCodes(t *testing.T, p page, want int) {
	t.Helper()
	links := shownLink.FindAllStringSubmatch(p.body, -1)
	svgs := qrtest.FindSVGs(p.body)
	if len(links) != want || len(svgs) != want {
		t.Fatalf("%d links and %d QR codes, want %d of each:\n%s", len(links), len(svgs), want, p.body)
	}
	for i, l := range links {
		link := html.UnescapeString(l[2])
		got, err := qrtest.DecodeSVG(svgs[i])
		if err != nil || got != link {
			t.Fatalf("QR code %d reads %q (%v), want %q", i, got, err, link)
		}
		// Beside its link: the box names the input it stands for.
		if !strings.Contains(p.body, `data-qr-for="`+l[1]+`"><svg`) {
			t.Fatalf("no QR box for %s", l[1])
		}
	}
	if strings.Contains(p.body, "<img") && regexp.MustCompile(`<img[^>]+/p/`).MatchString(p.body) {
		t.Fatal("a QR code is fetched by a URL that holds the link")
	}
}

func TestSentPagesShowQRCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("ann@example.com", app.RoleRegular)
	b := e.browser()
	b.login("ann@example.com")

	t.Run("a request with one recipient", func(t *testing.T) {
		b.get("/request")
		p := b.post("/request", url.Values{"recipient_email": {"bob@example.com"}, "title": {"Scans"}, "ttl_days": {"3"}})
		expectStatus(t, p, http.StatusCreated)
		expectQRCodes(t, p, 1)
	})

	b.get("/request")
	p := b.post("/request", url.Values{"recipient_email": {"bob@example.com"}, "title": {"Signatures"}, "ttl_days": {"7"},
		"more_recipients": {"cy@example.com"}})
	expectStatus(t, p, http.StatusCreated)
	t.Run("a request with two recipients", func(t *testing.T) { expectQRCodes(t, p, 2) })
	pkgPath := regexp.MustCompile(`href="(/packages/[0-9a-f-]{36})"`).FindStringSubmatch(p.body)[1]

	t.Run("a recipient added", func(t *testing.T) {
		p := b.post(pkgPath+"/recipients", url.Values{"email": {"eve@example.com"}})
		expectStatus(t, p, http.StatusCreated)
		expectQRCodes(t, p, 1)
	})

	t.Run("the package page shows none", func(t *testing.T) {
		page := b.get(pkgPath)
		expectStatus(t, page, http.StatusOK)
		if n := len(qrtest.FindSVGs(page.body)); n != 0 {
			t.Fatalf("the package page shows %d QR codes: links are shown once", n)
		}
	})
}
