package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/services/webhooks/internal/signing"
)

// checkpoint is the body of an audit.checkpoint delivery.
type checkpoint struct {
	Event      string `json:"event"`
	Timestamp  string `json:"timestamp"`
	Seq        int64  `json:"seq"`
	Hash       string `json:"hash"`
	AnchorSeq  int64  `json:"anchor_seq"`
	AnchorHash string `json:"anchor_hash"`
}

var (
	hexHash     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	verifyWhole = regexp.MustCompile(`audit chain whole: (\d+) entries verified, (\d+) to (\d+)`)
)

// TestAuditCheckpointsReachAWebhook: with the gateway, the expiry service (which writes
// audit.checkpoint every SHIPFILE_AUDIT_CHECKPOINT) and a dispatcher running, a
// subscription to audit.checkpoint gets the chain's head, signed, as the database and
// `shipctl audit verify` know it, and a later head once more entries were written. A
// rewrite of the whole chain from one entry on, with every hash recomputed, passes
// verify, and the checkpoint the receiver kept still tells it apart; an entry edited
// without the hashes makes shipctl exit 1 naming it, and 0 once restored.
func TestAuditCheckpointsReachAWebhook(t *testing.T) {
	common, token, gwAddr := startGateway(t)
	dispatcher := servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["webhooks"], append(common, "SHIPFILE_WEBHOOKS_ADDR="+dispatcher,
		"SHIPFILE_WEBHOOK_RETRY_SCHEDULE=100ms,100ms,100ms,100ms,100ms,100ms,100ms", "SHIPFILE_WEBHOOK_TIMEOUT=2s"))
	servicetest.WaitReady(t, dispatcher)

	rcv := &receiver{statuses: map[string]int{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	a := servicetest.Client{T: t, Base: "http://" + gwAddr, Token: token}
	hook := a.Must("POST", "/api/v1/admin/webhooks", map[string]any{"url": srv.URL + "/audit", "events": []string{"audit.checkpoint"}}, http.StatusCreated)
	secret := hook["secret"].(string)

	// The expiry service starts after the subscription exists: its first tick writes the
	// first checkpoint.
	expiry := servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["expiry"], append(common, "SHIPFILE_EXPIRY_ADDR="+expiry,
		"SHIPFILE_EXPIRY_INTERVAL=200ms", "SHIPFILE_AUDIT_CHECKPOINT=1s"))
	servicetest.WaitReady(t, expiry)

	db := dbOf(t, common)
	ctx := context.Background()
	// checkpoints are the audit.checkpoint deliveries so far, each checked: the headers
	// and signature of docs/WEBHOOKS.md, the body's keys in order, and its head as the
	// database has it (the entry of that seq carries that hash; no anchor yet).
	checkpoints := func() []checkpoint {
		t.Helper()
		var out []checkpoint
		for _, d := range rcv.of("audit") {
			if d.event != "audit.checkpoint" {
				t.Fatalf("the audit.checkpoint subscription got %s", d.event)
			}
			if !signing.VerifyService(secret, d.body, d.headers.Get("X-Service-Signature")) {
				t.Fatalf("checkpoint %s: X-Service-Signature does not verify", d.body)
			}
			var unix int64
			fmt.Sscan(d.headers.Get("Webhook-Timestamp"), &unix)
			if !signing.VerifyStandard(secret, d.id, unix, d.body, d.headers.Get("Webhook-Signature")) {
				t.Fatalf("checkpoint %s: webhook-signature does not verify", d.body)
			}
			if k := keysInOrder(t, d.body); strings.Join(k, ",") != "event,timestamp,seq,hash,anchor_seq,anchor_hash" {
				t.Fatalf("checkpoint body keys %v", k)
			}
			var c checkpoint
			if err := json.Unmarshal(d.body, &c); err != nil {
				t.Fatal(err)
			}
			if c.Event != "audit.checkpoint" || !utcZ.MatchString(c.Timestamp) || c.Seq < 1 || !hexHash.MatchString(c.Hash) ||
				c.AnchorSeq != 0 || c.AnchorHash != strings.Repeat("0", 64) {
				t.Fatalf("checkpoint body %s", d.body)
			}
			var hash string
			if err := db.QueryRow(ctx, `SELECT hash FROM audit_log WHERE seq = $1`, c.Seq).Scan(&hash); err != nil || hash != c.Hash {
				t.Fatalf("checkpoint %d %s: the database's entry %d has hash %q (%v)", c.Seq, c.Hash, c.Seq, hash, err)
			}
			out = append(out, c)
		}
		return out
	}
	servicetest.WaitFor(t, 30*time.Second, "the first audit.checkpoint delivery", func() bool { return len(checkpoints()) >= 1 })
	first := checkpoints()[0]

	// More entries: a package's life, each step audited.
	p := a.Must("POST", "/api/v1/packages", map[string]any{"title": "Q3 report", "recipient_email": "bob@example.com"}, http.StatusCreated)
	id := p["id"].(string)
	a.Upload("/api/v1/packages/"+id+"/files", "report.pdf", []byte("%PDF-1.7 tiny"))
	a.Must("POST", "/api/v1/packages/"+id+"/finalize", nil, http.StatusOK)
	a.Must("POST", "/api/v1/packages/"+id+"/revoke", nil, http.StatusOK)
	var written int64
	if err := db.QueryRow(ctx, `SELECT seq FROM audit_chain_head`).Scan(&written); err != nil {
		t.Fatal(err)
	}
	if written <= first.Seq {
		t.Fatalf("the chain's head is %d after a package's life, the first checkpoint %d", written, first.Seq)
	}
	var later checkpoint
	servicetest.WaitFor(t, 30*time.Second, fmt.Sprintf("a checkpoint at entry %d or later", written), func() bool {
		cs := checkpoints()
		later = cs[len(cs)-1]
		return later.Seq >= written
	})

	// verify agrees: the whole chain from 1 up to (at least) the checkpoint's entry.
	out, err := shipctlVerify(common)
	m := verifyWhole.FindStringSubmatch(out)
	if err != nil || m == nil || m[2] != "1" {
		t.Fatalf("shipctl audit verify: %v %s", err, out)
	}
	var head int64
	fmt.Sscan(m[3], &head)
	if head < later.Seq {
		t.Fatalf("verify's head %d is before the checkpoint's %d", head, later.Seq)
	}

	// Someone holding the database rewrites the entry after the first checkpoint and
	// every one after it, hashes recomputed and the head moved: verify cannot tell, the
	// checkpoint of an entry at or past the rewrite can.
	stopCheckpoints(t, db)
	rewriteFrom(t, db, first.Seq+1)
	if out, err := shipctlVerify(common); err != nil || !verifyWhole.MatchString(out) {
		t.Fatalf("verify after a rewrite with every hash recomputed: %v %s", err, out)
	}
	var now, before string
	if err := db.QueryRow(ctx, `SELECT hash FROM audit_log WHERE seq = $1`, later.Seq).Scan(&now); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, `SELECT hash FROM audit_log WHERE seq = $1`, first.Seq).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if now == later.Hash || before != first.Hash {
		t.Fatalf("after the rewrite from %d: entry %d's hash %s (checkpoint %s), entry %d's %s (checkpoint %s); want only the later one to differ",
			first.Seq+1, later.Seq, now, later.Hash, first.Seq, before, first.Hash)
	}

	// An entry edited without the hashes recomputed: the binary exits 1 naming it, and
	// 0 once it is restored.
	edit := func(detail string) {
		t.Helper()
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `UPDATE audit_log SET detail = $1 WHERE seq = $2`, detail, first.Seq); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var detail string
	if err := db.QueryRow(ctx, `SELECT detail FROM audit_log WHERE seq = $1`, first.Seq).Scan(&detail); err != nil {
		t.Fatal(err)
	}
	edit(detail + " (edited)")
	out, err = shipctlVerify(common)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, fmt.Sprintf("audit entry %d changed", first.Seq)) {
		t.Fatalf("verify with entry %d edited: %v %s; want exit 1 naming it", first.Seq, err, out)
	}
	edit(detail)
	if out, err := shipctlVerify(common); err != nil || !verifyWhole.MatchString(out) {
		t.Fatalf("verify once entry %d is restored: %v %s", first.Seq, err, out)
	}
}

