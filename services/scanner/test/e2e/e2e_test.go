// Package e2e runs the real scanner binary beside the real gateway, against real
// PostgreSQL, a private NATS JetStream server, MinIO and a private clamd (Debian's, with
// the EICAR test signature), and checks what recipients and owners see: the files' scan
// fields, what the link serves, what the archive holds, infected objects gone, and one
// verdict (audit entry, package.file_infected, owner notification) per file, also when
// clamd is down for a while and when a scanner is killed mid-file.
package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
)

// bins are the binaries built once for the package's tests.
var bins map[string]string

func TestMain(m *testing.M) {
	servicetest.RunWithBinaries(m, &bins, map[string]string{
		"gateway":  "../../../gateway/cmd/gateway",
		"shipctl":  "../../../gateway/cmd/shipctl",
		"scanner":  "../../cmd/scanner",
		"webhooks": "../../../webhooks/cmd/webhooks",
	})
}

// system is a gateway with its database, bucket, NATS and clamd, and an owner's client.
type system struct {
	t      *testing.T
	a      servicetest.Client
	common []string
	db     *pgxpool.Pool
	bucket *storage.Store
	clamd  *servicetest.Clamd
	js     jetstream.JetStream
}

// newSystem starts clamd and the gateway in scan mode mode (no scanner yet).
func newSystem(t *testing.T, mode string) *system {
	t.Helper()
	return newSystemWith(t, mode, clamdLimits)
}

// newSystemWith is newSystem with clamd's size limits (clamd.conf lines).
func newSystemWith(t *testing.T, mode, limits string) *system {
	t.Helper()
	_, natsURL := servicetest.StartNATS(t)
	bucket := servicetest.Bucket(t)
	var s3 storage.Config
	if err := config.Load(&s3); err != nil {
		t.Fatal(err)
	}
	// An empty database: the gateway and shipctl apply the migrations themselves.
	dbURL := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	cd := startClamd(t, limits)
	common := []string{
		"SHIPFILE_S3_ENDPOINT=" + s3.Endpoint, "SHIPFILE_S3_ACCESS_KEY=" + s3.AccessKey,
		"SHIPFILE_S3_SECRET_KEY=" + s3.SecretKey, "SHIPFILE_S3_BUCKET=" + bucket.Bucket,
		"SHIPFILE_DATABASE_URL=" + dbURL, "SHIPFILE_NATS_URL=" + natsURL, "SHIPFILE_LOG_LEVEL=warn",
		"SHIPFILE_CLAMD_ADDR=" + cd.Addr, servicetest.SecretKeyEnv,
		// Webhook receivers of these tests listen on 127.0.0.1.
		"SHIPFILE_WEBHOOK_ALLOW_PRIVATE=true",
	}
	shipctl := func(args ...string) string { return servicetest.RunCommand(t, bins["shipctl"], common, args...) }
	shipctl("user", "create", "--email", "owner@example.com", "--name", "Owner", "--role", "regular")
	lines := strings.Split(strings.TrimSpace(shipctl("token", "create", "--email", "owner@example.com", "--name", "e2e")), "\n")
	a := servicetest.Client{T: t, Token: lines[len(lines)-1]}
	gwAddr, gwOps := servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	a.Base = "http://" + gwAddr
	servicetest.StartProcess(t, bins["gateway"], append(common, "SHIPFILE_HTTP_ADDR="+gwAddr, "SHIPFILE_OPS_ADDR="+gwOps,
		"SHIPFILE_PUBLIC_URL="+a.Base, "SHIPFILE_SCAN="+mode, "SHIPFILE_LINK_RATE=0"))
	servicetest.WaitReady(t, gwOps)
	pool, err := database.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &system{t: t, a: a, common: common, db: pool, bucket: bucket, clamd: cd, js: servicetest.JetStream(t, natsURL)}
}

