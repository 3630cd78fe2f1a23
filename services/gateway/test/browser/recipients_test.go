package browser

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestSeveralRecipientsInBrowser (docs/API.md, "Several recipients", web UI): the send form
// takes three addresses; finalize shows each recipient's own link; two of them
// download in their own browsers and the package page lists every recipient with the
// link's state and their downloads, and names whose link was used; revoking one
// recipient's link there ends that link alone; a recipient added there gets a link
// that works at once.
func TestSeveralRecipientsInBrowser(t *testing.T) {
	sys := startSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bctx := newBrowser(t, ctx)
	owner := newTab(t, bctx, sys.base)
	const password = "a long admin password"
	owner.setup("admin@example.com", "Ada Admin", password)
	owner.inboundSignIn("admin@example.com", password)

	// Send: the first recipient in its field, two more, one address a line.
	owner.open("/send")
	owner.do(
		chromedp.SendKeys(css("#recipient_email"), "ann@example.com"),
		chromedp.SendKeys(css("#recipient_name"), "Ann"),
		chromedp.SetValue(css("#more_recipients"), "bob@example.com\ncy@example.com"),
		chromedp.SendKeys(css("#title"), "Contract"),
	)
	owner.submit(chromedp.Click(css("#package-form button[type=submit]")))
	pkgURL := owner.location()
	states := func() map[string]string {
		t.Helper()
		return run(owner, chromedp.Evaluate[map[string]string](`Object.fromEntries(Array.from(
			document.querySelectorAll('#recipients tr[data-recipient]'),
			tr => [tr.dataset.recipient, tr.querySelector('.badge').textContent.trim() + ' ' + tr.querySelector('.downloads').textContent.trim()]))`))
	}
	if got := states(); len(got) != 3 || got["ann@example.com"] != "not sent yet 0" || got["cy@example.com"] != "not sent yet 0" {
		t.Fatalf("the draft's recipients: %v", got)
	}
	file, _ := writeFile(t, "contract.pdf", 32<<10)
	// The page loaded whole first: a node chromedp found while it still loaded can be
	// gone by the time the files are set ("No node with given id found", once in CI).
	owner.waitJS("the draft's page", `document.readyState === 'complete' && document.querySelector('#files')`)
	owner.do(setFiles("#files", []string{file}))
	owner.waitJS("the upload", `!!document.querySelector('#files-table') && document.querySelector('#files-table').textContent.includes('contract.pdf')`)
	if b := owner.text("#finalize"); b != "Send each of the 3 recipients their link" {
		t.Fatalf("finalize button = %q", b)
	}
	if st := owner.submit(chromedp.Click(css("#finalize"))); st != http.StatusOK {
		t.Fatalf("finalize: %d", st)
	}
	links := run(owner, chromedp.Evaluate[map[string]string](`Object.fromEntries(Array.from(
		document.querySelectorAll('#links li'), li => [li.querySelector('label').textContent.trim(), li.querySelector('input').value]))`))
	if len(links) != 3 || links["ann@example.com"] == links["bob@example.com"] || links["bob@example.com"] == links["cy@example.com"] {
		t.Fatalf("the sent page's links: %v", links)
	}
	for e, l := range links {
		if !strings.HasPrefix(l, sys.base+"/p/") {
			t.Fatalf("%s's link = %q", e, l)
		}
	}
	owner.shot("sent-several")

	// Each recipient in their own browser; Ann and Cy download the file.
	tabs := map[string]*tab{}
	for e, l := range links {
		tabs[e] = newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
		if st := tabs[e].open(l); st != http.StatusOK {
			t.Fatalf("%s's page: %d", e, st)
		}
	}
	download := func(e string) int {
		t.Helper()
		tb := tabs[e]
		href := run(tb, chromedp.Evaluate[string](`document.querySelector('#files a.btn').getAttribute('href')`))
		return run(tb, chromedp.Evaluate[int](`fetch(`+jsString(href)+`).then(r => r.arrayBuffer().then(() => r.status))`, chromedp.EvalAwaitPromise))
	}
	for _, e := range []string{"ann@example.com", "cy@example.com"} {
		if st := download(e); st != http.StatusOK {
			t.Fatalf("%s's download: %d", e, st)
		}
	}

	// The owner's page says who downloaded.
	owner.open(pkgURL)
	want := map[string]string{"ann@example.com": "active 1", "bob@example.com": "active 0", "cy@example.com": "active 1"}
	if got := states(); len(got) != 3 || got["ann@example.com"] != want["ann@example.com"] ||
		got["bob@example.com"] != want["bob@example.com"] || got["cy@example.com"] != want["cy@example.com"] {
		t.Fatalf("recipients after two downloads: %v, want %v", got, want)
	}
	// The activity names whose link each download went through (Bob only viewed).
	downloads := run(owner, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#audit tbody tr'))
		.filter(tr => tr.textContent.includes('file.download')).map(tr => tr.querySelector('td[data-label=Who]').textContent.trim()).sort()`))
	if strings.Join(downloads, ",") != "ann@example.com (link),cy@example.com (link)" {
		t.Fatalf("the activity's downloads by whose link: %v\n%s", downloads, owner.text("#audit"))
	}
	owner.shot("package-recipients")

	// Revoke Bob's link on the page: his link dies, the others work.
	owner.submit(chromedp.Click(css(`tr[data-recipient="bob@example.com"] button[type=submit]`)))
	if got := states(); got["bob@example.com"] != "revoked 0" || got["ann@example.com"] != "active 1" {
		t.Fatalf("recipients after revoking bob: %v", got)
	}
	if st := tabs["bob@example.com"].open(links["bob@example.com"]); st != http.StatusGone {
		t.Fatalf("bob's revoked link: %d, want 410", st)
	}
	for _, e := range []string{"ann@example.com", "cy@example.com"} {
		if st := tabs[e].open(links[e]); st != http.StatusOK {
			t.Fatalf("%s's link after bob's revoke: %d, want 200", e, st)
		}
	}
	if st := download("ann@example.com"); st != http.StatusOK {
		t.Fatalf("ann's second download after bob's revoke: %d", st)
	}

	// Add Dan: his link is shown once and works at once.
	owner.open(pkgURL)
	owner.do(chromedp.SendKeys(css("#add-email"), "dan@example.com"), chromedp.SendKeys(css("#add-name"), "Dan"))
	if st := owner.submit(chromedp.Click(css("#add-recipient button[type=submit]"))); st != http.StatusCreated {
		t.Fatalf("add a recipient: %d", st)
	}
	danLink := owner.value("#magic-link")
	if !strings.HasPrefix(danLink, sys.base+"/p/") {
		t.Fatalf("dan's link = %q", danLink)
	}
	tabs["dan@example.com"] = newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	if st := tabs["dan@example.com"].open(danLink); st != http.StatusOK {
		t.Fatalf("dan's page: %d", st)
	}
	if st := download("dan@example.com"); st != http.StatusOK {
		t.Fatalf("dan's download: %d", st)
	}
	owner.open(pkgURL)
	if got := states(); len(got) != 4 || got["dan@example.com"] != "active 1" || got["bob@example.com"] != "revoked 0" || got["ann@example.com"] != "active 2" {
		t.Fatalf("recipients after adding dan: %v", got)
	}
	owner.shot("package-recipients-added")
}