// dbOf opens the database of the processes' settings.
func dbOf(t *testing.T, env []string) *pgxpool.Pool {
	t.Helper()
	var url string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "SHIPFILE_DATABASE_URL="); ok {
			url = v
		}
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// shipctlVerify runs `shipctl audit verify` and returns its output and its error (an
// *exec.ExitError with code 1 when the chain is broken).
func shipctlVerify(env []string, args ...string) (string, error) {
	cmd := exec.Command(bins["shipctl"], append([]string{"audit", "verify"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() != 1 {
		return string(out), fmt.Errorf("exit %d: %w", exit.ExitCode(), err)
	}
	return string(out), err
}

// stopCheckpoints holds the expiry service's next checkpoint off for a day, so that the
// rewrite below is not followed by a checkpoint of the rewritten head.
func stopCheckpoints(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	if _, err := db.Exec(context.Background(), `UPDATE audit_checkpoints SET at = now() + interval '1 day'`); err != nil {
		t.Fatal(err)
	}
}

// rewriteFrom changes the detail of the entry from and recomputes the hash of it and
// of every entry after it, and the head, with the triggers off: what someone holding
// the database can do.
func rewriteFrom(t *testing.T, db *pgxpool.Pool, from int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, sql := range []string{
		`SET LOCAL session_replication_role = replica`,
		`LOCK TABLE audit_chain_head IN EXCLUSIVE MODE`,
		`UPDATE audit_log SET detail = 'rewritten' WHERE seq = ` + fmt.Sprint(from),
		`DO $$
		DECLARE
			r audit_log;
			prev text;
		BEGIN
			SELECT hash INTO prev FROM audit_log WHERE seq = ` + fmt.Sprint(from-1) + `;
			FOR r IN SELECT * FROM audit_log WHERE seq >= ` + fmt.Sprint(from) + ` ORDER BY seq LOOP
				r.prev_hash := prev;
				r.hash := audit_hash(r);
				UPDATE audit_log SET prev_hash = r.prev_hash, hash = r.hash WHERE id = r.id;
				prev := r.hash;
			END LOOP;
			UPDATE audit_chain_head SET hash = prev;
		END $$`,
	} {
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
