package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/outbox"
)

// TestQueueTakesNoCommitLock: what a writer sends in its transaction is the INSERT
// alone. A NOTIFY (pg_notify) there takes PostgreSQL's database-wide notification lock
// at commit and holds it through the WAL flush, so every writer would commit one at a
// time.
func TestQueueTakesNoCommitLock(t *testing.T) {
	t.Parallel()
	b := &pgx.Batch{}
	if err := outbox.Queue(context.Background(), b, outbox.Message{ID: "a", Subject: "s.x", Data: []byte("x")}, outbox.Message{ID: "b", Subject: "s.x"}); err != nil {
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