// scannerEnv is the environment of a scanner on addr: short waits, so a dead
// instance's file and a clamd outage take seconds.
func (s *system) scannerEnv(addr string, extra ...string) []string {
	return append(append(s.common, "SHIPFILE_SCANNER_ADDR="+addr, "SHIPFILE_SCAN_ACK_WAIT=2s",
		"SHIPFILE_SCAN_RETRY_MAX=500ms"), extra...)
}

// startScanner runs a scanner until the test ends and returns its address once ready.
func (s *system) startScanner(extra ...string) string {
	s.t.Helper()
	addr := servicetest.FreeAddr(s.t)
	servicetest.StartProcess(s.t, bins["scanner"], s.scannerEnv(addr, extra...))
	servicetest.WaitReady(s.t, addr)
	return addr
}

// pkg creates a package (outbound or inbound) and returns its id.
func (s *system) pkg(direction string) string {
	s.t.Helper()
	p := s.a.Must("POST", "/api/v1/packages", map[string]any{"title": "Scan me", "recipient_email": "bob@example.com", "direction": direction}, http.StatusCreated)
	return p["id"].(string)
}

// finalize finalizes package id and returns its link's token.
func (s *system) finalize(id string) string {
	s.t.Helper()
	fin := s.a.Must("POST", "/api/v1/packages/"+id+"/finalize", nil, http.StatusOK)
	link := fin["magic_link"].(string)
	return link[strings.LastIndex(link, "/")+1:]
}

// file returns the file record fileID of package id (owner's view).
func (s *system) file(id, fileID string) map[string]any {
	s.t.Helper()
	p := s.a.Must("GET", "/api/v1/packages/"+id, nil, http.StatusOK)
	for _, f := range p["files"].([]any) {
		if m := f.(map[string]any); m["id"] == fileID {
			return m
		}
	}
	s.t.Fatalf("file %s not in package %s", fileID, id)
	return nil
}

// waitScan waits until file fileID of package id is no longer pending and returns it.
func (s *system) waitScan(id, fileID string, within time.Duration) map[string]any {
	s.t.Helper()
	var f map[string]any
	servicetest.WaitFor(s.t, within, "file "+fileID+" scanned", func() bool {
		f = s.file(id, fileID)
		return f["scan"] != "pending"
	})
	return f
}

