package transport_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/schematest"
	"github.com/shipfile/shipfile/services/mailer/internal/app"
	"github.com/shipfile/shipfile/services/mailer/internal/mailtest"
	"github.com/shipfile/shipfile/services/mailer/internal/store"
)

// An account notice the gateway wrote (account_notices, gateway migration 00029)
// reaches the user through a real SMTP server, once, with its own text, and the row
// and the audit log say it was sent.
func TestAccountNoticeArrives(t *testing.T) {
	t.Parallel()
	pool, _ := schematest.Pool(t)
	ctx := context.Background()
	var user int64
	if err := pool.QueryRow(ctx, `INSERT INTO users (email, name, role) VALUES ('carol@example.com', 'Carol', 'admin') RETURNING id`).Scan(&user); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO account_notices (user_id, event, detail) VALUES ($1, 'role_changed', 'admin -> regular'),
		($1, 'key_changed', 'age1qqqexample')`, user); err != nil {
		t.Fatal(err)
	}
	sink := mailtest.NewSink(t)
	m, err := app.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	n := app.NewNotifier(store.New(pool), sender(t, sink.SMTPConfig()), m, slog.New(slog.DiscardHandler), app.NotifierOptions{PublicURL: "https://files.example.com"})
	n.Tick(ctx, ctx)
	msgs := sink.WaitN(t, 2, 10*time.Second)
	var all string
	for _, msg := range msgs {
		if len(msg.To) != 1 || msg.To[0] != "carol@example.com" {
			t.Fatalf("sent to %v", msg.To)
		}
		all += string(msg.Data)
	}
	for _, want := range []string{"Subject: Your shipfile role changed", "admin -> regular", "Subject: Your encryption key was changed", "age1qqqexample",
		"https://files.example.com/account"} {
		if !strings.Contains(all, want) {
			t.Errorf("the e-mails lack %q:\n%s", want, all)
		}
	}
	var sent, audited int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM account_notices WHERE user_id = $1 AND state = 'sent' AND message_id <> ''`, user).Scan(&sent)
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = $1 AND detail LIKE '%carol@example.com%'`, app.ActionSent).Scan(&audited)
	if sent != 2 || audited != 2 {
		t.Fatalf("%d notices recorded sent, %d audited; want 2 and 2", sent, audited)
	}
	// Sent once: a second tick sends nothing more.
	n.Tick(ctx, ctx)
	if got := len(sink.Messages()); got != 2 {
		t.Fatalf("%d e-mails after a second tick", got)
	}
}
