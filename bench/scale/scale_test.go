//go:build scale

// Package scale runs shipfile scaled out on one machine (make test-scale): two gateways
// behind a round-robin reverse proxy, three webhook dispatchers, two mailers and two
// expiry schedulers on a three-node NATS JetStream cluster with three-replica streams.
// A burst of package lifecycles goes through the proxy while one NATS node and one
// dispatcher are killed; then every package is made overdue. At the end it asserts that
// every event reached every matching subscription, every e-mail went out once, every
// package expired once and every committed event is in the stream once, and it prints
// how the work spread over the instances (read from their /metrics).
package scale

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

var (
	bins     rig.Bins
	packages = flag.Int("packages", 300, "package lifecycles in the burst")
	clients  = flag.Int("clients", 8, "concurrent clients of the burst")
	// pace spreads the burst over several seconds, so that the instances that lose
	// their NATS node at the kill have reconnected (a few seconds) while work remains.
	pace = flag.Duration("pace", 150*time.Millisecond, "pause of each client between lifecycles")
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "shipfile-scale-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	err = rig.Run("build", os.Stderr, func(t testing.TB) {
		bins = rig.Build(t, dir, rig.BuildOptions{}, "gateway", "shipctl", "webhooks", "mailer", "expiry")
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// instance is one running service process and the metric that says how much it did.
type instance struct {
	service string
	proc    *rig.Proc
	metric  string // metric name, optionally with a {label="value"} filter
	killed  bool
	work    float64
}

func TestScaleOut(t *testing.T) {
	start := time.Now()
	cluster := servicetest.StartNATSCluster(t, 3)
	mail := rig.StartSMTP(t)
	rcv := rig.StartReceiver(t)

	// The proxy's address is the public URL, so the magic links point at it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := "http://" + ln.Addr().String()

	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: cluster.URL(), LogOutbox: true, Env: []string{
		"SHIPFILE_STREAM_REPLICAS=3",
		"SHIPFILE_SMTP_HOST=" + mail.Host,
		"SHIPFILE_SMTP_PORT=" + mail.Port,
		"SHIPFILE_RATE_LIMIT=0",
		// Every client here is one IP (the proxy's): the per-client limits are off.
		"SHIPFILE_LINK_RATE=0", "SHIPFILE_UPLOAD_MAX_PER_CLIENT=0",
		"SHIPFILE_EXPIRY_INTERVAL=250ms",
		"SHIPFILE_EXPIRY_BATCH_SIZE=5",
		"SHIPFILE_WEBHOOK_RETRY_SCHEDULE=200ms,500ms,1s,2s,2s,2s,2s",
		"SHIPFILE_WEBHOOK_TIMEOUT=5s",
		"SHIPFILE_MAIL_RETRY_SCHEDULE=200ms,500ms,1s,2s,2s,2s,2s",
	}})

	var all []*instance
	add := func(service, metric string, env ...string) *instance {
		p := rig.NewService(t, s.Bins, service, append(append([]string{}, s.Env...), env...)...)
		p.Start()
		in := &instance{service: service, proc: p, metric: metric}
		all = append(all, in)
		return in
	}
	// The first gateway creates the three-replica streams; the rest start together.
	g1 := add("gateway", "shipfile_http_requests_total", "SHIPFILE_PUBLIC_URL="+public)
	g1.proc.WaitReady(90 * time.Second)
	add("gateway", "shipfile_http_requests_total", "SHIPFILE_PUBLIC_URL="+public)
	for range 3 {
		add("webhooks", `shipfile_webhook_deliveries_total{outcome="succeeded"}`)
	}
	for range 2 {
		add("mailer", `shipfile_mailer_jobs_total{outcome="sent"}`)
	}
	for range 2 {
		add("expiry", "shipfile_expiry_packages_expired_total")
	}
	for _, in := range all {
		in.proc.WaitReady(90 * time.Second)
	}
	gateways := []*url.URL{}
	for _, in := range all {
		if in.service == "gateway" {
			u, _ := url.Parse("http://" + in.proc.Addr)
			gateways = append(gateways, u)
		}
	}
	var next atomic.Uint64
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(gateways[next.Add(1)%uint64(len(gateways))])
			r.Out.Host = r.In.Host
		},
		FlushInterval: -1,
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	api := rig.NewClient(public, s.Token)

	// Two subscriptions: every package event, and package.finalized only.
	api.MustCreateWebhook(t, rig.Webhook(rcv.URL+"/all"))
	api.MustCreateWebhook(t, rig.Webhook(rcv.URL+"/finalized", events.TypePackageFinalized))

	// The burst: create, upload, finalize (an e-mail), and revoke every third package.
	// A third of the way in, one NATS node and one dispatcher are SIGKILLed.
	n := *packages
	ids := make([]string, n)
	revoked := make([]bool, n)
	var (
		done     atomic.Int64
		failures atomic.Int64
		failMu   sync.Mutex
		failMsgs []string
		killOnce sync.Once
		wg       sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		failures.Add(1)
		failMu.Lock()
		defer failMu.Unlock()
		if len(failMsgs) < 10 {
			failMsgs = append(failMsgs, fmt.Sprintf(format, args...))
		}
	}
	work := make(chan int)
	burstStart := time.Now()
	var killedAt time.Duration
	for range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := range work {
				if done.Load() >= int64(n/3) {
					killOnce.Do(func() {
						cluster.Kill(0)
						for _, in := range all {
							if in.service == "webhooks" {
								in.proc.Kill()
								in.killed = true
								break
							}
						}
						killedAt = time.Since(burstStart)
					})
				}
				id, ok := lifecycle(ctx, api, i, i%3 == 0, fail)
				if ok {
					ids[i] = id
					revoked[i] = i%3 == 0
				}
				done.Add(1)
				time.Sleep(*pace)
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	burst := time.Since(burstStart)
	if f := failures.Load(); f > 0 {
		t.Fatalf("%d of %d lifecycles failed through the proxy; first: %v", f, n, failMsgs)
	}

	// Every mail job handled once: an e-mail to each package's own recipient, except
	// that a package revoked before its turn came gets none (the mailer sends only for
	// active packages). Checked before the packages expire, for the same reason.
	db := rig.DB(t, s.DBURL)
	ctx := context.Background()
	var handled, sent int
	if !poll(time.Minute, func() bool {
		err := db.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE state = 'sent') FROM mail_deliveries").Scan(&handled, &sent)
		return err == nil && handled == n && len(mail.Mails()) == sent
	}) {
		t.Fatalf("mail jobs handled %d of %d (%d sent); %d e-mails arrived", handled, n, sent, len(mail.Mails()))
	}
	perRecipient := map[string]int{}
	for _, m := range mail.Mails() {
		for _, to := range m.To {
			perRecipient[to]++
		}
	}
	for i := range n {
		if c := perRecipient[recipient(i)]; c > 1 || (c == 0 && !revoked[i]) {
			t.Errorf("%s got %d e-mails, want 1 (revoked: %v)", recipient(i), c, revoked[i])
		}
	}

	// Every package becomes overdue; the two expiry instances share the work.
	if _, err := db.Exec(ctx, "UPDATE packages SET expires_at = now() - interval '1 second' WHERE id = ANY($1::uuid[])", ids); err != nil {
		t.Fatal(err)
	}
	servicetest.WaitFor(t, 2*time.Minute, "every package to be expired", func() bool {
		var left int
		err := db.QueryRow(ctx, "SELECT count(*) FROM packages WHERE state <> 'expired'").Scan(&left)
		return err == nil && left == 0
	})

	// Expected deliveries: (hook, event, package).
	want := map[string]bool{}
	for i, id := range ids {
		events := []string{"package.created", "package.file_uploaded", "package.finalized"}
		if revoked[i] {
			events = append(events, "package.revoked")
		}
		events = append(events, "package.expired")
		for _, e := range events {
			want["all|"+e+"|"+id] = true
		}
		want["finalized|package.finalized|"+id] = true
	}
	var got map[string]int
	servicetest.WaitFor(t, 3*time.Minute, "every event at every matching subscription", func() bool {
		got = map[string]int{}
		for _, d := range rcv.Deliveries() {
			got[d.Hook+"|"+d.Event+"|"+d.PackageID]++
		}
		for k := range want {
			if got[k] == 0 {
				return false
			}
		}
		return true
	})
	for k := range got {
		if !want[k] {
			t.Errorf("unexpected delivery %s", k)
		}
	}
	deliveries := rig.Count(rcv.Deliveries())
	if deliveries.Conflicts != 0 {
		t.Errorf("%d deliveries of one event came with different delivery ids", deliveries.Conflicts)
	}

	// Every package expired once: one audit entry each.
	var expiredRows, twice int
	if err := db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE c <> 1) FROM (
		SELECT package_id, count(*) AS c FROM audit_log WHERE action = 'package.expired' GROUP BY package_id) x`).Scan(&expiredRows, &twice); err != nil {
		t.Fatal(err)
	}
	if expiredRows != n || twice != 0 {
		t.Errorf("package.expired audit entries: %d packages, %d not exactly once; want %d, 0", expiredRows, twice, n)
	}

	// Every committed event is in SHIPFILE_EVENTS exactly once, through the node loss.
	rig.WaitOutboxPublished(t, db, time.Minute)
	once := rig.CompareExactlyOnce(rig.OutboxMsgIDs(t, db, "shipfile.events."), rig.StreamMsgIDs(t, rig.JetStream(t, cluster.URL()), "SHIPFILE_EVENTS"))
	if !once.Ok() {
		t.Errorf("SHIPFILE_EVENTS: %+v", once)
	}

	// How the work spread.
	for _, in := range all {
		if !in.killed {
			in.work = scrape(t, in.proc.OpsURL("/metrics"), in.metric)
		}
	}
	report(t, all, n, burst, killedAt, time.Since(start), deliveries, len(mail.Mails()), once)
	// The gateways (round robin) and the dispatchers (thousands of deliveries, long
	// after the kill) must both have shared the work. The mailers' and expiry
	// schedulers' split is reported, not required: an instance whose NATS node was
	// killed reconnects within seconds, and in a short burst the other may have taken
	// every job by then.
	for _, service := range []string{"gateway", "webhooks"} {
		for _, in := range all {
			if in.service == service && !in.killed && in.work == 0 {
				t.Errorf("a %s instance did no work: the instances do not share it", service)
			}
		}
	}
}

// poll calls cond until it is true or within has passed, and says which.
func poll(within time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// recipient is package i's recipient address.
func recipient(i int) string { return fmt.Sprintf("r%04d@example.com", i) }

// lifecycle creates package i, uploads a file, finalizes it and, when revoke is set,
// revokes it. It returns the package id.
func lifecycle(ctx context.Context, api *rig.Client, i int, revoke bool, fail func(string, ...any)) (string, bool) {
	p, err := api.CreatePackage(ctx, rig.PackageFor(fmt.Sprintf("Scale %d", i), recipient(i), "R"))
	if err != nil {
		fail("create %d: %v", i, err)
		return "", false
	}
	id := p.Id.String()
	if a, err := api.Upload(ctx, id, "f.txt", strings.NewReader(strings.Repeat("x", 1000+i))); err != nil || a.Status != http.StatusCreated {
		fail("upload %d: %v %v", i, a, err)
		return "", false
	}
	if _, err := api.Finalize(ctx, id); err != nil {
		fail("finalize %d: %v", i, err)
		return "", false
	}
	if revoke {
		if err := api.Revoke(ctx, id); err != nil {
			fail("revoke %d: %v", i, err)
			return "", false
		}
	}
	return id, true
}

// scrape sums the samples of metric (name, or name{label="value"}) at url.
func scrape(t *testing.T, url, metric string) float64 {
	t.Helper()
	name, filter, _ := strings.Cut(metric, "{")
	filter = strings.TrimSuffix(filter, "}")
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("metrics %s: %v", url, err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		if filter != "" && !strings.Contains(line, filter) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// report prints how the work spread over the instances and the run's figures.
func report(t *testing.T, all []*instance, n int, burst, killedAt, total time.Duration, d rig.DeliveryCount, mails int, once rig.ExactlyOnce) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nscale-out: %d package lifecycles through 2 gateways in %s (NATS node 1 and dispatcher 1 SIGKILLed at %s); whole run %s\n",
		n, burst.Round(time.Millisecond), killedAt.Round(time.Millisecond), total.Round(time.Second))
	fmt.Fprintf(&b, "webhook requests %d (unique deliveries %d, duplicates %d); e-mails %d (packages revoked before their e-mail get none); SHIPFILE_EVENTS committed %d, lost %d, duplicated %d\n\n",
		d.Requests, d.Unique, d.Duplicates, mails, once.Committed, once.Lost, once.Duplicated)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "service\tinstance\tmetric\twork\tshare")
	totals := map[string]float64{}
	for _, in := range all {
		totals[in.service] += in.work
	}
	idx := map[string]int{}
	sorted := append([]*instance(nil), all...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].service < sorted[j].service })
	for _, in := range sorted {
		idx[in.service]++
		share, work := "-", "killed"
		if !in.killed {
			work = strconv.FormatFloat(in.work, 'f', 0, 64)
			if totals[in.service] > 0 {
				share = fmt.Sprintf("%.0f%%", 100*in.work/totals[in.service])
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", in.service, idx[in.service], in.metric, work, share)
	}
	tw.Flush()
	t.Log(b.String())
	if path := os.Getenv("SHIPFILE_SCALE_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}