// linkGet fetches a link route without credentials; it returns the status, the
// Retry-After and Shipfile-Archive-Omitted headers and the body.
func (s *system) linkGet(path string) (int, http.Header, []byte) {
	s.t.Helper()
	resp, err := servicetest.HTTPClient(s.t).Get(s.a.Base + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func (s *system) count(q string, args ...any) int {
	s.t.Helper()
	var n int
	if err := s.db.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		s.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// objectKey is the object of file fileID.
func (s *system) objectKey(fileID string) string {
	s.t.Helper()
	var key string
	if err := s.db.QueryRow(context.Background(), `SELECT object_key FROM files WHERE id = $1`, fileID).Scan(&key); err != nil {
		s.t.Fatal(err)
	}
	return key
}

func (s *system) objectExists(key string) bool {
	s.t.Helper()
	_, err := s.bucket.Client.StatObject(context.Background(), s.bucket.Bucket, key, minio.StatObjectOptions{})
	if err == nil {
		return true
	}
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return false
	}
	s.t.Fatalf("stat %s: %v", key, err)
	return false
}

// infectedOnce checks the effects of one infected verdict of fileID: the signature
// in the audit log, one package.file_infected on the events stream, one owner
// notification.
func (s *system) infectedOnce(fileID string) {
	s.t.Helper()
	if n := s.count(`SELECT count(*) FROM audit_log WHERE action = 'file.infected' AND file_id = $1 AND actor = 'system' AND detail LIKE '%Eicar-Test-Signature%'`, fileID); n != 1 {
		s.t.Errorf("%d audit entries naming the signature, want 1", n)
	}
	var n int
	servicetest.WaitFor(s.t, 10*time.Second, "the file's package.file_infected on the stream", func() bool {
		n = s.infectedEvents(fileID)
		return n > 0
	})
	if n != 1 {
		s.t.Errorf("%d package.file_infected events of the file, want 1", n)
	}
	if n := s.count(`SELECT count(*) FROM owner_notifications WHERE kind = 'infected' AND file_id = $1`, fileID); n != 1 {
		s.t.Errorf("%d owner notifications, want 1", n)
	}
}

// infectedEvents counts the package.file_infected events of fileID on the events
// stream (its committed events are published by the scanner's relay, which then deletes
// their outbox rows).
func (s *system) infectedEvents(fileID string) int {
	s.t.Helper()
	ctx := context.Background()
	stream, err := s.js.Stream(ctx, events.StreamEvents)
	if err != nil {
		return 0 // not created yet
	}
	info, err := stream.Info(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	n := 0
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			s.t.Fatalf("events stream, message %d: %v", seq, err)
		}
		if m.Subject == events.Subject(events.TypePackageFileInfected) && bytes.Contains(m.Data, []byte(fileID)) {
			n++
		}
	}
	return n
}

// withEICAR is clean bytes with the EICAR test file in their middle.
func withEICAR(n int) []byte {
	b := bytes.Repeat([]byte("clean text. "), n)
	return append(append(b[:len(b)/2:len(b)/2], eicar...), b[len(b)/2:]...)
}

// TestEICARIsFlaggedNeverServedAndRemoved checks docs/SCANNING.md's block mode: an
// owner's EICAR file and a clean one; before the scan the link answers 409 with
// Retry-After for each and the archive leaves both out, saying so; after it, the clean
// file is served and alone in the archive, the EICAR file is infected with its
// signature, answers 403 and its object is gone, with one audit entry, one event and
// one owner notification. A recipient's EICAR upload through an inbound link is flagged
// and removed the same way.
func TestEICARIsFlaggedNeverServedAndRemoved(t *testing.T) {
	s := newSystem(t, "block")
	id := s.pkg("outbound")
	bad := s.a.Upload("/api/v1/packages/"+id+"/files", "invoice.pdf", withEICAR(1000))["id"].(string)
	cleanBytes := []byte("nothing to see here, " + rand.Text())
	good := s.a.Upload("/api/v1/packages/"+id+"/files", "notes.txt", cleanBytes)["id"].(string)
	token := s.finalize(id)
	if f := s.file(id, good); f["scan"] != "pending" || f["scanned_at"] != nil || f["scan_signature"] != nil {
		t.Fatalf("before any scanner runs: %v", f)
	}

	// No scanner yet: block mode serves nothing, and says when to ask again.
	for _, fid := range []string{bad, good} {
		status, h, body := s.linkGet("/api/v1/links/" + token + "/files/" + fid)
		if status != http.StatusConflict || h.Get("Retry-After") == "" || !strings.Contains(string(body), "checked for malware") {
			t.Fatalf("pending file through the link: %d Retry-After %q %s", status, h.Get("Retry-After"), body)
		}
	}
	if status, _, page := s.linkGet("/p/" + token); status != http.StatusOK || strings.Count(string(page), "being checked for malware") != 2 {
		t.Fatalf("recipient's page while pending: %d, says 'being checked' %d times", status, strings.Count(string(page), "being checked for malware"))
	}
	status, h, body := s.linkGet("/api/v1/links/" + token + "/archive")
	if status != http.StatusOK || h.Get("Shipfile-Archive-Omitted") != "2" {
		t.Fatalf("archive while pending: %d omitted %q", status, h.Get("Shipfile-Archive-Omitted"))
	}
	if names, comment := zipNames(t, body); len(names) != 0 || !strings.Contains(comment, "being checked for malware") {
		t.Fatalf("archive while pending: entries %v, comment %q", names, comment)
	}

	// An inbound package: a recipient uploads the EICAR file through the link.
	in := s.pkg("inbound")
	inToken := s.finalize(in)
	up := servicetest.Client{T: t, Base: s.a.Base}
	inBad := up.Upload("/api/v1/links/"+inToken+"/files", "scan.exe", eicar)["id"].(string)

	s.startScanner()
	for _, c := range []struct{ pkg, file string }{{id, bad}, {in, inBad}} {
		f := s.waitScan(c.pkg, c.file, 30*time.Second)
		sig, _ := f["scan_signature"].(string)
		if f["scan"] != "infected" || !strings.HasPrefix(sig, "Eicar-Test-Signature") || f["scanned_at"] == nil {
			t.Fatalf("EICAR file: %v", f)
		}
		servicetest.WaitFor(t, 10*time.Second, "the infected object removed", func() bool { return !s.objectExists(s.objectKey(c.file)) })
		s.infectedOnce(c.file)
	}
	if f := s.waitScan(id, good, 30*time.Second); f["scan"] != "clean" || f["scan_signature"] != nil || f["scanned_at"] == nil {
		t.Fatalf("clean file: %v", f)
	}
	if !s.objectExists(s.objectKey(good)) {
		t.Fatal("the clean file's object is gone")
	}

	status, _, body = s.linkGet("/api/v1/links/" + token + "/files/" + bad)
	if status != http.StatusForbidden || !strings.Contains(string(body), "malware") {
		t.Fatalf("infected file through the link: %d %s", status, body)
	}
	if status, m := s.a.Call("GET", "/api/v1/packages/"+id+"/files/"+bad+"/content", nil); status != http.StatusGone || !strings.Contains(m["detail"].(string), "malware") {
		t.Fatalf("owner's download of the infected file: %d %v", status, m)
	}
	status, _, body = s.linkGet("/api/v1/links/" + inToken + "/files/" + inBad)
	if status != http.StatusForbidden {
		t.Fatalf("recipient's infected file through the link: %d %s", status, body)
	}
	status, _, body = s.linkGet("/api/v1/links/" + token + "/files/" + good)
	if status != http.StatusOK || !bytes.Equal(body, cleanBytes) {
		t.Fatalf("clean file through the link: %d %q", status, body)
	}
	if _, _, page := s.linkGet("/p/" + token); !strings.Contains(string(page), "malware found: removed") || strings.Contains(string(page), "being checked") {
		t.Fatal("recipient's page after the scan does not say the file was removed, or still says 'being checked'")
	}
	status, h, body = s.linkGet("/api/v1/links/" + token + "/archive")
	names, comment := zipNames(t, body)
	if status != http.StatusOK || h.Get("Shipfile-Archive-Omitted") != "1" || len(names) != 1 || names[0] != "notes.txt" ||
		!strings.Contains(comment, "invoice.pdf (malware found)") {
		t.Fatalf("archive after the scan: %d omitted %q entries %v comment %q", status, h.Get("Shipfile-Archive-Omitted"), names, comment)
	}
}

// TestFlagModeServesPendingFiles: in flag mode a pending file is served; an infected
// one still never is.
func TestFlagModeServesPendingFiles(t *testing.T) {
	s := newSystem(t, "flag")
	id := s.pkg("outbound")
	content := []byte("pending but served")
	good := s.a.Upload("/api/v1/packages/"+id+"/files", "a.txt", content)["id"].(string)
	bad := s.a.Upload("/api/v1/packages/"+id+"/files", "b.txt", eicar)["id"].(string)
	token := s.finalize(id)
	if status, _, body := s.linkGet("/api/v1/links/" + token + "/files/" + good); status != http.StatusOK || !bytes.Equal(body, content) {
		t.Fatalf("pending file in flag mode: %d %q", status, body)
	}
	s.startScanner()
	if f := s.waitScan(id, bad, 30*time.Second); f["scan"] != "infected" {
		t.Fatalf("EICAR file: %v", f)
	}
	if status, _, _ := s.linkGet("/api/v1/links/" + token + "/files/" + bad); status != http.StatusForbidden {
		t.Fatalf("infected file in flag mode: %d", status)
	}
}

// TestClamdStoppedFilesWaitAndAreScannedWhenItIsBack: clamd is stopped; files uploaded
// meanwhile stay pending while the scanner retries, and its /readyz names clamd; once
// clamd is back the scanner is ready again and each file is scanned.
func TestClamdStoppedFilesWaitAndAreScannedWhenItIsBack(t *testing.T) {
	s := newSystem(t, "block")
	addr := s.startScanner()
	s.clamd.Stop()
	id := s.pkg("outbound")
	good := s.a.Upload("/api/v1/packages/"+id+"/files", "a.txt", []byte("fine"))["id"].(string)
	bad := s.a.Upload("/api/v1/packages/"+id+"/files", "b.txt", eicar)["id"].(string)
	servicetest.WaitFor(t, 20*time.Second, "the scanner to find clamd down", func() bool {
		return metric(t, addr, "shipfile_scanner_clamd_unavailable_total") >= 2
	})
	if f := s.file(id, good); f["scan"] != "pending" {
		t.Fatalf("scanned while clamd was down: %v", f)
	}
	if status, body := readyz(t, addr); status != http.StatusServiceUnavailable || !strings.Contains(body, `"clamd"`) {
		t.Fatalf("/readyz while clamd is down: %d %s, want 503 naming clamd", status, body)
	}
	s.clamd.Start()
	servicetest.WaitFor(t, 10*time.Second, "/readyz once clamd is back", func() bool {
		status, _ := readyz(t, addr)
		return status == http.StatusOK
	})
	if f := s.waitScan(id, good, 20*time.Second); f["scan"] != "clean" {
		t.Fatalf("after clamd came back: %v", f)
	}
	if f := s.waitScan(id, bad, 20*time.Second); f["scan"] != "infected" {
		t.Fatalf("after clamd came back: %v", f)
	}
	s.infectedOnce(bad)
}

// TestScannerKilledMidFileAnotherScansItOnce: clamd is frozen so a scanner is
// certainly mid-file (its stream blocked after the socket buffers filled); the scanner
// is SIGKILLed; a second instance gets the file once its AckWait has passed and scans it:
// one verdict, one audit entry, one event.
func TestScannerKilledMidFileAnotherScansItOnce(t *testing.T) {
	s := newSystem(t, "block")
	id := s.pkg("outbound")
	// 24 MiB of text with EICAR at the end: bigger than what the sockets buffer.
	big := append(bytes.Repeat([]byte("0123456789abcdef"), 24<<16), eicar...)
	fid := s.a.Upload("/api/v1/packages/"+id+"/files", "big.bin", big)["id"].(string)

	s.clamd.Signal(syscall.SIGSTOP)
	addr := servicetest.FreeAddr(t)
	cmd := exec.Command(bins["scanner"])
	cmd.Env = append(os.Environ(), s.scannerEnv(addr, "SHIPFILE_SCAN_CHUNK_SIZE=65536")...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("killed scanner's output:\n%s", logs.String())
		}
	})
	servicetest.WaitFor(t, 20*time.Second, "the first scanner mid-file", func() bool {
		return metric(t, addr, "shipfile_scanner_scans_in_flight") == 1
	})
	time.Sleep(300 * time.Millisecond) // let it stream into the full buffers: still mid-file
	if metric(t, addr, "shipfile_scanner_scans_in_flight") != 1 {
		t.Fatal("the first scanner finished while clamd was frozen")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	s.clamd.Signal(syscall.SIGCONT)
	if f := s.file(id, fid); f["scan"] != "pending" {
		t.Fatalf("a verdict from the killed scanner: %v", f)
	}

	second := s.startScanner()
	f := s.waitScan(id, fid, 30*time.Second)
	if f["scan"] != "infected" {
		t.Fatalf("after the second scanner: %v", f)
	}
	s.infectedOnce(fid)
	if n := metric(t, second, `shipfile_scanner_files_total{scan="infected"}`); n != 1 {
		t.Errorf("second scanner recorded %v verdicts, want 1", n)
	}
}

