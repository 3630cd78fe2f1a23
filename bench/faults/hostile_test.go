//go:build faults

package faults

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/textproto"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// The hostile-client scenarios (docs/API.md, "Hostile clients"): one client on loopback,
// against the real gateway binary with its default limits except where a scenario
// names one. Memory figures are peaks measured in the run: VmHWM after clear_refs 5
// at the start of the scenario, next to the idle VmRSS.

// memory is a gateway's resident memory: idle before a scenario, its peak during.
type memory struct {
	pid        int
	idle, peak int64 // KiB
}

func startMemory(t *testing.T, g *rig.Proc) *memory {
	t.Helper()
	m := &memory{pid: g.Pid()}
	var err error
	if m.idle, err = rig.ProcStatusKiB(m.pid, "VmRSS"); err != nil {
		t.Fatal(err)
	}
	if err := rig.ResetPeakRSS(m.pid); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *memory) readPeak(t *testing.T) {
	t.Helper()
	var err error
	if m.peak, err = rig.ProcStatusKiB(m.pid, "VmHWM"); err != nil {
		t.Fatal(err)
	}
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// statuses counts answers by status; -1 is no answer (a cut connection).
type statuses struct {
	mu sync.Mutex
	n  map[int]int
}

func (s *statuses) add(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[int]int{}
	}
	s.n[code]++
}

func (s *statuses) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	codes := make([]int, 0, len(s.n))
	for c := range s.n {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		name := fmt.Sprint(c)
		if c == -1 {
			name = "cut"
		}
		parts = append(parts, fmt.Sprintf("%s×%d", name, s.n[c]))
	}
	return strings.Join(parts, ", ")
}

func (s *statuses) count(code int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[code]
}

