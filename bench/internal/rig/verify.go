package rig

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// DB opens a pool on url for the rest of the test.
func DB(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := database.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// JetStream connects to NATS at url (one URL or a comma-separated list) for the rest of
// the test, reconnecting for as long as it takes (scenarios kill servers).
func JetStream(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	return servicetest.JetStream(t, url, nats.MaxReconnects(-1))
}

// LogOutbox makes the database at url record every outbox row in outbox_log, in the
// writer's transaction (a trigger), so that only committed rows are recorded and they
// stay there after the relay has published and deleted them: the scenarios' record of
// what was committed (OutboxMsgIDs). The product has no such table.
func LogOutbox(t testing.TB, url string) {
	t.Helper()
	db := DB(t, url)
	_, err := db.Exec(context.Background(), `
		CREATE TABLE outbox_log (id bigint PRIMARY KEY, msg_id text NOT NULL, subject text NOT NULL);
		CREATE FUNCTION outbox_log_row() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO outbox_log (id, msg_id, subject) VALUES (NEW.id, NEW.msg_id, NEW.subject);
			RETURN NEW;
		END $$;
		CREATE TRIGGER outbox_log AFTER INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION outbox_log_row();`)
	if err != nil {
		t.Fatalf("outbox log: %v", err)
	}
}

// OutboxMsgIDs returns the msg_id of every committed outbox row whose subject starts
// with prefix, published or not: the changes the database committed. The stack must
// have been made with StackOptions.LogOutbox.
func OutboxMsgIDs(t testing.TB, db *pgxpool.Pool, prefix string) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT msg_id FROM outbox_log WHERE subject LIKE $1 || '%' ORDER BY id`, prefix)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// WaitOutboxPublished waits until no outbox row is waiting to be published (polling every
// 10 ms, failing the test after within), and returns how many rows were waiting at first
// and how long they took.
func WaitOutboxPublished(t testing.TB, db *pgxpool.Pool, within time.Duration) (left int64, took time.Duration) {
	t.Helper()
	start := time.Now()
	for first := true; ; first = false {
		var pending int64
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if first {
			left = pending
		}
		if pending == 0 {
			return left, time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("outbox: %d rows still waiting to be published after %s", pending, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StreamMsgIDs reads every message of the stream (without consuming it) and counts
// them by Nats-Msg-Id.
func StreamMsgIDs(t testing.TB, js jetstream.JetStream, stream string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	ids := map[string]int{}
	if info.State.Msgs == 0 {
		return ids
	}
	// Message by message, so that it works on work-queue streams too (no consumer).
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted (a work queue's acknowledged job)
		}
		if err != nil {
			t.Fatalf("stream %s: message %d: %v", stream, seq, err)
		}
		ids[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	return ids
}

// ExactlyOnce compares the committed ids with the stream's: lost are committed ids not
// in the stream, duplicated the extra copies of ids in the stream, foreign the stream's
// ids that were never committed.
type ExactlyOnce struct {
	Committed, InStream, Lost, Duplicated, Foreign int
}

// CompareExactlyOnce counts how far the stream is from holding each committed id once.
func CompareExactlyOnce(committed []string, stream map[string]int) ExactlyOnce {
	r := ExactlyOnce{Committed: len(committed)}
	want := map[string]bool{}
	for _, id := range committed {
		want[id] = true
		if stream[id] == 0 {
			r.Lost++
		}
	}
	for id, n := range stream {
		r.InStream += n
		r.Duplicated += n - 1
		if !want[id] {
			r.Foreign++
		}
	}
	return r
}

// Ok reports whether every committed id is in the stream exactly once and nothing else is.
func (r ExactlyOnce) Ok() bool { return r.Lost == 0 && r.Duplicated == 0 && r.Foreign == 0 }