// TestInstancesShareTheFilesSeveralEach: two scanners with SHIPFILE_SCAN_WORKERS=2
// against a frozen clamd each hold two of four files at once (one shared durable
// consumer: every file goes to one of them); once clamd thaws each file gets one
// verdict, two recorded by each instance.
func TestInstancesShareTheFilesSeveralEach(t *testing.T) {
	s := newSystem(t, "block")
	id := s.pkg("outbound")
	var files []string
	for i := range 4 {
		name := "f" + strconv.Itoa(i) + ".txt"
		files = append(files, s.a.Upload("/api/v1/packages/"+id+"/files", name, []byte("clean "+name+" "+rand.Text()))["id"].(string))
	}
	s.clamd.Signal(syscall.SIGSTOP)
	// Thawed before the scanners are stopped (cleanups run last first).
	var addrs []string
	for range 2 {
		addr := servicetest.FreeAddr(t)
		// Not WaitReady: /readyz pings clamd, frozen here.
		servicetest.StartProcess(t, bins["scanner"], s.scannerEnv(addr, "SHIPFILE_SCAN_WORKERS=2"))
		t.Cleanup(func() { s.clamd.Signal(syscall.SIGCONT) })
		servicetest.WaitFor(t, 20*time.Second, "scanner "+addr+" to hold two files", func() bool {
			return metric(t, addr, "shipfile_scanner_scans_in_flight") == 2
		})
		addrs = append(addrs, addr)
	}
	for _, addr := range addrs {
		if n := metric(t, addr, "shipfile_scanner_scans_in_flight"); n != 2 {
			t.Fatalf("scanner %s holds %v files, want 2", addr, n)
		}
	}
	s.clamd.Signal(syscall.SIGCONT)
	for _, fid := range files {
		if f := s.waitScan(id, fid, 30*time.Second); f["scan"] != "clean" {
			t.Fatalf("file %s: %v", fid, f)
		}
	}
	for _, addr := range addrs {
		servicetest.WaitFor(t, 10*time.Second, "scanner "+addr+"'s verdicts", func() bool {
			return metric(t, addr, `shipfile_scanner_files_total{scan="clean"}`) == 2
		})
	}
}

