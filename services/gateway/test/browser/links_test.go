package browser

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestProtectedLinkInBrowser: a package sent with a generated password and a limit of
// one download. The recipient's page shows only the password form (no title, no file
// name); a wrong password shows it again with an error; the right one shows the files
// with the downloads left; after the download the file's limit is reached, which is
// every file, so the page answers 410. The owner's page shows "password protected" and
// "limit reached".
func TestProtectedLinkInBrowser(t *testing.T) {
	sys := startSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bctx := newBrowser(t, ctx)
	admin := newTab(t, bctx, sys.base)
	recipient := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	const adminPassword = "a long admin password"

	admin.setup("admin@example.com", "Ada Admin", adminPassword)
	admin.inboundSignIn("admin@example.com", adminPassword)

	// Send: a generated password (shown so it can be copied), a limit of one download.
	admin.open("/send")
	admin.do(
		chromedp.SendKeys(css("#recipient_email"), "bob@example.com"),
		chromedp.SendKeys(css("#title"), "Secret plans"),
		chromedp.Click(css("#generate-password")),
		chromedp.SetValue(css("#max_downloads"), "1"),
	)
	password := admin.value("#password")
	if len(password) != 20 {
		t.Fatalf("generated password = %q, want 20 characters", password)
	}
	if checked := run(admin, chromedp.Evaluate[bool](`document.getElementById('notify_owner').checked`)); !checked {
		t.Fatal("the notify box is not checked by default")
	}
	admin.shot("send-protected")
	admin.submit(chromedp.Click(css("#package-form button[type=submit]")))
	pkgURL := admin.location()
	file, _ := writeFile(t, "plans.pdf", 64<<10)
	admin.do(setFiles("#files", []string{file}))
	admin.waitJS("the upload", `!!document.querySelector('#files-table') && document.querySelector('#files-table').textContent.includes('plans.pdf')`)
	if badge := admin.text("#password-protected"); badge != "password protected" {
		t.Fatalf("badge = %q", badge)
	}
	admin.submit(chromedp.Click(css("#finalize")))
	link := admin.value("#magic-link")

	// The recipient: only the password form.
	if st := recipient.open(link); st != http.StatusOK {
		t.Fatalf("protected page: %d, want 200", st)
	}
	page := recipient.text("body")
	if strings.Contains(page, "Secret plans") || strings.Contains(page, "plans.pdf") {
		t.Fatalf("the password page shows the package:\n%s", page)
	}
	recipient.shot("recipient-password")
	recipient.do(chromedp.SendKeys(css("#password"), "not the password"))
	if st := recipient.submit(chromedp.Click(css("#unlock-submit"))); st != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d, want 401", st)
	}
	if msg := recipient.text("#unlock-error"); msg != "Wrong password." {
		t.Fatalf("error = %q", msg)
	}
	recipient.do(chromedp.SendKeys(css("#password"), password))
	if st := recipient.submit(chromedp.Click(css("#unlock-submit"))); st != http.StatusOK {
		t.Fatalf("right password: %d, want 200", st)
	}
	if h := recipient.text("h1"); h != "Secret plans" {
		t.Fatalf("page after unlock: %q", h)
	}
	if left := recipient.text(".downloads-left"); left != "1 download left" {
		t.Fatalf("downloads left = %q", left)
	}
	recipient.shot("recipient-unlocked")
	// The download (the cookie goes with it; nothing without it).
	href := run(recipient, chromedp.Evaluate[string](`document.querySelector('#files a.btn').getAttribute('href')`))
	if resp, err := http.Get(sys.base + href); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the download without the cookie: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	status := run(recipient, chromedp.Evaluate[int](`fetch(`+jsString(href)+`).then(r => r.arrayBuffer().then(() => r.status))`, chromedp.EvalAwaitPromise))
	if status != http.StatusOK {
		t.Fatalf("download: %d", status)
	}
	// Limit reached on every file: the link is dead.
	if st := recipient.open(link); st != http.StatusGone {
		t.Fatalf("used-up link: %d, want 410", st)
	}
	if h := recipient.text("h1"); h != "This link is no longer available" {
		t.Fatalf("used-up page: %q", h)
	}
	recipient.shot("recipient-limit-reached")

	admin.open(pkgURL)
	if d := admin.text("#files-table .downloads"); !strings.Contains(d, "1 / 1") || !strings.Contains(d, "limit reached") {
		t.Fatalf("owner's downloads cell = %q", d)
	}
	// The owner raises the limit with the edit form: the link works again.
	admin.do(chromedp.Click(css("#edit summary")), chromedp.SetValue(css("#edit-max_downloads"), "2"))
	admin.submit(chromedp.Click(css("#save")))
	if d := admin.text("#max-downloads"); d != "2 per file" {
		t.Fatalf("limit after edit = %q", d)
	}
	admin.shot("package-protected")
	if st := recipient.open(link); st != http.StatusOK {
		t.Fatalf("after raising the limit: %d, want 200", st)
	}
}

func jsString(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}
