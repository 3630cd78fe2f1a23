package httpapi_test

import (
	"archive/zip"
	"bytes"
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// sharedPackage creates an outbound package with the given extra fields and files,
// finalizes it and returns its id and link token.
func (a *testAPI) sharedPackage(token string, fields map[string]any, files ...string) (string, string) {
	a.t.Helper()
	body := map[string]any{"title": "Protected", "recipient_email": "r@example.com"}
	for k, v := range fields {
		body[k] = v
	}
	p := a.createPackage(token, body)
	id := p["id"].(string)
	for _, f := range files {
		expect(a.t, a.upload("/api/v1/packages/"+id+"/files", token, f, []byte("content of "+f)), http.StatusCreated)
	}
	fin := a.do("POST", "/api/v1/packages/"+id+"/finalize", token, nil)
	expect(a.t, fin, http.StatusOK)
	return id, linkToken(a.t.(*testing.T), fin.json(a.t)["magic_link"])
}

func (a *testAPI) unlock(link, password string) response {
	a.t.Helper()
	return a.do("POST", "/api/v1/links/"+link+"/unlock", "", map[string]any{"password": password})
}

func (a *testAPI) auditActions(packageID string) []string {
	a.t.Helper()
	rows, err := a.pool.Query(context.Background(), "SELECT action FROM audit_log WHERE package_id = $1 ORDER BY id", packageID)
	if err != nil {
		a.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			a.t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

func TestPasswordRules(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	for name, body := range map[string]map[string]any{
		"short password":     {"password": "1234567"},
		"long password":      {"password": strings.Repeat("p", 129)},
		"password not text":  {"password": 12345678},
		"zero downloads":     {"max_downloads": 0},
		"too many downloads": {"max_downloads": 10001},
		"notify not boolean": {"notify_owner": "yes"},
	} {
		body["title"], body["recipient_email"] = "T", "r@example.com"
		r := a.do("POST", "/api/v1/packages", token, body)
		if r.status != http.StatusUnprocessableEntity {
			t.Errorf("%s: status %d, want 422: %s", name, r.status, r.body)
		}
	}
	// Defaults: no password, no limit, notifications on.
	p := a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com"})
	if p["password_protected"] != false || p["max_downloads"] != nil || p["notify_owner"] != true {
		t.Fatalf("defaults: %v", p)
	}
	p = a.createPackage(token, map[string]any{"title": "T", "recipient_email": "r@example.com",
		"password": "12345678", "max_downloads": 10000, "notify_owner": false})
	if p["password_protected"] != true || p["max_downloads"] != float64(10000) || p["notify_owner"] != false {
		t.Fatalf("fields: %v", p)
	}
	if _, ok := p["password"]; ok {
		t.Fatal("the password came back")
	}
	var hash string
	if err := a.pool.QueryRow(context.Background(), "SELECT password_hash FROM packages WHERE id = $1", p["id"]).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$") || strings.Contains(hash, "12345678") {
		t.Fatalf("stored password = %q, want an argon2id hash", hash)
	}
}

func TestProtectedLink(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	id, link := a.sharedPackage(token, map[string]any{"password": "open sesame"}, "a.txt")
	_, other := a.sharedPackage(token, map[string]any{"password": "other secret"}, "b.txt")

	// Without a grant every link endpoint but unlock answers 401, showing nothing.
	r := a.do("GET", "/api/v1/links/"+link, "", nil)
	expect(t, r, http.StatusUnauthorized)
	if strings.Contains(string(r.body), "Protected") || strings.Contains(string(r.body), "a.txt") {
		t.Fatalf("401 shows the package: %s", r.body)
	}
	expect(t, a.do("GET", "/api/v1/links/"+link+"/archive", "", nil), http.StatusUnauthorized)

	// Wrong password: 401, audited. Malformed bodies: 422.
	expect(t, a.unlock(link, "open sesamE"), http.StatusUnauthorized)
	expect(t, a.do("POST", "/api/v1/links/"+link+"/unlock", "", map[string]any{}), http.StatusUnprocessableEntity)
	expect(t, a.do("POST", "/api/v1/links/"+link+"/unlock", "", `{"password": 5}`), http.StatusUnprocessableEntity)
	if n := count(a.auditActions(id), "link.unlock_failed"); n != 1 {
		t.Fatalf("audited wrong passwords = %d, want 1", n)
	}

	// The right password: a grant and the cookie for this link's paths alone.
	r = a.unlock(link, "open sesame")
	expect(t, r, http.StatusOK)
	body := r.json(t)
	grant, _ := body["grant"].(string)
	assertUTC(t, body["expires_at"])
	exp, _ := time.Parse(time.RFC3339, body["expires_at"].(string))
	if grant == "" || time.Until(exp) < 11*time.Hour || time.Until(exp) > 13*time.Hour {
		t.Fatalf("unlock = %s", r.body)
	}
	cookies := r.header.Values("Set-Cookie")
	if len(cookies) != 2 {
		t.Fatalf("Set-Cookie = %q, want two (page and API paths)", cookies)
	}
	for _, c := range cookies {
		if !strings.HasPrefix(c, "shipfile_link="+grant) || !strings.Contains(c, "HttpOnly") || !strings.Contains(c, "SameSite=Lax") ||
			!strings.Contains(c, "Max-Age=43") || (!strings.Contains(c, "Path=/p/"+link) && !strings.Contains(c, "Path=/api/v1/links/"+link)) {
			t.Fatalf("cookie %q", c)
		}
	}

	expect(t, a.do("GET", "/api/v1/links/"+link, "", nil, "Shipfile-Link-Grant", grant), http.StatusOK)
	expect(t, a.do("GET", "/api/v1/links/"+link, "", nil, "Cookie", "shipfile_link="+grant), http.StatusOK)
	view := a.do("GET", "/api/v1/links/"+link, "", nil, "Shipfile-Link-Grant", grant).json(t)
	if view["password_protected"] != true {
		t.Fatalf("link view: %v", view)
	}
	fileURL := view["files"].([]any)[0].(map[string]any)["download_url"].(string)
	expect(t, a.do("GET", fileURL, "", nil), http.StatusUnauthorized)
	if r := a.do("GET", fileURL, "", nil, "Shipfile-Link-Grant", grant); r.status != http.StatusOK || string(r.body) != "content of a.txt" {
		t.Fatalf("download with grant: %d %s", r.status, r.body)
	}
	// A grant opens its own link alone; a forged or mangled one nothing.
	expect(t, a.do("GET", "/api/v1/links/"+other, "", nil, "Shipfile-Link-Grant", grant), http.StatusUnauthorized)
	expect(t, a.do("GET", "/api/v1/links/"+link, "", nil, "Shipfile-Link-Grant", grant+"x"), http.StatusUnauthorized)
	parts := strings.SplitN(grant, ".", 3)
	longer := parts[0] + "." + strconv.FormatInt(time.Now().Add(48*time.Hour).Unix(), 10) + "." + parts[2]
	expect(t, a.do("GET", "/api/v1/links/"+link, "", nil, "Shipfile-Link-Grant", longer), http.StatusUnauthorized)

	// A new password ends every grant at once.
	expect(t, a.do("PATCH", "/api/v1/packages/"+id, token, map[string]any{"password": "new password"}), http.StatusOK)
	expect(t, a.do("GET", "/api/v1/links/"+link, "", nil, "Shipfile-Link-Grant", grant), http.StatusUnauthorized)
	expect(t, a.unlock(link, "open sesame"), http.StatusUnauthorized)
	grant = a.unlock(link, "new password").json(t)["grant"].(string)
	expect(t, a.do("GET", "/api/v1/links/"+link, "", nil, "Shipfile-Link-Grant", grant), http.StatusOK)

	// null removes the password: the link opens without a grant; unlock has nothing to check.
	p := a.do("PATCH", "/api/v1/packages/"+id, token, map[string]any{"password": nil})
	expect(t, p, http.StatusOK)
	if p.json(t)["password_protected"] != false {
		t.Fatalf("after removing the password: %s", p.body)
	}
	expect(t, a.do("GET", "/api/v1/links/"+link, "", nil), http.StatusOK)
	expect(t, a.unlock(link, "anything"), http.StatusConflict)

	// A dead link answers 410 before any password is asked, even with a grant.
	expect(t, a.do("PATCH", "/api/v1/packages/"+id, token, map[string]any{"password": "again protected"}), http.StatusOK)
	grant = a.unlock(link, "again protected").json(t)["grant"].(string)
	expect(t, a.do("POST", "/api/v1/packages/"+id+"/revoke", token, nil), http.StatusOK)
	expect(t, a.do("GET", "/api/v1/links/"+link, "", nil, "Shipfile-Link-Grant", grant), http.StatusGone)
	expect(t, a.unlock(link, "again protected"), http.StatusGone)
	expect(t, a.unlock(strings.Repeat("A", 43), "whatever1"), http.StatusGone)
}

// parallelUnlocks sends one wrong password per gateway in gateways, all at once, and
// counts the answers by status.
func parallelUnlocks(link string, gateways ...*testAPI) map[int]int {
	var wg sync.WaitGroup
	statuses := make(chan int, len(gateways))
	for _, g := range gateways {
		wg.Go(func() { statuses <- g.unlock(link, "wrong guess").status })
	}
	wg.Wait()
	close(statuses)
	got := map[int]int{}
	for s := range statuses {
		got[s]++
	}
	return got
}

func TestUnlockThrottle(t *testing.T) {
	t.Parallel()
	// A hasher with a slot for every request and a long wait: no unlock is ever
	// answered 503, and its runs count the password checks.
	hasher := app.NewHasher(8, time.Minute)
	a := newTestAPI(t, defaultConfig(), withHasher(hasher))
	_, token := a.user("owner@example.com", app.RoleRegular)
	id, link := a.sharedPackage(token, map[string]any{"password": "the right one"}, "a.txt")
	_, other := a.sharedPackage(token, map[string]any{"password": "the right one"}, "b.txt")

	// Parallel wrong passwords: each is counted before it is checked, so at most 5
	// are checked and the rest are 429.
	before := hasher.Runs()
	got := parallelUnlocks(link, a, a, a, a, a, a, a, a)
	if got[http.StatusUnauthorized] != 5 || got[http.StatusTooManyRequests] != 3 {
		t.Fatalf("8 parallel wrong passwords: %v, want 5×401 and 3×429", got)
	}
	if checks := hasher.Runs() - before; checks != 5 {
		t.Fatalf("8 parallel wrong passwords: %d password checks, want 5", checks)
	}
	// Now even the right password is 429, with Retry-After for the rest of the window.
	r := a.unlock(link, "the right one")
	expect(t, r, http.StatusTooManyRequests)
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 800 || s > 900 {
		t.Fatalf("Retry-After = %q, want about 900 s", r.header.Get("Retry-After"))
	}
	if n := count(a.auditActions(id), "link.unlock_failed"); n != 5 {
		t.Fatalf("audited wrong passwords = %d, want 5", n)
	}
	// Another link is not throttled.
	expect(t, a.unlock(other, "the right one"), http.StatusOK)
	// Once the window has passed, the right password works again.
	if _, err := a.pool.Exec(context.Background(), "UPDATE link_unlock_failures SET failed_at = failed_at - interval '15 minutes'"); err != nil {
		t.Fatal(err)
	}
	expect(t, a.unlock(link, "the right one"), http.StatusOK)
}

// TestUnlockThrottleAcrossGateways: the unlock throttle counts on the database's
// clock, so three gateways of one installation whose clocks disagree (one right, one
// 20 minutes ahead, one 20 minutes behind) give a link at most 5 password checks per
// window between them, and Retry-After never exceeds the window. On the gateways'
// own clocks, the one ahead saw every other failure as out of the window (and pruned
// it), and the one behind answered a Retry-After 20 minutes too long.
func TestUnlockThrottleAcrossGateways(t *testing.T) {
	t.Parallel()
	var gateways []*testAPI
	var hashers []*app.Hasher
	for _, skew := range []time.Duration{0, 20 * time.Minute, -20 * time.Minute} {
		opts := []testOption{withClockSkew(skew)}
		if len(gateways) > 0 {
			opts = append(opts, onDatabase(gateways[0].dbURL))
		}
		h := app.NewHasher(9, time.Minute)
		gateways = append(gateways, newTestAPI(t, defaultConfig(), append(opts, withHasher(h))...))
		hashers = append(hashers, h)
	}
	a := gateways[0]
	_, token := a.user("owner@example.com", app.RoleRegular)
	_, link := a.sharedPackage(token, map[string]any{"password": "the right one"}, "a.txt")
	checks := func() (n int64) {
		for _, h := range hashers {
			n += h.Runs()
		}
		return n
	}

	// A wrong password on each gateway one after the other, then 6 at once, 2 on each.
	before := checks()
	for _, g := range gateways {
		expect(t, g.unlock(link, "wrong guess"), http.StatusUnauthorized)
	}
	got := parallelUnlocks(link, append(gateways, gateways...)...)
	if got[http.StatusUnauthorized] != 2 || got[http.StatusTooManyRequests] != 4 {
		t.Fatalf("6 parallel wrong passwords after 3: %v, want 2×401 and 4×429", got)
	}
	if n := checks() - before; n != 5 {
		t.Fatalf("9 wrong passwords on 3 gateways: %d password checks, want 5", n)
	}
	// Every gateway now answers 429, even to the right password, for the rest of the
	// window and no longer.
	for i, g := range gateways {
		r := g.unlock(link, "the right one")
		expect(t, r, http.StatusTooManyRequests)
		if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 800 || s > 900 {
			t.Fatalf("gateway %d: Retry-After = %q, want about 900 s", i, r.header.Get("Retry-After"))
		}
	}
}

// linkFiles returns the link view's files by name.
func (a *testAPI) linkFiles(link string, headers ...string) map[string]map[string]any {
	a.t.Helper()
	r := a.do("GET", "/api/v1/links/"+link, "", nil, headers...)
	expect(a.t, r, http.StatusOK)
	out := map[string]map[string]any{}
	for _, f := range r.json(a.t)["files"].([]any) {
		m := f.(map[string]any)
		out[m["filename"].(string)] = m
	}
	return out
}

// TestDownloadLimit: each file has a budget of max_downloads × its size through the
// link (docs/API.md, "Download limit"); answers take what they send, downloads_left is the
// budget in whole copies, a spent file is 410 and left out of the archive, and once
// every file's is, the whole link is 410.
func TestDownloadLimit(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	id, link := a.sharedPackage(token, map[string]any{"max_downloads": 2}, "a.txt", "b.txt") // 16 bytes each
	files := a.linkFiles(link)
	aURL, bURL := files["a.txt"]["download_url"].(string), files["b.txt"]["download_url"].(string)
	if files["a.txt"]["downloads_left"] != float64(2) || files["a.txt"]["download_count"] != float64(0) {
		t.Fatalf("link view: %v", files["a.txt"])
	}
	left := func(name string) any { return a.linkFiles(link)[name]["downloads_left"] }

	// HEAD takes nothing; a range takes its bytes; 13 + 3 bytes are one copy of 16.
	expect(t, a.do("HEAD", aURL, "", nil), http.StatusOK)
	r := a.do("GET", aURL, "", nil, "Range", "bytes=3-")
	expect(t, r, http.StatusPartialContent)
	if string(r.body) != "tent of a.txt" || r.header.Get("Content-Range") != "bytes 3-15/16" {
		t.Fatalf("bytes=3-: %q, Content-Range %q", r.body, r.header.Get("Content-Range"))
	}
	if l := left("a.txt"); l != float64(1) {
		t.Fatalf("downloads_left after 13 of 32 bytes = %v, want 1", l)
	}
	expect(t, a.do("GET", aURL, "", nil, "Range", "bytes=0-2"), http.StatusPartialContent)
	// A 304 sends nothing and takes nothing.
	etag := a.do("HEAD", aURL, "", nil).header.Get("ETag")
	expect(t, a.do("GET", aURL, "", nil, "If-None-Match", etag), http.StatusNotModified)
	if l := left("a.txt"); l != float64(1) {
		t.Fatalf("downloads_left after 16 of 32 bytes and a 304 = %v, want 1", l)
	}
	// 416 for a range past the end, as usual, taking nothing.
	r = a.do("GET", aURL, "", nil, "Range", "bytes=16-")
	expect(t, r, http.StatusRequestedRangeNotSatisfiable)
	if r.header.Get("Content-Range") != "bytes */16" {
		t.Fatalf("416 Content-Range = %q", r.header.Get("Content-Range"))
	}
	expect(t, a.do("GET", aURL, "", nil), http.StatusOK)
	// a.txt is spent: 410 for it, HEAD and ranges included; b.txt still works.
	expect(t, a.do("GET", aURL, "", nil), http.StatusGone)
	expect(t, a.do("GET", aURL, "", nil, "Range", "bytes=15-"), http.StatusGone)
	if r := a.do("HEAD", aURL, "", nil); r.status != http.StatusGone {
		t.Fatalf("HEAD of a spent file: %d", r.status)
	}
	if l := left("a.txt"); l != float64(0) {
		t.Fatalf("downloads_left = %v, want 0", l)
	}

	// The archive takes a copy of each file in it and leaves spent files out.
	r = a.do("GET", "/api/v1/links/"+link+"/archive", "", nil)
	expect(t, r, http.StatusOK)
	zr, err := zip.NewReader(bytes.NewReader(r.body), int64(len(r.body)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 1 || zr.File[0].Name != "b.txt" {
		t.Fatalf("archive holds %d files, want b.txt alone", len(zr.File))
	}
	expect(t, a.do("GET", bURL, "", nil), http.StatusOK)
	// Every file spent: the whole link is dead, like a revoked one.
	for _, path := range []string{"/api/v1/links/" + link, "/api/v1/links/" + link + "/archive", bURL} {
		expect(t, a.do("GET", path, "", nil), http.StatusGone)
	}
	// The owner sees the counts (answers from byte 0: a range 0-2 and a GET of a.txt;
	// the archive and a GET of b.txt), the package stays active, and a higher limit
	// revives it.
	d := a.do("GET", "/api/v1/packages/"+id, token, nil).json(t)
	if d["state"] != "active" {
		t.Fatalf("state = %v", d["state"])
	}
	for _, f := range d["files"].([]any) {
		if f.(map[string]any)["download_count"] != float64(2) {
			t.Fatalf("owner's view: %v", f)
		}
	}
	expect(t, a.do("PATCH", "/api/v1/packages/"+id, token, map[string]any{"max_downloads": 3}), http.StatusOK)
	expect(t, a.do("GET", bURL, "", nil), http.StatusOK)
	expect(t, a.do("GET", bURL, "", nil), http.StatusGone)
	// Without a limit nothing is refused, and downloads are still counted.
	expect(t, a.do("PATCH", "/api/v1/packages/"+id, token, map[string]any{"max_downloads": nil}), http.StatusOK)
	expect(t, a.do("GET", bURL, "", nil), http.StatusOK)
	if f := a.linkFiles(link)["b.txt"]; f["downloads_left"] != nil || f["download_count"] != float64(4) {
		t.Fatalf("without a limit: %v", f)
	}
	// What was taken without a limit counts when one is set again: 4 copies of b.txt.
	expect(t, a.do("PATCH", "/api/v1/packages/"+id, token, map[string]any{"max_downloads": 4}), http.StatusOK)
	expect(t, a.do("GET", bURL, "", nil), http.StatusGone)
}

// TestRangeGamesAgainstTheLimit plays the attacks with max_downloads = 1: no
// combination of Range (suffix, multi-range, leading zeros), If-Range and HEAD gets a
// second copy of the file, and a broken download can still be resumed with Range.
func TestRangeGamesAgainstTheLimit(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	content := bytes.Repeat([]byte("0123456789"), 10_000) // 100,000 bytes
	shared := func() (string, string) {
		p := a.createPackage(token, map[string]any{"title": "Limited", "recipient_email": "r@example.com", "max_downloads": 1})
		id := p["id"].(string)
		expect(t, a.upload("/api/v1/packages/"+id+"/files", token, "f.bin", content), http.StatusCreated)
		fin := a.do("POST", "/api/v1/packages/"+id+"/finalize", token, nil)
		expect(t, fin, http.StatusOK)
		link := linkToken(t, fin.json(t)["magic_link"])
		return link, a.linkFiles(link)["f.bin"]["download_url"].(string)
	}
	// copies counts the whole copies' worth of bytes a sequence of requests got.
	play := func(t *testing.T, url string, headers ...[]string) (statuses []int, got int) {
		for _, h := range headers {
			r := a.do("GET", url, "", nil, h...)
			statuses = append(statuses, r.status)
			if r.status == http.StatusOK || r.status == http.StatusPartialContent {
				got += len(r.body)
			}
		}
		return statuses, got
	}
	suffix := []string{"Range", "bytes=-999999999"}
	for _, c := range []struct {
		name    string
		headers [][]string
		want    []int
	}{
		{"suffix ×4 then a plain GET", [][]string{suffix, suffix, suffix, suffix, nil}, []int{206, 410, 410, 410, 410}},
		{"bytes=00- then a plain GET", [][]string{{"Range", "bytes=00-"}, {"Range", "bytes=00-"}, nil}, []int{206, 410, 410}},
		{"bytes=1-,0- (the whole file, taken) then a plain GET", [][]string{{"Range", "bytes=1-,0-"}, {"Range", "bytes=1-,0-"}, nil}, []int{200, 410, 410}},
		{"a stale If-Range (the whole file) then ranges", [][]string{{"Range", "bytes=50000-", "If-Range", `"stale"`}, {"Range", "bytes=0-0"}}, []int{200, 410}},
		{"halves then a byte more", [][]string{{"Range", "bytes=0-49999"}, {"Range", "bytes=50000-"}, {"Range", "bytes=-1"}}, []int{206, 206, 410}},
		{"a range over what is left", [][]string{{"Range", "bytes=0-89999"}, {"Range", "bytes=0-10000"}, {"Range", "bytes=90000-"}}, []int{206, 410, 206}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, url := shared()
			expect(t, a.do("HEAD", url, "", nil, "Range", "bytes=-5"), http.StatusPartialContent)
			statuses, got := play(t, url, c.headers...)
			if !slices.Equal(statuses, c.want) {
				t.Fatalf("statuses %v, want %v", statuses, c.want)
			}
			if got > len(content) {
				t.Fatalf("got %d bytes of a %d-byte file with max_downloads 1", got, len(content))
			}
			if r := a.do("HEAD", url, "", nil); r.status != http.StatusGone {
				t.Fatalf("HEAD after the budget is spent: %d", r.status)
			}
		})
	}
}

// cutWhen starts a GET of path through a connection with a small receive buffer (so
// the gateway cannot get far ahead of what is read), reads the answer until done says
// so of the body received, then resets the connection, as the client did. It
// returns the body received.
func cutWhen(t *testing.T, a *testAPI, path string, done func(body []byte) bool) []byte {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(a.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	tcp := conn.(*net.TCPConn)
	_ = tcp.SetReadBuffer(16 << 10)
	defer func() {
		_ = tcp.SetLinger(0)
		tcp.Close()
	}()
	if _, err := conn.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("the answer ended before the cut: %v (%d bytes)", err, len(got))
		}
		head, body, ok := bytes.Cut(got, []byte("\r\n\r\n"))
		if !ok {
			continue
		}
		if !bytes.HasPrefix(head, []byte("HTTP/1.1 200")) {
			t.Fatalf("answer %.100q", head)
		}
		if done(body) {
			return body
		}
	}
}

// TestConcurrentDownloadsAtLimit: many downloads at once never go past the limit; the
// count is taken by one conditional UPDATE per download.
func TestConcurrentDownloadsAtLimit(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	_, link := a.sharedPackage(token, map[string]any{"max_downloads": 3}, "a.txt", "b.txt")
	url := a.linkFiles(link)["a.txt"]["download_url"].(string)
	const n = 16
	var wg sync.WaitGroup
	statuses := make(chan int, 2*n)
	for range n {
		wg.Go(func() { statuses <- a.do("GET", url, "", nil).status })
		wg.Go(func() { statuses <- a.do("GET", "/api/v1/links/"+link+"/archive", "", nil).status })
	}
	wg.Wait()
	close(statuses)
	got := map[int]int{}
	for s := range statuses {
		got[s]++
	}
	if got[http.StatusOK]+got[http.StatusGone] != 2*n {
		t.Fatalf("statuses %v", got)
	}
	var a1, b1 int
	if err := a.pool.QueryRow(context.Background(), `SELECT
		(SELECT download_count FROM files WHERE filename = 'a.txt'), (SELECT download_count FROM files WHERE filename = 'b.txt')`).Scan(&a1, &b1); err != nil {
		t.Fatal(err)
	}
	if a1 != 3 || b1 != 3 {
		t.Fatalf("download counts a=%d b=%d, want 3 and 3 (never past the limit)", a1, b1)
	}
	var over int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM link_budgets b JOIN files f ON f.id = b.file_id
		WHERE b.taken > 3 * f.size`).Scan(&over); err != nil || over != 0 {
		t.Fatalf("%d budgets taken past 3 copies (%v)", over, err)
	}
	// Each 200 took a count of a.txt (file downloads, archives with a.txt) or b.txt
	// (archives without it): 3 + 3 counts, at least 3 and at most 6 answers of 200.
	if got[http.StatusOK] < 3 || got[http.StatusOK] > 6 {
		t.Fatalf("%d downloads succeeded, want 3 to 6", got[http.StatusOK])
	}
}

func TestUpdatePackage(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, defaultConfig())
	_, token := a.user("owner@example.com", app.RoleRegular)
	_, otherToken := a.user("other@example.com", app.RoleRegular)
	_, adminToken := a.user("admin@example.com", app.RoleAdmin)
	p := a.createPackage(token, map[string]any{"title": "Draft", "recipient_email": "r@example.com"})
	id := p["id"].(string)
	path := "/api/v1/packages/" + id

	future := time.Now().Add(30 * 24 * time.Hour).UTC().Truncate(time.Second)
	r := a.do("PATCH", path, token, map[string]any{
		"title": "Edited", "note": "a note", "recipient_name": "Rita", "expires_at": future.Format(time.RFC3339),
		"password": "secret words", "max_downloads": 5, "notify_owner": false,
	})
	expect(t, r, http.StatusOK)
	got := r.json(t)
	want := map[string]any{"title": "Edited", "note": "a note", "recipient_name": "Rita", "password_protected": true,
		"max_downloads": float64(5), "notify_owner": false, "expires_at": future.Format(time.RFC3339)}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got["password"]; ok {
		t.Fatal("the password came back")
	}
	// Absent fields stay; the change is audited.
	expect(t, a.do("PATCH", path, token, map[string]any{"title": "Again"}), http.StatusOK)
	d := a.do("GET", path, token, nil).json(t)
	if d["note"] != "a note" || d["max_downloads"] != float64(5) || d["password_protected"] != true {
		t.Fatalf("absent fields changed: %v", d)
	}
	if n := count(a.auditActions(id), "package.update"); n != 2 {
		t.Fatalf("audited edits = %d", n)
	}

	for name, body := range map[string]any{
		"past expiry":         map[string]any{"expires_at": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)},
		"expiry too far":      map[string]any{"expires_at": time.Now().Add(91 * 24 * time.Hour).UTC().Format(time.RFC3339)},
		"expiry not RFC 3339": map[string]any{"expires_at": "tomorrow"},
		"empty title":         map[string]any{"title": " "},
		"long note":           map[string]any{"note": strings.Repeat("n", 2001)},
		"short password":      map[string]any{"password": "short"},
		"zero downloads":      map[string]any{"max_downloads": 0},
		"downloads not int":   map[string]any{"max_downloads": "many"},
		"password not text":   map[string]any{"password": true},
		"not an object":       "[1]",
	} {
		if r := a.do("PATCH", path, token, body); r.status != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d, want 422: %s", name, r.status, r.body)
		} else {
			expect(t, r, http.StatusUnprocessableEntity)
		}
	}
	expect(t, a.do("PATCH", path, otherToken, map[string]any{"title": "Mine"}), http.StatusForbidden)
	expect(t, a.do("PATCH", "/api/v1/packages/00000000-0000-0000-0000-000000000000", token, map[string]any{"title": "X"}), http.StatusNotFound)
	expect(t, a.do("PATCH", path, "", map[string]any{"title": "X"}), http.StatusUnauthorized)
	expect(t, a.do("PATCH", path, adminToken, map[string]any{"title": "By the admin"}), http.StatusOK)

	// Active packages may be edited; revoked and expired ones not (409 naming the state).
	expect(t, a.upload(path+"/files", token, "a.txt", []byte("a")), http.StatusCreated)
	expect(t, a.do("POST", path+"/finalize", token, nil), http.StatusOK)
	expect(t, a.do("PATCH", path, token, map[string]any{"max_downloads": 1}), http.StatusOK)
	expect(t, a.do("POST", path+"/revoke", token, nil), http.StatusOK)
	r = a.do("PATCH", path, token, map[string]any{"title": "Late"})
	expect(t, r, http.StatusConflict)
	if !strings.Contains(string(r.body), "revoked") {
		t.Fatalf("409 detail does not name the state: %s", r.body)
	}
}

// TestBrokenDownloadGivesBackWhatItDidNotSend: an answer cut midway gives back to the
// file's budget what it did not send, so the download can be resumed with Range; an
// archive cut once its last entry has started keeps the entries it sent whole taken.
func TestBrokenDownloadGivesBackWhatItDidNotSend(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.MaxFileSize = 64 << 20
	a := newTestAPI(t, cfg)
	_, token := a.user("owner@example.com", app.RoleRegular)
	p := a.createPackage(token, map[string]any{"title": "Big", "recipient_email": "r@example.com", "max_downloads": 2})
	id := p["id"].(string)
	small := bytes.Repeat([]byte("small "), 5_000) // 30,000 bytes, first in the archive
	big := bytes.Repeat([]byte("0123456789abcdef"), 2<<20)
	expect(t, a.upload("/api/v1/packages/"+id+"/files", token, "small.txt", small), http.StatusCreated)
	expect(t, a.upload("/api/v1/packages/"+id+"/files", token, "big.bin", big), http.StatusCreated)
	fin := a.do("POST", "/api/v1/packages/"+id+"/finalize", token, nil)
	expect(t, fin, http.StatusOK)
	link := linkToken(t, fin.json(t)["magic_link"])
	files := a.linkFiles(link)
	smallURL, bigURL := files["small.txt"]["download_url"].(string), files["big.bin"]["download_url"].(string)
	taken := func(name string) int64 {
		var n int64
		if err := a.pool.QueryRow(context.Background(), `SELECT coalesce(sum(b.taken), 0)::bigint FROM files f
			LEFT JOIN link_budgets b ON b.file_id = f.id WHERE f.package_id = $1 AND f.filename = $2`, id, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The archive read until big.bin's entry has started, then reset: small.txt went
	// out whole and stays taken; big.bin gives back what did not go out.
	cutWhen(t, a, "/api/v1/links/"+link+"/archive", func(body []byte) bool {
		i := bytes.Index(body, []byte("big.bin"))
		return i >= 0 && len(body) > i+16<<10
	})
	servicetest.WaitFor(t, 20*time.Second, "the cut archive's unsent bytes of big.bin given back", func() bool {
		return taken("big.bin") < int64(len(big))/2
	})
	if n := taken("small.txt"); n != int64(len(small)) {
		t.Fatalf("small.txt, sent whole before the cut: %d bytes taken, want %d", n, len(small))
	}
	if l := a.linkFiles(link)["small.txt"]["downloads_left"]; l != float64(1) {
		t.Fatalf("small.txt downloads_left = %v, want 1", l)
	}
	expect(t, a.do("GET", smallURL, "", nil), http.StatusOK)
	expect(t, a.do("GET", smallURL, "", nil, "Range", "bytes=-1"), http.StatusGone)

	// A download of big.bin cut after 256 KiB gives back what did not go out, and the
	// rest comes with Range.
	before := taken("big.bin")
	got := cutWhen(t, a, bigURL, func(body []byte) bool { return len(body) >= 256<<10 })
	servicetest.WaitFor(t, 20*time.Second, "the cut download's unsent bytes given back", func() bool {
		return taken("big.bin")-before < int64(len(big))/2
	})
	if taken("big.bin")-before < int64(len(got)) {
		t.Fatalf("%d bytes taken for a cut download that delivered %d", taken("big.bin")-before, len(got))
	}
	r := a.do("GET", bigURL, "", nil, "Range", "bytes="+strconv.Itoa(len(got))+"-")
	expect(t, r, http.StatusPartialContent)
	if !bytes.Equal(append(got, r.body...), big) {
		t.Fatalf("the resumed download is not the file (%d + %d bytes)", len(got), len(r.body))
	}
	if n := taken("big.bin"); n > 2*int64(len(big)) {
		t.Fatalf("%d bytes taken, over the budget of %d", n, 2*len(big))
	}
}

// TestUnlockUsesTheBoundedHasher: link passwords go through the gateway's one password
// hasher: with its slot taken, unlock answers 503 with Retry-After (not counted as a
// wrong password), and a free slot lets it through.
func TestUnlockUsesTheBoundedHasher(t *testing.T) {
	t.Parallel()
	// A wait far shorter than one argon2id run (tens of ms): an unlock that finds the
	// slot taken is answered 503 unless the holder's run ends within that wait.
	hasher := app.NewHasher(1, time.Millisecond)
	a := newTestAPI(t, defaultConfig(), withHasher(hasher))
	_, token := a.user("owner@example.com", app.RoleRegular)
	before := hasher.Runs()
	id, link := a.sharedPackage(token, map[string]any{"password": "bounded one"}, "a.txt")
	if hasher.Runs() != before+1 {
		t.Fatalf("creating a protected package ran the hasher %d times, want 1", hasher.Runs()-before)
	}
	// Hold the one slot with a slow verification of our own.
	var wg sync.WaitGroup
	hold := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-hold:
				return
			default:
				_, _ = hasher.Verify(context.Background(), "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U", "x")
			}
		}
	})
	busy := 0
	for range 20 {
		r := a.unlock(link, "bounded one")
		if r.status == http.StatusServiceUnavailable {
			expect(t, r, http.StatusServiceUnavailable)
			if r.header.Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
			busy++
		} else if r.status != http.StatusOK {
			t.Fatalf("unlock while busy: %d %s", r.status, r.body)
		}
	}
	close(hold)
	wg.Wait()
	if busy == 0 {
		t.Fatal("no unlock found the hasher busy")
	}
	if n := count(a.auditActions(id), "link.unlock_failed"); n != 0 {
		t.Fatalf("busy answers audited as wrong passwords: %d", n)
	}
	// The 503s were not counted as wrong passwords: the link is not throttled.
	expect(t, a.unlock(link, "bounded one"), http.StatusOK)
	var failures int
	if err := a.pool.QueryRow(context.Background(), "SELECT count(*) FROM link_unlock_failures").Scan(&failures); err != nil || failures != 0 {
		t.Fatalf("unlock attempts left counted: %d %v", failures, err)
	}
}
