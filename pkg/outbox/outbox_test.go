package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/events/eventstest"
	"github.com/shipfile/shipfile/pkg/outbox"
	"github.com/shipfile/shipfile/pkg/schematest"
)

// fixture is one test's database, stream and subject prefix.
type fixture struct {
	pool    *pgxpool.Pool
	js      jetstream.JetStream
	stream  jetstream.Stream
	subject string // bound to the stream
}

func setup(t *testing.T) *fixture {
	t.Helper()
	// The one schema: the gateway's migrations, outbox table included.
	url := schematest.New(t)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	js := eventstest.Connect(t)
	stream, prefix := eventstest.Stream(t, js, jetstream.StreamConfig{
		Storage:    jetstream.FileStorage,
		Duplicates: 2 * time.Minute,
	})
	return &fixture{pool: pool, js: js, stream: stream, subject: prefix + ".x"}
}

// msg returns a message for the fixture's stream with a fresh UUIDv7 id.
func (f *fixture) msg(data string) outbox.Message {
	return outbox.Message{ID: uuid.Must(uuid.NewV7()).String(), Subject: f.subject, Data: []byte(data)}
}

// insert writes msgs in one transaction and commits it.
func (f *fixture) insert(t *testing.T, msgs ...outbox.Message) {
	t.Helper()
	err := pgx.BeginFunc(t.Context(), f.pool, func(tx pgx.Tx) error {
		return outbox.Insert(t.Context(), tx, msgs...)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// storedMsg is one message in the stream.
type storedMsg struct {
	seq  uint64
	id   string
	data string
}

// stored lists the stream's messages in sequence order.
func (f *fixture) stored(t *testing.T) []storedMsg {
	t.Helper()
	ctx := t.Context()
	info, err := f.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []storedMsg
	if info.State.Msgs == 0 {
		return out
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := f.stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, storedMsg{seq: seq, id: m.Header.Get(jetstream.MsgIDHeader), data: string(m.Data)})
	}
	if uint64(len(out)) != info.State.Msgs {
		t.Fatalf("read %d messages, the stream says %d", len(out), info.State.Msgs)
	}
	return out
}

func (f *fixture) count(t *testing.T) uint64 {
	t.Helper()
	info, err := f.stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// row is the relay's bookkeeping of one message.
type row struct {
	id        int64
	payload   []byte
	published bool // gone, or marked published by an earlier version
	gone      bool // deleted: the relay deletes a row once it is published
	attempts  int
	lastError *string
}

func (f *fixture) row(t *testing.T, msgID string) row {
	t.Helper()
	var r row
	err := f.pool.QueryRow(t.Context(), `SELECT id, payload, published_at IS NOT NULL, attempts, last_error
		FROM outbox WHERE msg_id = $1`, msgID).Scan(&r.id, &r.payload, &r.published, &r.attempts, &r.lastError)
	if errors.Is(err, pgx.ErrNoRows) {
		return row{published: true, gone: true}
	}
	if err != nil {
		t.Fatalf("row %s: %v", msgID, err)
	}
	return r
}

func (f *fixture) pending(t *testing.T) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(t.Context(), `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// run starts r.Run for the rest of the test and checks that it returns nil when stopped.
func run(t *testing.T, r *outbox.Relay) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v, want nil after cancel", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("Run did not return within 15s of cancel")
		}
	})
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestInsertPublishesOnlyCommitted(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	committed := []outbox.Message{f.msg("first"), f.msg("second"), f.msg("")}
	rolledBack := f.msg("never")
	f.insert(t, committed...)

	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Insert(ctx, tx, rolledBack); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	r := outbox.NewRelay(f.pool, f.js, outbox.Options{})
	for range 2 { // a second flush finds nothing more to publish
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}

	got := f.stored(t)
	if len(got) != len(committed) {
		t.Fatalf("stream holds %d messages, want %d: %+v", len(got), len(committed), got)
	}
	for i, m := range committed {
		t.Run(fmt.Sprintf("message %d", i), func(t *testing.T) {
			if got[i].id != m.ID || got[i].data != string(m.Data) {
				t.Errorf("stream[%d] = id %q data %q, want id %q data %q (insertion order)", i, got[i].id, got[i].data, m.ID, m.Data)
			}
			if r := f.row(t, m.ID); !r.gone {
				t.Errorf("row still in the table (attempts %d, last_error %v); want it deleted once published", r.attempts, r.lastError)
			}
		})
	}
	var n int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE msg_id = $1`, rolledBack.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("rolled-back message has %d rows", n)
	}
}

func TestInsertRejects(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tests := []struct {
		name  string
		msgs  []outbox.Message
		check func(error) bool
	}{
		{"no id", []outbox.Message{{Subject: f.subject, Data: []byte("x")}}, func(err error) bool { return errors.Is(err, outbox.ErrInvalidMessage) }},
		{"no subject", []outbox.Message{{ID: "x", Data: []byte("x")}}, func(err error) bool { return errors.Is(err, outbox.ErrInvalidMessage) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pgx.BeginFunc(t.Context(), f.pool, func(tx pgx.Tx) error {
				return outbox.Insert(t.Context(), tx, tt.msgs...)
			})
			if !tt.check(err) {
				t.Errorf("Insert: err = %v", err)
			}
		})
	}
}

func TestLateCommitIsNotSkipped(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	r := outbox.NewRelay(f.pool, f.js, outbox.Options{})

	a, b := f.msg("A"), f.msg("B")
	txA, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer txA.Rollback(context.Background()) //nolint:errcheck
	if err := outbox.Insert(ctx, txA, a); err != nil {
		t.Fatal(err)
	}
	f.insert(t, b)
	idB := f.row(t, b.ID).id
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.stored(t); len(got) != 1 || got[0].id != b.ID {
		t.Fatalf("after B committed: stream = %+v, want B alone", got)
	}

	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if idA := f.row(t, a.ID).id; idA >= idB {
		t.Fatalf("A has id %d, B %d: the test needs A's id lower", idA, idB)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := f.stored(t)
	ids := []string{}
	for _, m := range got {
		ids = append(ids, m.id)
	}
	if want := []string{b.ID, a.ID}; !slices.Equal(ids, want) {
		t.Errorf("stream ids = %v, want %v (B, then the late A)", ids, want)
	}
}

func TestConcurrentRelaysPublishEachOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const total, perTx = 200, 5
	reg := prometheus.NewRegistry()
	for range 2 {
		run(t, outbox.NewRelay(f.pool, f.js, outbox.Options{
			PollInterval: 50 * time.Millisecond,
			BatchSize:    7, // several batches, so the relays interleave
			Registerer:   reg,
		}))
	}

	want := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 { // writers committing while the relays run
		wg.Go(func() {
			for i := range total / 4 / perTx {
				msgs := make([]outbox.Message, perTx)
				for j := range msgs {
					msgs[j] = f.msg(fmt.Sprintf("w%d-%d-%d", w, i, j))
				}
				err := pgx.BeginFunc(context.Background(), f.pool, func(tx pgx.Tx) error {
					return outbox.Insert(context.Background(), tx, msgs...)
				})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, m := range msgs {
					want[m.ID] = string(m.Data)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(want) != total {
		t.Fatalf("inserted %d messages, want %d", len(want), total)
	}
	waitFor(t, 30*time.Second, "every row published", func() bool { return f.pending(t) == 0 })

	got := f.stored(t)
	if len(got) != total {
		t.Errorf("stream holds %d messages, want %d", len(got), total)
	}
	seen := map[string]bool{}
	for _, m := range got {
		if seen[m.id] {
			t.Errorf("message %s stored twice", m.id)
		}
		seen[m.id] = true
		if w, ok := want[m.id]; !ok || w != m.data {
			t.Errorf("stored %s = %q, inserted %q (known: %v)", m.id, m.data, w, ok)
		}
	}
	// Each row was published by one relay in one pass (the stream's dedupe was not
	// needed: the counter would exceed total), and left the table.
	var left int
	if err := f.pool.QueryRow(t.Context(), `SELECT count(*) FROM outbox`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d rows left in the table after publishing, want none", left)
	}
	if n := metric(t, reg, "shipfile_outbox_published_total"); n != total {
		t.Errorf("shipfile_outbox_published_total = %v, want %d", n, total)
	}
}

// metric is the value of the registered counter or gauge with the given name.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// TestPublishedRowsLeaveTheTable: a published row is deleted (an ephemeral one's secret
// with it), and what the stream holds is the message as written.
func TestPublishedRowsLeaveTheTable(t *testing.T) {
	t.Parallel()
	f := setup(t)
	secret, plain := f.msg("magic link: secret"), f.msg("public")
	secret.Ephemeral = true
	f.insert(t, secret, plain)
	if r := f.row(t, secret.ID); r.gone || string(r.payload) != string(secret.Data) {
		t.Fatalf("ephemeral row before publishing: gone %v, payload %q", r.gone, r.payload)
	}
	if err := outbox.NewRelay(f.pool, f.js, outbox.Options{Open: unsealed}).Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{}
	for _, m := range f.stored(t) {
		stored[m.id] = m.data
	}
	for _, m := range []outbox.Message{secret, plain} {
		if r := f.row(t, m.ID); !r.gone {
			t.Errorf("row %s still in the table after publishing (payload %q)", m.ID, r.payload)
		}
		if stored[m.ID] != string(m.Data) {
			t.Errorf("stream has %q, want %q", stored[m.ID], m.Data)
		}
	}
}

// TestSingleMessageRows: a change with one message (Queue's plain-row form) stores it
// as the multi-row form does: an empty body is an empty payload, not NULL, and the rows
// leave the table once published.
func TestSingleMessageRows(t *testing.T) {
	t.Parallel()
	f := setup(t)
	empty := outbox.Message{ID: uuid.Must(uuid.NewV7()).String(), Subject: f.subject}
	secret := f.msg("magic link: secret")
	secret.Ephemeral = true
	f.insert(t, empty)
	if r := f.row(t, empty.ID); r.payload == nil || len(r.payload) != 0 || r.published {
		t.Fatalf("empty message before publishing: payload %q (nil %v), published %v; want an empty, non-NULL payload, pending",
			r.payload, r.payload == nil, r.published)
	}
	f.insert(t, secret)
	if r := f.row(t, secret.ID); string(r.payload) != string(secret.Data) {
		t.Fatalf("ephemeral message before publishing: payload %q, want %q", r.payload, secret.Data)
	}
	if err := outbox.NewRelay(f.pool, f.js, outbox.Options{Open: unsealed}).Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, m := range []outbox.Message{empty, secret} {
		if r := f.row(t, m.ID); !r.gone {
			t.Errorf("message %s: still in the table once published", m.ID)
		}
	}
	stored := map[string]string{}
	for _, m := range f.stored(t) {
		stored[m.id] = m.data
	}
	if got, ok := stored[secret.ID]; !ok || got != string(secret.Data) {
		t.Errorf("stream has %q (present %v) for the ephemeral message, want %q", got, ok, secret.Data)
	}
	if got, ok := stored[empty.ID]; !ok || got != "" {
		t.Errorf("stream has %q (present %v) for the empty message, want an empty body", got, ok)
	}
}

func TestRepublishAfterCrashIsDeduplicated(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	m := f.msg("once")
	f.insert(t, m)
	r := outbox.NewRelay(f.pool, f.js, outbox.Options{})
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if row := f.row(t, m.ID); !row.gone {
		t.Fatalf("row still in the table after publishing")
	}
	// A crash between the PubAck and the commit of its delete leaves the row in place:
	// as if it were written back.
	f.insert(t, m)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if row := f.row(t, m.ID); !row.gone {
		t.Errorf("row still in the table after publishing it again")
	}
	if got := f.stored(t); len(got) != 1 || got[0].id != m.ID || got[0].data != "once" {
		t.Errorf("stream = %+v, want one copy", got)
	}
}

// TestQueueTakesNoCommitLock: what a writer sends in its transaction is the INSERT
// alone. A NOTIFY (pg_notify) there takes PostgreSQL's database-wide notification lock
// at commit and holds it through the WAL flush, so every writer would commit one at a
// time.
func TestQueueTakesNoCommitLock(t *testing.T) {
	t.Parallel()
	b := &pgx.Batch{}
	if err := outbox.Queue(b, outbox.Message{ID: "a", Subject: "s.x", Data: []byte("x")}, outbox.Message{ID: "b", Subject: "s.x"}); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 1 {
		t.Errorf("Queue added %d statements, want the one INSERT", b.Len())
	}
	for _, q := range b.QueuedQueries {
		if sql := strings.ToLower(q.SQL); strings.Contains(sql, "notify") || !strings.HasPrefix(sql, "insert into outbox") {
			t.Errorf("Queue added %q; want only INSERT INTO outbox, no NOTIFY", q.SQL)
		}
	}
}

// TestInsertSendsNoNotification: a listener on the database hears nothing from a
// committed Insert (the old design's channel, and any other).
func TestInsertSendsNoNotification(t *testing.T) {
	t.Parallel()
	f := setup(t)
	conn, err := pgx.ConnectConfig(t.Context(), f.pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `LISTEN shipfile_outbox`); err != nil {
		t.Fatal(err)
	}
	f.insert(t, f.msg("quiet"))
	// A NOTIFY committed before this one is delivered before it, on the same channel.
	if _, err := f.pool.Exec(t.Context(), `SELECT pg_notify('shipfile_outbox', 'marker')`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Payload != "marker" {
		t.Errorf("the Insert's transaction sent a notification (%q on %s)", n.Payload, n.Channel)
	}
}

func TestWakePublishesAtOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// Polling alone would take a minute: only Wake publishes within 2s.
	r := outbox.NewRelay(f.pool, f.js, outbox.Options{PollInterval: time.Minute})
	run(t, r)
	for i := range 3 {
		m := f.msg(fmt.Sprintf("wake %d", i))
		f.insert(t, m)
		r.Wake()
		waitFor(t, 2*time.Second, "published after Wake", func() bool { return f.count(t) == uint64(i+1) })
		if got := f.stored(t); got[len(got)-1].id != m.ID {
			t.Fatalf("last stored message %s, want %s", got[len(got)-1].id, m.ID)
		}
	}
	// Many wake-ups at once coalesce; each row is still published once.
	for range 50 {
		r.Wake()
	}
	f.insert(t, f.msg("after the storm"))
	r.Wake()
	waitFor(t, 2*time.Second, "published after many Wakes", func() bool { return f.count(t) == 4 })
}

// TestLingerGathersCommits: under load (two or more commits woke the relay while its
// last pass ran), the next pass waits until Linger after the last one began, so that it
// publishes what the commits of that while wrote at once; without Linger, the next pass
// starts at once, and a commit after it is a pass of its own. The first pass is held
// (its row's payload is opened only when the test lets it), so the two commits are sure
// to land while it runs, however loaded the machine.
func TestLingerGathersCommits(t *testing.T) {
	t.Parallel()
	const m = 5 // commits after the busy pass
	for _, tt := range []struct {
		name   string
		linger time.Duration
		want   float64 // batches
	}{
		{"linger", 2 * time.Second, 2}, // the held pass, then one with every other commit
		{"none", -1, 2 + m},            // the held pass, one with the two commits, one per commit after
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			reg := prometheus.NewRegistry()
			entered, release := make(chan struct{}, 1), make(chan struct{})
			held := func(b []byte) ([]byte, error) {
				select {
				case entered <- struct{}{}:
				default:
				}
				<-release
				return b, nil
			}
			r := outbox.NewRelay(f.pool, f.js, outbox.Options{Linger: tt.linger, PollInterval: time.Hour, Registerer: reg, Open: held})
			run(t, r)
			first := f.msg("held")
			first.Ephemeral = true
			f.insert(t, first)
			r.Wake()
			select {
			case <-entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the first pass did not start")
			}
			for i := 1; i <= 2; i++ { // while the first pass runs: load
				f.insert(t, f.msg(fmt.Sprint("busy ", i)))
				r.Wake()
			}
			close(release)
			if tt.linger > 0 {
				// Within Linger of the held pass's start: the lingered pass takes them all.
				for i := range m {
					f.insert(t, f.msg(fmt.Sprint("after ", i)))
					r.Wake()
				}
			} else {
				waitFor(t, 10*time.Second, "the two commits published", func() bool { return f.count(t) == 3 })
				for i := range m { // each published before the next is made
					f.insert(t, f.msg(fmt.Sprint("after ", i)))
					r.Wake()
					waitFor(t, 10*time.Second, "published at once", func() bool { return f.count(t) == uint64(4+i) })
				}
			}
			waitFor(t, 10*time.Second, "every commit published", func() bool { return f.count(t) == 3+m })
			// A batch is counted once its transaction is over, a little after the stream
			// has its rows.
			waitFor(t, 10*time.Second, fmt.Sprintf("%v batches counted", tt.want), func() bool {
				return metric(t, reg, "shipfile_outbox_batches_total") >= tt.want
			})
			if b := metric(t, reg, "shipfile_outbox_batches_total"); b != tt.want {
				t.Errorf("%d commits published in %v batches, want %v", 3+m, b, tt.want)
			}
		})
	}
}

// TestWakeAfterAQuietPassDoesNotWait: after a pass that found one row, the next wake-up
// publishes at once, however long Linger is.
func TestWakeAfterAQuietPassDoesNotWait(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := outbox.NewRelay(f.pool, f.js, outbox.Options{Linger: time.Hour, PollInterval: time.Hour})
	run(t, r)
	for i := range 3 {
		passes := r.Passes()
		f.insert(t, f.msg(fmt.Sprint("alone ", i)))
		r.Wake()
		waitFor(t, 5*time.Second, "published at once", func() bool { return f.count(t) == uint64(i+1) })
		// The next commit comes once the pass that published this one has ended (its
		// Flush may go on to publish a row written meanwhile, and two wake-ups during one
		// pass are load).
		waitFor(t, 5*time.Second, "the pass ended", func() bool { return r.Passes() > passes })
	}
}

// TestPollPublishesWithoutWake: a writer that crashed between its commit and Wake (or
// one in another process) is covered by the poll.
func TestPollPublishesWithoutWake(t *testing.T) {
	t.Parallel()
	f := setup(t)
	run(t, outbox.NewRelay(f.pool, f.js, outbox.Options{PollInterval: 100 * time.Millisecond}))
	m := f.msg("never woken")
	f.insert(t, m)
	waitFor(t, 5*time.Second, "published by the poll and marked", func() bool { return f.count(t) == 1 && f.row(t, m.ID).published })
}

func TestPublishErrorKeepsOrderAndRetries(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var logs safeBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	// A subject no stream binds yet: JetStream answers "no responders".
	unbound := eventstest.Prefix()
	first := outbox.Message{ID: uuid.Must(uuid.NewV7()).String(), Subject: unbound + ".x", Data: []byte("secret-first"), Ephemeral: true}
	second := outbox.Message{ID: uuid.Must(uuid.NewV7()).String(), Subject: unbound + ".x", Data: []byte("secret-second"), Ephemeral: true}
	f.insert(t, first, second)
	reg := prometheus.NewRegistry()
	run(t, outbox.NewRelay(f.pool, f.js, outbox.Options{PollInterval: 50 * time.Millisecond, Log: log, Registerer: reg, Open: unsealed}))

	waitFor(t, 10*time.Second, "failure recorded twice", func() bool {
		r := f.row(t, first.ID)
		return r.attempts >= 2 && r.lastError != nil
	})
	if r := f.row(t, second.ID); r.published || r.attempts != 0 {
		t.Errorf("second row: published %v attempts %d; want it waiting behind the first", r.published, r.attempts)
	}
	if n := metric(t, reg, "shipfile_outbox_publish_errors_total"); n < 2 {
		t.Errorf("shipfile_outbox_publish_errors_total = %v, want ≥ 2", n)
	}
	waitFor(t, 5*time.Second, "pending gauge", func() bool {
		return metric(t, reg, "shipfile_outbox_pending") == 2
	})

	// The stream appears: the relay's retry publishes both, in order.
	s, err := f.js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name:       eventstest.StreamName(unbound),
		Subjects:   []string{unbound + ".>"},
		Storage:    jetstream.FileStorage,
		Duplicates: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	eventstest.DeleteOnCleanup(t, f.js, eventstest.StreamName(unbound))
	waitFor(t, 45*time.Second, "published after the stream appeared", func() bool { return f.pending(t) == 0 })
	for i, m := range []outbox.Message{first, second} {
		got, err := s.GetMsg(t.Context(), uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if got.Header.Get(jetstream.MsgIDHeader) != m.ID || string(got.Data) != string(m.Data) {
			t.Errorf("seq %d = %s %q, want %s %q", i+1, got.Header.Get(jetstream.MsgIDHeader), got.Data, m.ID, m.Data)
		}
	}
	if r := f.row(t, first.ID); r.lastError != nil {
		t.Errorf("last_error %q kept after success", *r.lastError)
	}
	out := logs.String()
	if !strings.Contains(out, "outbox: publish") || !strings.Contains(out, first.ID) {
		t.Errorf("the failure was not logged with the message id:\n%s", out)
	}
	if strings.Contains(out, "secret") {
		t.Errorf("a payload reached the log:\n%s", out)
	}
}

// TestRefusedRowDoesNotHoldBackOthers: a batch's rows go out together, so a row the
// stream refuses does not hold back the rows behind it that went through (each published
// once); it is tried again, after them, until it is published.
func TestRefusedRowDoesNotHoldBackOthers(t *testing.T) {
	t.Parallel()
	f := setup(t)
	unbound := eventstest.Prefix() // no stream binds it yet: "no responders"
	refused := outbox.Message{ID: uuid.Must(uuid.NewV7()).String(), Subject: unbound + ".x", Data: []byte("refused")}
	behind := f.msg("behind")
	f.insert(t, refused, behind)
	relay := outbox.NewRelay(f.pool, f.js, outbox.Options{})
	if err := relay.Flush(t.Context()); err == nil || !strings.Contains(err.Error(), refused.ID) {
		t.Fatalf("Flush = %v, want the refused row's error", err)
	}
	if r := f.row(t, refused.ID); r.published || r.attempts != 1 || r.lastError == nil {
		t.Fatalf("refused row: published %v, attempts %d, last_error %v; want pending, one attempt, its error", r.published, r.attempts, r.lastError)
	}
	if r := f.row(t, behind.ID); !r.gone {
		t.Fatalf("the row behind the refused one: still in the table (attempts %d); want published at once", r.attempts)
	}

	s, err := f.js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: eventstest.StreamName(unbound), Subjects: []string{unbound + ".>"}, Storage: jetstream.FileStorage,
	})
	if err != nil {
		t.Fatal(err)
	}
	eventstest.DeleteOnCleanup(t, f.js, eventstest.StreamName(unbound))
	if err := relay.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := f.row(t, refused.ID); !r.gone {
		t.Fatalf("refused row once its stream exists: still in the table, last_error %v", r.lastError)
	}
	if info, err := s.Info(t.Context()); err != nil || info.State.Msgs != 1 {
		t.Fatalf("its stream holds %v messages (%v), want 1", info.State.Msgs, err)
	}
	if n := f.count(t); n != 1 {
		t.Fatalf("the fixture's stream holds %d messages, want the row behind once", n)
	}
}

// TestCleanupDeletesOldPublishedRows: rows an earlier version marked published (it kept
// them for a day) are deleted once older than the retention; pending rows stay.
func TestCleanupDeletesOldPublishedRows(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	old, recent, pending := f.msg("old"), f.msg("recent"), f.msg("pending")
	f.insert(t, old, recent, pending)
	r := outbox.NewRelay(f.pool, f.js, outbox.Options{Retention: time.Hour})
	if _, err := f.pool.Exec(ctx, `UPDATE outbox SET published_at = now() - interval '2 hours' WHERE msg_id = $1`, old.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `UPDATE outbox SET published_at = now() WHERE msg_id = $1`, recent.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `UPDATE outbox SET created_at = now() - interval '2 hours' WHERE msg_id = $1`, pending.ID); err != nil {
		t.Fatal(err)
	}
	n, err := r.Cleanup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("deleted %d rows, want 1", n)
	}
	rows, err := f.pool.Query(ctx, `SELECT msg_id FROM outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{recent.ID, pending.ID}; !slices.Equal(left, want) {
		t.Errorf("rows left %v, want %v (recent and pending)", left, want)
	}
}

// safeBuffer is a bytes.Buffer safe for the relay's goroutine and the test.
type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSealedEphemeralPayloadOpened: an ephemeral row written sealed is published
// opened (Options.Open), and a plain row is published as it is; a row that cannot be
// opened is a failed publish: it stays pending with its error, and holds the rows
// after it back until it can be opened.
func TestSealedEphemeralPayloadOpened(t *testing.T) {
	t.Parallel()
	f := setup(t)
	seal := func(s string) []byte { return []byte("sealed:" + strings.ToUpper(s)) }
	broken := true
	open := func(p []byte) ([]byte, error) {
		s, ok := strings.CutPrefix(string(p), "sealed:")
		if !ok {
			return p, nil // written before sealing
		}
		if s == "BAD" && broken {
			return nil, errors.New("unknown key")
		}
		return []byte(strings.ToLower(s)), nil
	}
	sealed, legacy, plain := f.msg("magic link: secret"), f.msg("old job"), f.msg("public")
	sealed.Ephemeral, legacy.Ephemeral = true, true
	sealed.Data = seal("magic link: secret")
	f.insert(t, sealed, legacy, plain)
	relay := outbox.NewRelay(f.pool, f.js, outbox.Options{Open: open})
	if err := relay.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{}
	for _, m := range f.stored(t) {
		stored[m.id] = m.data
	}
	if stored[sealed.ID] != "magic link: secret" || stored[legacy.ID] != "old job" || stored[plain.ID] != "public" {
		t.Fatalf("stream holds %q", stored)
	}
	if r := f.row(t, sealed.ID); !r.published || r.payload != nil {
		t.Fatalf("sealed row: published %v, payload %q; want published and erased", r.published, r.payload)
	}

	bad, after := f.msg(""), f.msg("after")
	bad.Ephemeral, bad.Data = true, seal("bad")
	f.insert(t, bad, after)
	if err := relay.Flush(t.Context()); err == nil || !strings.Contains(err.Error(), "open sealed payload") {
		t.Fatalf("Flush = %v, want the open error", err)
	}
	if r := f.row(t, bad.ID); r.published || r.attempts != 1 || r.lastError == nil || !strings.Contains(*r.lastError, "unknown key") {
		t.Fatalf("unopened row: published %v, attempts %d, last_error %v", r.published, r.attempts, r.lastError)
	}
	if f.row(t, after.ID).published {
		t.Fatal("a row after the unopened one was published out of order")
	}
	broken = false // the key is back (SHIPFILE_SECRET_KEY_PREVIOUS)
	if err := relay.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !f.row(t, bad.ID).published || !f.row(t, after.ID).published {
		t.Fatal("the rows were not published once the payload could be opened")
	}
}

// unsealed is the Open of a relay whose ephemeral rows were written as they are (the
// tests' rows; the gateway seals them).
func unsealed(p []byte) ([]byte, error) { return p, nil }

// TestRelayWithoutOpenLeavesEphemeralRows: a relay that cannot open sealed payloads
// (the expiry's, the scanner's) publishes the plain rows and leaves the ephemeral ones
// to a relay that can (the gateway's), which publishes them opened: the stream never
// gets a sealed mail job, whichever relay gets to a row first.
func TestRelayWithoutOpenLeavesEphemeralRows(t *testing.T) {
	t.Parallel()
	f := setup(t)
	sealed, plain := f.msg(""), f.msg("public")
	sealed.Ephemeral, sealed.Data = true, []byte("sealed:MAGIC LINK")
	f.insert(t, sealed, plain)
	other := outbox.NewRelay(f.pool, f.js, outbox.Options{})
	if err := other.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.stored(t); len(got) != 1 || got[0].id != plain.ID {
		t.Fatalf("a relay without Open published %+v, want the plain row alone", got)
	}
	if f.row(t, sealed.ID).published {
		t.Fatal("a relay without Open took the sealed row")
	}
	open := func(p []byte) ([]byte, error) {
		s, _ := strings.CutPrefix(string(p), "sealed:")
		return []byte(strings.ToLower(s)), nil
	}
	if err := outbox.NewRelay(f.pool, f.js, outbox.Options{Open: open}).Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{}
	for _, m := range f.stored(t) {
		stored[m.id] = m.data
	}
	if len(stored) != 2 || stored[sealed.ID] != "magic link" {
		t.Fatalf("stream holds %q, want the sealed row opened", stored)
	}
}

// TestRunBesidePublishesWhatWorkWroteLast: the relay publishes while work runs, and once
// work returned, what it wrote last is published before RunBeside returns work's error,
// though the relay's poll alone would not have got to it.
func TestRunBesidePublishesWhatWorkWroteLast(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := outbox.NewRelay(f.pool, f.js, outbox.Options{PollInterval: time.Minute})
	first, last := f.msg("while work runs"), f.msg("work's last write")
	workErr := errors.New("work failed")
	err := r.RunBeside(t.Context(), 5*time.Second, func(context.Context) error {
		f.insert(t, first)
		r.Wake()
		waitFor(t, 2*time.Second, "published while work runs", func() bool { return f.count(t) == 1 })
		f.insert(t, last) // never woken: only the flush at the end publishes it
		return workErr
	})
	if !errors.Is(err, workErr) {
		t.Fatalf("RunBeside returned %v, want work's error", err)
	}
	if got := f.stored(t); len(got) != 2 || got[0].id != first.ID || got[1].id != last.ID {
		t.Fatalf("stored %+v, want %s then %s", got, first.ID, last.ID)
	}
	if !f.row(t, last.ID).published {
		t.Fatal("the last row is not marked published")
	}
}