// hookRequest is one request a webhook receiver got.
type hookRequest struct {
	header http.Header
	body   []byte
}

// hookReceiver records the requests of each hook (the URL path names it).
type hookReceiver struct {
	mu  sync.Mutex
	got map[string][]hookRequest
}

func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.got[strings.TrimPrefix(req.URL.Path, "/")] = append(r.got[strings.TrimPrefix(req.URL.Path, "/")], hookRequest{req.Header.Clone(), body})
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// of returns hook's requests of event type typ.
func (r *hookReceiver) of(hook, typ string) []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []hookRequest
	for _, q := range r.got[hook] {
		if q.header.Get("X-Service-Event") == typ {
			out = append(out, q)
		}
	}
	return out
}

// TestInfectedFileReachesWebhooks: the scanner's package.file_infected goes through the
// real dispatcher to the webhook that chose it and to one created with the default
// selection (all events), never to one that chose another event; its body is the
// package head, file_id, filename and signature, signed like every other delivery
// (X-Service-Signature and Standard Webhooks).
func TestInfectedFileReachesWebhooks(t *testing.T) {
	s := newSystem(t, "block")
	shipctl := func(args ...string) string { return servicetest.RunCommand(t, bins["shipctl"], s.common, args...) }
	shipctl("user", "create", "--email", "admin@example.com", "--name", "Admin", "--role", "admin")
	lines := strings.Split(strings.TrimSpace(shipctl("token", "create", "--email", "admin@example.com", "--name", "e2e")), "\n")
	admin := servicetest.Client{T: t, Base: s.a.Base, Token: lines[len(lines)-1]}
	rcv := &hookReceiver{got: map[string][]hookRequest{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	secrets := map[string]string{}
	for hook, body := range map[string]map[string]any{
		"all":    {"url": srv.URL + "/all"},
		"chosen": {"url": srv.URL + "/chosen", "events": []string{"package.file_infected"}},
		"other":  {"url": srv.URL + "/other", "events": []string{"package.created", "package.file_uploaded"}},
	} {
		secrets[hook] = admin.Must("POST", "/api/v1/admin/webhooks", body, http.StatusCreated)["secret"].(string)
	}
	hooksAddr := servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["webhooks"], append(s.common, "SHIPFILE_WEBHOOKS_ADDR="+hooksAddr))
	servicetest.WaitReady(t, hooksAddr)

	id := s.pkg("outbound")
	fid := s.a.Upload("/api/v1/packages/"+id+"/files", "invoice.pdf", withEICAR(10))["id"].(string)
	s.startScanner()
	f := s.waitScan(id, fid, 30*time.Second)
	if f["scan"] != "infected" {
		t.Fatalf("EICAR file: %v", f)
	}
	servicetest.WaitFor(t, 30*time.Second, "package.file_infected at the hooks that chose it", func() bool {
		return len(rcv.of("all", "package.file_infected")) > 0 && len(rcv.of("chosen", "package.file_infected")) > 0
	})
	// Other deliveries of the package reach "other" meanwhile: once it has its
	// package.file_uploaded, a package.file_infected for it would have come too.
	servicetest.WaitFor(t, 30*time.Second, "package.file_uploaded at the other hook", func() bool {
		return len(rcv.of("other", "package.file_uploaded")) > 0
	})
	time.Sleep(time.Second)
	if n := len(rcv.of("other", "package.file_infected")); n != 0 {
		t.Errorf("the hook that chose other events got %d package.file_infected", n)
	}
	for _, hook := range []string{"all", "chosen"} {
		got := rcv.of(hook, "package.file_infected")
		if len(got) != 1 {
			t.Fatalf("%s: %d package.file_infected deliveries, want 1", hook, len(got))
		}
		q, secret := got[0], secrets[hook]
		var body map[string]any
		if err := json.Unmarshal(q.body, &body); err != nil {
			t.Fatalf("%s: body %s: %v", hook, q.body, err)
		}
		sig, _ := body["signature"].(string)
		if body["event"] != "package.file_infected" || body["package_id"] != id || body["file_id"] != fid ||
			body["filename"] != "invoice.pdf" || !strings.HasPrefix(sig, "Eicar-Test-Signature") ||
			body["title"] != "Scan me" || body["recipient_email"] != "bob@example.com" {
			t.Errorf("%s: body %s", hook, q.body)
		}
		m := hmac.New(sha256.New, []byte(secret))
		m.Write(q.body)
		if want := "sha256=" + hex.EncodeToString(m.Sum(nil)); q.header.Get("X-Service-Signature") != want {
			t.Errorf("%s: X-Service-Signature %q, want %q", hook, q.header.Get("X-Service-Signature"), want)
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			t.Fatal(err)
		}
		m = hmac.New(sha256.New, key)
		m.Write([]byte(q.header.Get("webhook-id") + "." + q.header.Get("webhook-timestamp") + "."))
		m.Write(q.body)
		if want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)); q.header.Get("webhook-id") == "" ||
			!slices.Contains(strings.Fields(q.header.Get("webhook-signature")), want) {
			t.Errorf("%s: webhook-signature %q (id %q, timestamp %q), want %q among them", hook,
				q.header.Get("webhook-signature"), q.header.Get("webhook-id"), q.header.Get("webhook-timestamp"), want)
		}
	}
}

// readyz answers a scanner's /readyz: its status and body.
func readyz(t testing.TB, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric reads one sample of a scanner's /metrics (0 when absent).
func metric(t testing.TB, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return 0
}

// zipNames lists a zip's entries and its comment.
func zipNames(t testing.TB, b []byte) ([]string, string) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	return names, zr.Comment
}
