package browser

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

func TestWebUI(t *testing.T) {
	sys := startSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bctx := newBrowser(t, ctx)
	admin := newTab(t, bctx, sys.base)
	recipient := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	const password = "a long admin password"

	// Setup: the first visit goes to /setup, which creates the first admin.
	admin.open("/")
	if loc := admin.location(); !strings.HasSuffix(loc, "/setup") {
		t.Fatalf("first visit landed on %s, want /setup", loc)
	}
	admin.do(
		chromedp.SendKeys(css("#email"), "admin@example.com"),
		chromedp.SendKeys(css("#name"), "Ada Admin"),
		chromedp.SendKeys(css("#password"), password),
		chromedp.SendKeys(css("#password_again"), password),
	)
	admin.shot("setup")
	if st := admin.submit(chromedp.Click(css("form button[type=submit]"))); st != http.StatusOK {
		t.Fatalf("setup answered %d", st)
	}
	if st := admin.open("/setup"); st != http.StatusNotFound {
		t.Fatalf("/setup after setup: %d, want 404", st)
	}

	// Sign in.
	admin.open("/login")
	admin.do(chromedp.SendKeys(css("#email"), "admin@example.com"), chromedp.SendKeys(css("#password"), password))
	admin.shot("login")
	admin.submit(chromedp.Click(css("form button[type=submit]")))
	admin.do(chromedp.WaitVisible(css(".card.empty")))
	if name := admin.text(".me a"); name != "Ada Admin" {
		t.Fatalf("signed in as %q", name)
	}

	// Account → API tokens: the raw token is shown once and works.
	admin.open("/account")
	admin.do(chromedp.SendKeys(css("#token-name"), "ci"))
	if st := admin.submit(chromedp.Click(css("#token-form button[type=submit]"))); st != http.StatusCreated {
		t.Fatalf("create token: %d", st)
	}
	token := admin.value("#token-value")
	if !strings.HasPrefix(token, "sf_") || len(token) != 46 {
		t.Fatalf("token = %q", token)
	}
	admin.shot("tokens")
	api := servicetest.Client{T: t, Base: sys.base, Token: token}
	if st, me := api.Call("GET", "/api/v1/me", nil); st != http.StatusOK || me["email"] != "admin@example.com" {
		t.Fatalf("the token: %d %v", st, me)
	}
	if rows := run(admin, chromedp.Evaluate[int](`document.querySelectorAll('#tokens tbody tr').length`)); rows != 1 {
		t.Fatalf("token rows = %d", rows)
	}

	// Send files: bad input comes back beside the field and creates nothing.
	admin.open("/send")
	admin.do(
		chromedp.SendKeys(css("#recipient_email"), "bob@example.com"),
		chromedp.SendKeys(css("#recipient_name"), "Bob"),
		chromedp.SendKeys(css("#title"), "Q3 report"),
		chromedp.SendKeys(css("#note"), "Hi Bob,\nhere are the figures."),
		chromedp.SetValue(css("#ttl_days"), "91"),
	)
	if st := admin.submit(chromedp.Click(css("#package-form button[type=submit]"))); st != http.StatusUnprocessableEntity {
		t.Fatalf("ttl 91: %d, want 422", st)
	}
	if msg := admin.text("#ttl_days-error"); !strings.Contains(msg, "between 1 and 90") {
		t.Fatalf("ttl error = %q", msg)
	}
	if v := admin.value("#title"); v != "Q3 report" {
		t.Fatalf("the form lost the title: %q", v)
	}
	admin.shot("send-error")
	if _, list := api.Call("GET", "/api/v1/packages", nil); len(list["items"].([]any)) != 0 {
		t.Fatalf("a bad form created a package: %v", list)
	}
	admin.do(chromedp.SetValue(css("#ttl_days"), "5"))
	admin.submit(chromedp.Click(css("#package-form button[type=submit]")))
	pkgURL := admin.location()

	// Two files, each with its own progress bar, bytes and throughput.
	big, bigSum := writeFile(t, "figures.bin", 6<<20)
	small, smallSum := writeFile(t, "summary.txt", 20<<10)
	// Keep the finished uploads on screen for the screenshot; the page reloads
	// itself otherwise.
	admin.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`),
		setFiles("#files", []string{big, small}))
	admin.waitJS("both uploads", `document.querySelectorAll('.uploads li[data-state=done]').length === 2`)
	stats := admin.text(".uploads li:first-child .stats")
	if !strings.Contains(stats, "6.0 MiB") || !strings.Contains(stats, "/s") {
		t.Fatalf("upload stats = %q, want size and throughput", stats)
	}
	admin.shot("upload")
	admin.open(pkgURL)
	if n := run(admin, chromedp.Evaluate[int](`document.querySelectorAll('#files-table tbody tr').length`)); n != 2 {
		t.Fatalf("file rows = %d", n)
	}
	body := admin.text("#files-table")
	if !strings.Contains(body, bigSum) || !strings.Contains(body, smallSum) {
		t.Fatalf("the page does not show both SHA-256 sums:\n%s", body)
	}
	admin.shot("package-draft")
	if st := admin.submit(chromedp.Click(css("#finalize"))); st != http.StatusOK {
		t.Fatalf("finalize: %d", st)
	}
	link := admin.value("#magic-link")
	if !strings.HasPrefix(link, sys.base+"/p/") {
		t.Fatalf("magic link = %q", link)
	}
	admin.shot("sent")

	// The recipient opens the link in their own browser and downloads a file.
	if st := recipient.open(link); st != http.StatusOK {
		t.Fatalf("recipient page: %d", st)
	}
	if note := recipient.text(".note"); !strings.Contains(note, "here are the figures.") {
		t.Fatalf("note = %q", note)
	}
	recipient.shot("recipient")
	dl := t.TempDir()
	if _, err := chromedp.CallBrowser(recipient.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, BrowserContextID: chromedp.FromContext(recipient.ctx).BrowserContextID,
		DownloadPath: dl, EventsEnabled: new(true),
	}); err != nil {
		t.Fatal(err)
	}
	progress := chromedp.BrowserEvents(recipient.ctx, browser.DownloadProgress)
	recipient.do(chromedp.Click(css("#files li:first-child a.btn")))
	var guid string
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("download: %v", err)
		}
		if ev.State == browser.DownloadProgressStateCompleted {
			guid = ev.GUID
			break
		}
		if ev.State == browser.DownloadProgressStateCanceled {
			t.Fatal("download canceled")
		}
	}
	got, err := os.ReadFile(filepath.Join(dl, guid))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(got)
	if hex.EncodeToString(sum[:]) != bigSum {
		t.Fatalf("downloaded %d bytes that differ from figures.bin", len(got))
	}
	// On a phone.
	phone := newTab(t, bctx, sys.base, chromedp.WithNewBrowserContext())
	phone.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	phone.open(link)
	phone.shot("recipient-phone")

	// The owner sees the link's use, then revokes it.
	admin.open(pkgURL)
	if uses := admin.text("#link-uses"); uses == "0" {
		t.Fatal("the link's uses are not counted")
	}
	admin.do(chromedp.Click(css("#revoke")))
	admin.do(chromedp.WaitVisible(css("#confirm")))
	admin.submit(chromedp.Click(css("#confirm")))
	if state := admin.text("#state"); state != "revoked" {
		t.Fatalf("state after revoke = %q", state)
	}
	admin.shot("package")
	if st := recipient.open(link); st != http.StatusGone {
		t.Fatalf("revoked link: %d, want 410", st)
	}
	if h := recipient.text("h1"); h != "This link is no longer available" {
		t.Fatalf("dead link page: %q", h)
	}
	recipient.shot("gone")

	// Request files: the recipient uploads through the link's drop zone.
	admin.open("/request")
	admin.do(
		chromedp.SendKeys(css("#recipient_email"), "carol@example.com"),
		chromedp.SendKeys(css("#title"), "Signed contract"),
		chromedp.SendKeys(css("#note"), "Please upload the signed copy."),
	)
	if st := admin.submit(chromedp.Click(css("#package-form button[type=submit]"))); st != http.StatusCreated {
		t.Fatalf("request: %d", st)
	}
	inLink := admin.value("#magic-link")
	contract, contractSum := writeFile(t, "contract.pdf", 12<<20)
	// The upload goes through tus and survives the network going away for a moment:
	// the page is opened through a proxy that slows uploads to 3 MB/s (Chromium does not
	// throttle uploads to a loopback address), and once 2 MiB are sent the browser goes
	// offline for 1.5 s (chromedp network emulation: requests fail, navigator.onLine is
	// false) and the proxy cuts the connection of the PATCH in flight (emulation leaves
	// a request whose body is being sent alone). tus-js-client retries, asks where the
	// gateway stands (HEAD) and goes on from there.
	proxy := slowUploads(t, strings.TrimPrefix(sys.base, "http://"), 3e6)
	recipient.open(strings.Replace(inLink, sys.base, "http://"+proxy.addr, 1))
	throttle := func(offline bool) {
		t.Helper()
		if _, err := chromedp.Call(recipient.ctx, emulateNetworkConditions, networkConditions{
			// Throughputs far above what the proxy lets through: emulation then watches
			// every request, and going offline fails those in flight.
			Offline: offline, DownloadThroughput: 1e9, UploadThroughput: 1e9,
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := chromedp.Call(recipient.ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	throttle(false)
	recipient.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`),
		setFiles("#files-input", []string{contract}))
	recipient.waitJS("2 MiB sent", `Number((document.querySelector('.uploads li') || {getAttribute: () => 0}).getAttribute('data-sent')) >= 2097152`)
	throttle(true)
	proxy.drop()
	time.Sleep(1500 * time.Millisecond) // the network is away for this long
	throttle(false)
	recipient.waitJS("the tus upload to finish after the drop", `!!document.querySelector('.uploads li[data-state=done][data-transport=tus][data-retried]')`)
	if _, err := chromedp.Call(recipient.ctx, emulateNetworkConditions, networkConditions{DownloadThroughput: -1, UploadThroughput: -1}); err != nil {
		t.Fatal(err)
	}
	// A reload midway: choosing the same file again goes on where it stopped
	// (tus-js-client finds the upload URL by the file's fingerprint).
	annex, annexSum := writeFile(t, "annex.pdf", 12<<20)
	slowLink := strings.Replace(inLink, sys.base, "http://"+proxy.addr, 1)
	recipient.open(slowLink)
	recipient.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`),
		setFiles("#files-input", []string{annex}))
	recipient.waitJS("2 MiB of the annex sent", `Number((document.querySelector('.uploads li') || {getAttribute: () => 0}).getAttribute('data-sent')) >= 2097152`)
	recipient.open(slowLink)
	recipient.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dropzone').removeAttribute('data-reload')`),
		setFiles("#files-input", []string{annex}))
	recipient.waitJS("the annex to finish after the reload", `!!document.querySelector('.uploads li[data-state=done][data-resumed]')`)

	recipient.open(inLink)
	recipient.waitJS("the page to list the upload", `!!document.querySelector('#files') && document.querySelector('#files').textContent.includes('contract.pdf')`)
	recipient.shot("recipient-upload")
	_, list := api.Call("GET", "/api/v1/packages?direction=inbound", nil)
	inbound := list["items"].([]any)[0].(map[string]any)
	_, detail := api.Call("GET", "/api/v1/packages/"+inbound["id"].(string), nil)
	files := detail["files"].([]any)
	sums := map[string]bool{}
	for _, f := range files {
		if f := f.(map[string]any); f["uploaded_by"] == "recipient" {
			sums[f["sha256"].(string)] = true
		}
	}
	if len(files) != 2 || !sums[contractSum] || !sums[annexSum] {
		t.Fatalf("inbound files = %v", files)
	}

	// Settings → Webhooks: every event is checked; the secret is shown once; Test
	// reaches the receiver through the dispatcher, signed with that secret.
	admin.open("/admin/webhooks")
	if n := run(admin, chromedp.Evaluate[int](`document.querySelectorAll('#webhook-form input[name=events]:checked').length`)); n != len(events.Types) {
		t.Fatalf("checked events = %d, want all %d", n, len(events.Types))
	}
	admin.do(chromedp.SendKeys(css("#url"), sys.hook), chromedp.SendKeys(css("#description"), "CI receiver"))
	if st := admin.submit(chromedp.Click(css("#webhook-form button[type=submit]"))); st != http.StatusCreated {
		t.Fatalf("create webhook: %d", st)
	}
	secret := admin.value("#secret-value")
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("secret = %q", secret)
	}
	admin.shot("webhooks")
	admin.submit(chromedp.Click(css("button[data-test-hook]")))
	servicetest.WaitFor(t, 30*time.Second, "the webhook.test delivery", func() bool { return len(sys.rcv.events("webhook.test")) == 1 })
	test := sys.rcv.events("webhook.test")[0]
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(test.body)
	if test.signature != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
		t.Fatalf("X-Service-Signature %q does not match the secret shown", test.signature)
	}
	// The delivery log shows it; Redeliver sends it again under the same delivery id.
	// The click navigates: wait for the hook's page to load before reading where it is,
	// or the log below would poll the list page it came from.
	if st := admin.submit(chromedp.Click(css("a[href^='/admin/webhooks/'].mono"))); st != http.StatusOK {
		t.Fatalf("open the webhook's page: %d", st)
	}
	hookPage := admin.location()
	if !strings.Contains(hookPage, "/admin/webhooks/") {
		t.Fatalf("after the click the tab is at %s, want the webhook's page", hookPage)
	}
	servicetest.WaitFor(t, 20*time.Second, "the delivery log", func() bool {
		admin.open(hookPage)
		return run(admin, chromedp.Evaluate[bool](`!!document.querySelector('#deliveries tr[data-event="webhook.test"][data-status="204"]')`))
	})
	admin.submit(chromedp.Click(css("#deliveries button")))
	servicetest.WaitFor(t, 30*time.Second, "the redelivery", func() bool { return len(sys.rcv.events("webhook.test")) == 2 })
	if again := sys.rcv.events("webhook.test")[1]; again.delivery != test.delivery {
		t.Fatalf("redelivery id %s, want %s", again.delivery, test.delivery)
	}
	servicetest.WaitFor(t, 20*time.Second, "the redelivery in the log", func() bool {
		admin.open(hookPage)
		return run(admin, chromedp.Evaluate[int](`document.querySelectorAll('#deliveries tr[data-status="204"]').length`)) == 2
	})
	admin.shot("webhook")

	// The other admin pages.
	admin.open("/admin/users")
	admin.shot("users")
	admin.open("/admin/audit")
	if audit := admin.text("#audit"); !strings.Contains(audit, "package.revoke") || !strings.Contains(audit, "recipient (link)") {
		t.Fatalf("audit log:\n%s", audit)
	}
	admin.shot("audit")
	admin.open("/")
	if rows := run(admin, chromedp.Evaluate[int](`document.querySelectorAll('#packages tbody tr').length`)); rows != 2 {
		t.Fatalf("dashboard rows = %d", rows)
	}
	admin.shot("dashboard")
	phone.open(sys.base + "/login")
	phone.do(chromedp.SendKeys(css("#email"), "admin@example.com"), chromedp.SendKeys(css("#password"), password))
	phone.submit(chromedp.Click(css("form button[type=submit]")))
	phone.do(chromedp.WaitVisible(css("#packages")))
	phone.shot("dashboard-phone")

	// The docs pages run under their own policy without violations (collected by
	// the tab).
	admin.open("/api/v1/docs")
	admin.do(chromedp.WaitVisible(css(".swagger-ui .info")))
	admin.open("/api/v1/redoc")
	admin.do(chromedp.WaitVisible(css(".api-content h1")))
}
