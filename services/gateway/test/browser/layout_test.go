package browser

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestPackageListFitsAt1280: at 1,280 px the package list with long addresses, names
// and titles has no horizontal scroll: what is too long wraps or ends in an ellipsis.
func TestPackageListFitsAt1280(t *testing.T) {
	sys := startSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bctx := newBrowser(t, ctx)
	owner := newTab(t, bctx, sys.base)
	const password = "a long admin password"
	long := "a-very-long-mailbox-name-for-the-accounts-department-0123456"
	admin := long + "@headquarters.subsidiary-of-a-very-long-company-name.example.com"
	owner.setup(admin, "Administrator With A Rather Long Name", password)
	owner.inboundSignIn(admin, password)
	owner.do(chromedp.EmulateViewport(1280, 900))
	for i, title := range []string{
		"Quarterly-statements-and-supporting-documents-for-the-external-auditors-" + strings.Repeat("x", 60),
		"Short",
	} {
		owner.open("/request")
		owner.do(
			chromedp.SendKeys(css("#recipient_email"), long+"-"+string(rune('a'+i))+"@branch-office.another-very-long-domain-name.example.org"),
			chromedp.SendKeys(css("#recipient_name"), "Recipient-With-An-Unbreakable-Name-That-Keeps-Going-And-Going"),
			chromedp.SendKeys(css("#title"), title),
		)
		if st := owner.submit(chromedp.Click(css("#package-form button[type=submit]"))); st != http.StatusCreated {
			t.Fatalf("request %d: %d", i, st)
		}
		if i == 0 {
			// The link, shown once, with its QR code beside it, within the width too.
			owner.shot("request-sent-qr")
			if n := run(owner, chromedp.Evaluate[int](`document.querySelectorAll('.qr-box svg.qr').length`)); n != 1 {
				t.Fatalf("%d QR codes on the request's page", n)
			}
			if w := run(owner, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 1280 {
				t.Fatalf("the request's page is %d px wide", w)
			}
		}
	}
	owner.open("/")
	owner.waitJS("the package list", `document.querySelectorAll('#packages tbody tr').length === 2`)
	owner.shot("packages-long-addresses")
	sizes := run(owner, chromedp.Evaluate[map[string]int](`({
		scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth,
		table: Math.ceil(document.querySelector('#packages').getBoundingClientRect().right)})`))
	if sizes["client"] != 1280 || sizes["scroll"] > sizes["client"] || sizes["table"] > sizes["client"] {
		t.Fatalf("the package list overflows at 1280 px: %v", sizes)
	}
}
