package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/services/mailer/internal/app"
	"github.com/shipfile/shipfile/services/mailer/internal/store"
)

// insertPackage writes a finalized package (and its owner) and returns its id.
func insertPackage(t *testing.T, pool *pgxpool.Pool, direction string, notify bool) string {
	t.Helper()
	ctx := context.Background()
	var owner int64
	if err := pool.QueryRow(ctx, `INSERT INTO users (email, name, role) VALUES ($1, 'Owner', 'regular') RETURNING id`,
		uuid.NewString()+"@example.com").Scan(&owner); err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	if _, err := pool.Exec(ctx, `
		INSERT INTO packages (id, owner_user_id, title, recipient_email, direction, state, ttl_days, expires_at, notify_owner)
		VALUES ($1, $2, 'T', 'r@example.com', $3, 'active', 7, now() + interval '7 days', $4)`, id, owner, direction, notify); err != nil {
		t.Fatal(err)
	}
	return id
}

// annAndBob gives package pkg two recipients: Ann <r@example.com> (the first, as
// insertPackage's recipient_email) and Bob <bob@example.com>.
func annAndBob(t *testing.T, pool *pgxpool.Pool, pkg string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO recipients (id, package_id, position, email, name) VALUES
		($1, $3, 0, 'r@example.com', 'Ann'), ($2, $3, 1, 'bob@example.com', 'Bob')`, uuid.NewString(), uuid.NewString(), pkg); err != nil {
		t.Fatal(err)
	}
}

// sendOne sends the next due notification (recorded as sent) and returns it; it fails
// the test when none is due.
func sendOne(t *testing.T, s *store.Postgres) app.Notification {
	t.Helper()
	var got app.Notification
	sent, err := s.SendDue(context.Background(), func(n app.Notification) app.Outcome {
		got = n
		return app.Outcome{State: app.StateSent, Attempted: true, MessageID: "<" + uuid.NewString() + "@x>"}
	})
	if err != nil || !sent {
		t.Fatalf("SendDue: %v, %v", sent, err)
	}
	return got
}

func notifications(t *testing.T, pool *pgxpool.Pool, pkg string) (states []string, files int) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT state FROM owner_notifications WHERE package_id = $1 ORDER BY id`, pkg)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		states = append(states, s)
	}
	_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM owner_notification_files f JOIN owner_notifications n ON n.id = f.notification_id
		WHERE n.package_id = $1`, pkg).Scan(&files)
	return states, files
}

func TestNotificationState(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	s := store.New(pool)
	ctx := context.Background()

	// Downloads: one notification per outbound package with notify_owner, ever.
	out := insertPackage(t, pool, "outbound", true)
	off := insertPackage(t, pool, "outbound", false)
	for range 3 {
		for _, p := range []string{out, off} {
			if err := s.RecordDownload(ctx, p, "r@example.com"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st, _ := notifications(t, pool, out); len(st) != 1 || st[0] != "pending" {
		t.Fatalf("downloads: %v", st)
	}
	if st, _ := notifications(t, pool, off); len(st) != 0 {
		t.Fatalf("notify_owner off: %v", st)
	}

	// Uploads: one open burst; a redelivered event adds nothing; an upload to a
	// package with notify_owner off adds nothing.
	in := insertPackage(t, pool, "inbound", true)
	inOff := insertPackage(t, pool, "inbound", false)
	up := func(pkg, file string) {
		t.Helper()
		if err := s.RecordUpload(ctx, app.Upload{PackageID: pkg, FileID: file, Filename: "f", Size: 1, At: time.Now()}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	f1, f2 := uuid.NewString(), uuid.NewString()
	up(in, f1)
	up(in, f2)
	up(in, f1)
	up(inOff, uuid.NewString())
	if st, n := notifications(t, pool, in); len(st) != 1 || st[0] != "open" || n != 2 {
		t.Fatalf("burst: %v with %d files", st, n)
	}
	if st, _ := notifications(t, pool, inOff); len(st) != 0 {
		t.Fatalf("notify_owner off: %v", st)
	}
	// Not quiet yet: it stays open. Once due, it is closed; the next upload opens a new burst.
	if err := s.CloseDueBursts(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := notifications(t, pool, in); st[0] != "open" {
		t.Fatalf("closed before its quiet time: %v", st)
	}
	if _, err := pool.Exec(ctx, `UPDATE owner_notifications SET due_at = now() - interval '1 second' WHERE package_id = $1`, in); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseDueBursts(ctx); err != nil {
		t.Fatal(err)
	}
	up(in, uuid.NewString())
	if st, n := notifications(t, pool, in); len(st) != 2 || st[0] != "pending" || st[1] != "open" || n != 3 {
		t.Fatalf("after closing: %v with %d files", st, n)
	}

	// Two senders at once: each due notification is handed to one of them, once.
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				more, err := s.SendDue(ctx, func(n app.Notification) app.Outcome {
					mu.Lock()
					seen[n.ID]++
					mu.Unlock()
					time.Sleep(100 * time.Millisecond) // an SMTP conversation
					return app.Outcome{State: app.StateSent, Attempted: true, AuditAction: app.ActionSent, AuditDetail: "owner notification"}
				})
				if err != nil {
					t.Error(err)
					return
				}
				if !more {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != 2 {
		t.Fatalf("sent %v, want the download's and the closed burst's", seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("notification %d handed out %d times", id, n)
		}
	}
	if st, _ := notifications(t, pool, in); st[0] != "sent" || st[1] != "open" {
		t.Fatalf("after sending: %v", st)
	}
}

// An infected file's notification, written by the scanner with its verdict, is sent
// with the file's name and the signature, even when the owner turned notifications off.
func TestInfectedNotificationSent(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	s := store.New(pool)
	ctx := context.Background()
	pkg := insertPackage(t, pool, "inbound", false)
	if _, err := pool.Exec(ctx, `INSERT INTO owner_notifications (package_id, kind, state, due_at, file_id, filename, signature)
		VALUES ($1, 'infected', 'pending', now(), $2, 'evil.exe', 'Eicar-Test-Signature')`, pkg, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	got := sendOne(t, s)
	if got.Kind != app.NotifyInfected || got.Filename != "evil.exe" || got.Signature != "Eicar-Test-Signature" || got.NotifyOwner {
		t.Errorf("notification %+v", got)
	}
	if st, _ := notifications(t, pool, pkg); len(st) != 1 || st[0] != "sent" {
		t.Errorf("states %v, want [sent]", st)
	}
}

// TestDownloadNotificationNamesTheRecipient: on a package with several recipients
// (gateway migration 00019) the owner is told who downloaded, not the first recipient,
// and each recipient's first download is told (00024).
func TestDownloadNotificationNamesTheRecipient(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	s := store.New(pool)
	ctx := context.Background()
	pkg := insertPackage(t, pool, "outbound", true)
	annAndBob(t, pool, pkg)
	if err := s.RecordDownload(ctx, pkg, "BOB@example.com"); err != nil {
		t.Fatal(err)
	}
	got := sendOne(t, s)
	if got.RecipientName != "Bob" || got.RecipientEmail != "bob@example.com" {
		t.Fatalf("notification names %q <%s>, want Bob <bob@example.com>", got.RecipientName, got.RecipientEmail)
	}
	got.OwnerEmail = "owner@example.com"
	if e, err := app.RenderNotification(got, "https://files.example.com"); err != nil || e.Subject != "Bob downloaded T" {
		t.Fatalf("e-mail %q, %v; want the subject \"Bob downloaded T\"", e.Subject, err)
	}

	// Each recipient's first download is told once (gateway migration 00024): Ann's
	// first makes a second e-mail, Bob's and Ann's next ones nothing.
	for _, who := range []string{"r@example.com", "bob@example.com", "R@EXAMPLE.com"} {
		if err := s.RecordDownload(ctx, pkg, who); err != nil {
			t.Fatal(err)
		}
	}
	if got := sendOne(t, s); got.RecipientName != "Ann" {
		t.Fatalf("the second recipient's first download names %q, want Ann", got.RecipientName)
	}
	if st, _ := notifications(t, pool, pkg); len(st) != 2 || st[0] != "sent" || st[1] != "sent" {
		t.Errorf("notifications %v, want one sent per recipient", st)
	}
}

// TestUploadBurstsPerRecipient: on an inbound package with several recipients each
// recipient's uploads make a burst of their own (gateway migration 00023), so the
// owner's e-mail that names Bob lists Bob's files alone, not Ann's beside them.
func TestUploadBurstsPerRecipient(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	s := store.New(pool)
	ctx := context.Background()
	pkg := insertPackage(t, pool, "inbound", true)
	annAndBob(t, pool, pkg)
	up := func(email, filename string) {
		t.Helper()
		if err := s.RecordUpload(ctx, app.Upload{PackageID: pkg, FileID: uuid.NewString(), Filename: filename, Size: 1, At: time.Now(),
			RecipientEmail: email}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	up("r@example.com", "ann-1.pdf")
	up("bob@example.com", "bob-1.pdf")
	up("R@example.com", "ann-2.pdf")
	if st, n := notifications(t, pool, pkg); len(st) != 2 || st[0] != "open" || st[1] != "open" || n != 3 {
		t.Fatalf("bursts: %v with %d files, want one open burst per recipient", st, n)
	}
	if _, err := pool.Exec(ctx, `UPDATE owner_notifications SET due_at = now() - interval '1 second' WHERE package_id = $1`, pkg); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseDueBursts(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for {
		more, err := s.SendDue(ctx, func(n app.Notification) app.Outcome {
			for _, f := range n.Files {
				got[n.RecipientName] = append(got[n.RecipientName], f.Name)
			}
			return app.Outcome{State: app.StateSent, Attempted: true, MessageID: "<m@x>"}
		})
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
	}
	if len(got) != 2 || strings.Join(got["Ann"], ",") != "ann-1.pdf,ann-2.pdf" || strings.Join(got["Bob"], ",") != "bob-1.pdf" {
		t.Fatalf("the e-mails' files by the recipient they name: %v", got)
	}
}