var csrfInput = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// TestHostileSignIns: 200 parallel wrong-password sign-ins for one address. Each is
// counted before its password is checked, so at most SHIPFILE_LOGIN_MAX_FAILURES (5)
// passwords are checked (answers 401); the rest get 429. argon2id takes 19 MiB per
// check, so the peak memory stays near idle.
func TestHostileSignIns(t *testing.T) {
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	g := s.StartGateway()
	me := s.API.Must(t, "GET", "/api/v1/me", nil, http.StatusOK)
	s.API.Must(t, "PATCH", fmt.Sprintf("/api/v1/admin/users/%.0f", me.JSON["id"]), map[string]any{"password": "the real password"}, http.StatusOK)

	// Each attacker has its own connection and sign-in form (its CSRF cookie).
	const n = 200
	type attacker struct {
		c    *http.Client
		csrf string
	}
	attackers := make([]attacker, n)
	for i := range attackers {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(s.API.Base + "/login")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := csrfInput.FindSubmatch(page)
		if m == nil {
			t.Fatalf("no CSRF field on the sign-in page (%d)", resp.StatusCode)
		}
		attackers[i] = attacker{c, string(m[1])}
	}
	mem := startMemory(t, g)
	var answers statuses
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, a := range attackers {
		wg.Go(func() {
			<-start
			resp, err := a.c.PostForm(s.API.Base+"/login", url.Values{
				"_csrf": {a.csrf}, "email": {"bench@example.com"}, "password": {fmt.Sprintf("guess number %d", i)},
			})
			if err != nil {
				answers.add(-1)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answers.add(resp.StatusCode)
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	mem.readPeak(t)

	checked := answers.count(http.StatusUnauthorized)
	record(t, "answers to 200 parallel wrong passwords", answers.String())
	record(t, "passwords checked (target ≤ SHIPFILE_LOGIN_MAX_FAILURES = 5)", checked)
	record(t, "time for all 200 answers", elapsed.Round(time.Millisecond))
	record(t, "RSS idle / peak / growth (target growth ≤ 64 MiB)", fmt.Sprintf("%s / %s / %s", mib(mem.idle), mib(mem.peak), mib(mem.peak-mem.idle)))
	if checked > 5 {
		t.Errorf("%d passwords checked, want at most 5", checked)
	}
	if answers.count(http.StatusTooManyRequests)+checked != n {
		t.Errorf("answers %s: want only 401 and 429", answers.String())
	}
	if growth := mem.peak - mem.idle; growth > 64<<10 {
		t.Errorf("peak RSS grew by %s, want at most 64 MiB", mib(growth))
	}
}

// TestHostileStalledUploads: 100 uploads (25 tokens, 4 each: the per-token limit)
// send one 5 MiB part and then nothing. With a rate window of 10 s, every one is cut
// within two windows of its stall (the gateway counts only the time it waits on a
// body, not the seconds it spends storing the 100 parts at once on this machine); nothing is stored (no object, no incomplete
// multipart upload, no file row); the memory of their part buffers is given back
// (RSS within 10 % of idle, idle being a gateway that has served uploads before).
func TestHostileStalledUploads(t *testing.T) {
	const (
		n      = 100
		window = 10 * time.Second
		part   = 5 << 20
	)
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	g := s.StartGateway("SHIPFILE_RATE_LIMIT=0", "SHIPFILE_UPLOAD_PART_SIZE="+itoa(part),
		"SHIPFILE_UPLOAD_MAX_CONCURRENT=128", "SHIPFILE_UPLOAD_MAX_PER_CLIENT=4",
		"SHIPFILE_UPLOAD_MIN_RATE=32768", "SHIPFILE_UPLOAD_RATE_WINDOW="+window.String())
	// 25 users with a token and a package each, 4 uploads each: the limits in flight
	// per token and per user (all their tokens together) are 4, so all 100 get in.
	tokens := make([]string, n/4)
	pkgs := make([]string, n/4)
	for i := range tokens {
		tokens[i] = s.UserToken(fmt.Sprintf("stall%d@example.com", i))
		pkgs[i] = rig.NewClient(s.API.Base, tokens[i]).MustCreatePackage(t, rig.PackageBody(fmt.Sprintf("stalled uploads %d", i))).Id.String()
	}
	// Idle is a gateway that has served uploads: four at once fill the pool of part
	// buffers it keeps between uploads (4 × 5 MiB, by design); they are deleted again.
	warm := s.API.MustCreatePackage(t, rig.PackageBody("warm-up")).Id.String()
	var warmUp sync.WaitGroup
	for i := range 4 {
		warmUp.Go(func() {
			if a, err := s.API.Upload(context.Background(), warm, fmt.Sprintf("warm-%d.bin", i), rig.Payload(part+1<<20, uint64(1000+i))); err != nil || a.Status != http.StatusCreated {
				t.Errorf("warm-up upload: %v %v", a, err)
			}
		})
	}
	warmUp.Wait()
	s.API.Must(t, "DELETE", "/api/v1/packages/"+warm, nil, http.StatusNoContent)
	time.Sleep(2 * time.Second)
	mem := startMemory(t, g)

	var answers statuses
	var slowest atomic.Int64 // ns from the stall to the answer
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			pr, pw := io.Pipe()
			mw := multipart.NewWriter(pw)
			stalled := make(chan time.Time, 1)
			go func() {
				h := textproto.MIMEHeader{}
				h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="stall-%d.bin"`, i))
				h.Set("Content-Type", "application/octet-stream")
				w, _ := mw.CreatePart(h)
				_, err := io.Copy(w, rig.Payload(part+64<<10, uint64(i)))
				stalled <- time.Now()
				if err == nil {
					<-release // hold the connection open, sending nothing
				}
				_ = pw.CloseWithError(io.ErrUnexpectedEOF)
			}()
			req, _ := http.NewRequest("POST", s.API.Base+"/api/v1/packages/"+pkgs[i%len(pkgs)]+"/files", pr)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			req.Header.Set("Authorization", "Bearer "+tokens[i%len(tokens)])
			resp, err := http.DefaultClient.Do(req)
			answered := time.Now()
			_ = pr.CloseWithError(io.ErrClosedPipe)
			if err != nil {
				answers.add(-1)
			} else {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				answers.add(resp.StatusCode)
			}
			select {
			case at := <-stalled:
				if d := answered.Sub(at); d > time.Duration(slowest.Load()) {
					slowest.Store(int64(d))
				}
			default: // answered before the whole part was sent
			}
		})
	}
	wg.Wait()
	close(release)
	mem.readPeak(t)

	record(t, "answers to 100 uploads stalled after one 5 MiB part", answers.String())
	record(t, "longest time from stall to cut (window 10 s; target ≤ 2 windows)", time.Duration(slowest.Load()).Round(time.Millisecond))
	if d := time.Duration(slowest.Load()); d > 2*window {
		t.Errorf("an upload was cut %s after its stall, want within %s", d, 2*window)
	}
	// Every one got in and was cut off: a 429 means a limit in flight refused it, and
	// the scenario would test fewer stalled uploads than it says.
	if answers.count(http.StatusRequestTimeout) != n {
		t.Errorf("answers %s, want 408×%d", answers.String(), n)
	}
	// Nothing is stored.
	db := rig.DB(t, s.DBURL)
	var files int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM files").Scan(&files); err != nil {
		t.Fatal(err)
	}
	servicetest.WaitFor(t, 30*time.Second, "no incomplete multipart upload", func() bool { return len(s.IncompleteUploads()) == 0 })
	objects := s.ObjectKeys()
	record(t, "file rows / objects / incomplete uploads after", triple(int64(files), int64(len(objects)), int64(len(s.IncompleteUploads()))))
	if files != 0 || len(objects) != 0 {
		t.Errorf("stalled uploads left %d file rows and objects %v", files, objects)
	}
	// The memory goes back to within 10 % of idle.
	var after int64
	backAt := time.Now()
	ok := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var err error
		if after, err = rig.ProcStatusKiB(mem.pid, "VmRSS"); err != nil {
			t.Fatal(err)
		}
		if after <= mem.idle*11/10 {
			ok = true
			break
		}
	}
	record(t, "RSS idle / peak / after (target after ≤ idle + 10 %)", fmt.Sprintf("%s / %s / %s (%.2f× idle, %s after the last cut)",
		mib(mem.idle), mib(mem.peak), mib(after), float64(after)/float64(mem.idle), time.Since(backAt).Round(100*time.Millisecond)))
	if !ok {
		t.Errorf("RSS %s is not back within 10 %% of idle %s after 60 s", mib(after), mib(mem.idle))
	}
	// The gateway still takes uploads.
	a, err := rig.NewClient(s.API.Base, tokens[0]).Upload(context.Background(), pkgs[0], "after.bin", rig.Payload(1<<20, 7))
	if err != nil || a.Status != http.StatusCreated {
		t.Fatalf("upload after the stalls: %v %v", a, err)
	}
}

// TestHostileLinkHits: 1,000 requests from one IP to a link route (unknown links, as
// a guesser sends them), 20 at a time, with the default rate of 20/s and burst 40:
// the rest get 429 with Retry-After before the link is looked up, and the admitted
// ones are counted in one audit row per IP and hour (docs/API.md, "Hostile clients"), not one
// row each.
func TestHostileLinkHits(t *testing.T) {
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	s.StartGateway("SHIPFILE_LINK_RATE=20", "SHIPFILE_LINK_BURST=40")
	var answers statuses
	var noRetryAfter atomic.Int64
	jobs := make(chan int)
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}, Timeout: 30 * time.Second}
	for range 20 {
		wg.Go(func() {
			for i := range jobs {
				resp, err := client.Get(fmt.Sprintf("%s/api/v1/links/%043d", s.API.Base, i))
				if err != nil {
					answers.add(-1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
					noRetryAfter.Add(1)
				}
				answers.add(resp.StatusCode)
			}
		})
	}
	t0 := time.Now()
	for i := range 1000 {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(t0)
	var audit, hits int
	if err := rig.DB(t, s.DBURL).QueryRow(context.Background(),
		"SELECT count(*), coalesce(sum(hits), 0) FROM audit_log WHERE action = 'link.invalid'").Scan(&audit, &hits); err != nil {
		t.Fatal(err)
	}
	record(t, "answers to 1,000 link hits from one IP", answers.String())
	record(t, "time for the 1,000", elapsed.Round(time.Millisecond))
	limit := 40 + int(elapsed.Seconds()*20) + 1
	record(t, "link lookups (allowed: 40 + 20/s × time)", fmt.Sprintf("%d (≤ %d)", answers.count(http.StatusGone), limit))
	record(t, "audit rows written (one per IP and hour), hits counted", fmt.Sprintf("%d, %d", audit, hits))
	if answers.count(http.StatusTooManyRequests) == 0 || noRetryAfter.Load() != 0 {
		t.Errorf("answers %s, %d 429 without Retry-After", answers.String(), noRetryAfter.Load())
	}
	// Two rows when the run straddles the turn of an hour.
	if answers.count(http.StatusGone) > limit || audit < 1 || audit > 2 || hits != answers.count(http.StatusGone) {
		t.Errorf("%d audit rows counting %d hits for %d link lookups, want 1 row (2 across an hour) counting them all, and at most %d lookups",
			audit, hits, answers.count(http.StatusGone), limit)
	}
}

// TestHostileHeaders: requests with a huge Content-Type, a huge User-Agent, filenames
// and titles with bidi overrides, and a next that leaves the site: each gets a 4xx or
// a safe answer, never a 500; what is stored is bounded.
func TestHostileHeaders(t *testing.T) {
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	s.StartGateway()
	pkg := s.API.MustCreatePackage(t, rig.PackageBody("hostile headers")).Id.String()
	hugeUA := strings.Repeat("Mozilla/5.0 ", 700) // 8.4 KB
	upload := func(filename, contentType string) (int, string) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="file"; filename="`+filename+`"`)
		h.Set("Content-Type", contentType)
		w, _ := mw.CreatePart(h)
		_, _ = w.Write([]byte("content"))
		_ = mw.Close()
		req, _ := http.NewRequest("POST", s.API.Base+"/api/v1/packages/"+pkg+"/files", &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+s.Token)
		req.Header.Set("User-Agent", hugeUA)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	type row struct{ what, answer string }
	var rows []row
	fail5xx := func(what string, code int, body string) {
		rows = append(rows, row{what, fmt.Sprint(code)})
		if code >= 500 || code < 0 {
			t.Errorf("%s: %d %.200s", what, code, body)
		}
	}
	code, body := upload("huge-type.txt", "text/plain; x="+strings.Repeat("a", 60<<10))
	fail5xx("part with a 60 KB Content-Type", code, body)
	if code == http.StatusCreated && !strings.Contains(body, `"content_type":"application/octet-stream"`) {
		t.Errorf("a 60 KB Content-Type was stored as more than application/octet-stream: %.300s", body)
	}
	code, body = upload("long-type.txt", "application/"+strings.Repeat("x", 7<<10))
	fail5xx("part with a 7 KB type", code, body)
	for name, fn := range map[string]string{"U+202E (RLO)": "invoice\u202Efdp.exe", "U+2066 (LRI)": "a\u2066b.txt", "U+200B": "a\u200Bb.txt"} {
		code, body = upload(fn, "text/plain")
		fail5xx("filename with "+name, code, body)
		if code != http.StatusUnprocessableEntity {
			t.Errorf("filename with %s: %d, want 422", name, code)
		}
	}
	a, err := s.API.Do(context.Background(), "POST", "/api/v1/packages", map[string]any{"title": "Invoice \u202Efdp.exe", "recipient_email": "r@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	fail5xx("package title with U+202E", a.Status, string(a.Body))
	// A huge User-Agent on a link route (audited) and on the sign-in page.
	for _, path := range []string{"/api/v1/links/" + strings.Repeat("A", 43), "/p/" + strings.Repeat("A", 43), "/login?next=/%09/evil.example"} {
		req, _ := http.NewRequest("GET", s.API.Base+path, nil)
		req.Header.Set("User-Agent", hugeUA)
		req.Header.Set("Content-Type", strings.Repeat("x", 60<<10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fail5xx("GET "+path[:min(len(path), 24)]+"… with 8 KB User-Agent, 60 KB Content-Type", resp.StatusCode, string(b))
	}
	var longestUA, longestCT int
	db := rig.DB(t, s.DBURL)
	if err := db.QueryRow(context.Background(), "SELECT coalesce(max(octet_length(user_agent)), 0) FROM audit_log").Scan(&longestUA); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(context.Background(), "SELECT coalesce(max(octet_length(content_type)), 0) FROM files").Scan(&longestCT); err != nil {
		t.Fatal(err)
	}
	var answers []string
	for _, r := range rows {
		answers = append(answers, r.what+": "+r.answer)
	}
	record(t, "answers", strings.Join(answers, "; "))
	record(t, "longest User-Agent / content_type stored (bytes; limits 512 / 127)", fmt.Sprintf("%d / %d", longestUA, longestCT))
	if longestUA > 512 || longestCT > 127 {
		t.Errorf("stored a %d-byte User-Agent or a %d-byte content_type", longestUA, longestCT)
	}
}
