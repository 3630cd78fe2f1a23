// Package store keeps the dispatcher's state in PostgreSQL (pgx/v5): webhook
// subscriptions (read, and pushed changes on LISTEN), deliveries and the attempt log,
// written many at a time. The gateway owns the schema.
package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/services/webhooks/internal/app"
	"github.com/shipfile/shipfile/services/webhooks/internal/store/db"
)

// NotifyChannel is the PostgreSQL channel on which every change of a subscription that
// matters to deliveries is announced (payload: its id), by a trigger on
// webhook_subscriptions (migration 00007).
const NotifyChannel = "shipfile_webhooks"

// Postgres is the dispatcher's store. Every SQL statement is in queries.sql (compiled
// by sqlc into package db) but the LISTEN of Listen and the transaction control around
// the group commit (recordPipelined). Nothing there that runs once per
// delivery writes or locks a webhook_subscriptions row.
type Postgres struct {
	pool    *pgxpool.Pool
	q       *db.Queries // the statements of queries.sql, on the pool
	secrets SecretOpener
}

var (
	_ app.SubscriptionStore = (*Postgres)(nil)
	_ app.DeliveryStore     = (*Postgres)(nil)
	_ app.HealthStore       = (*Postgres)(nil)
)

// New returns a store on pool; secrets opens the subscriptions' sealed signing secrets.
func New(pool *pgxpool.Pool, secrets SecretOpener) *Postgres {
	return &Postgres{pool: pool, q: db.New(pool), secrets: secrets}
}

// Subscriptions returns every subscription.
func (p *Postgres) Subscriptions(ctx context.Context) ([]app.Subscription, error) {
	rows, err := p.q.Subscriptions(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: subscriptions: %w", err)
	}
	subs := make([]app.Subscription, len(rows))
	for i, r := range rows {
		// The two queries read the same columns: the conversion compiles only while they do.
		subs[i] = p.subscription(db.SubscriptionRow(r))
	}
	return subs, nil
}

// Subscription returns one subscription; app.ErrNotFound when it does not exist.
func (p *Postgres) Subscription(ctx context.Context, id int64) (app.Subscription, error) {
	row, err := p.q.Subscription(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return app.Subscription{}, app.ErrNotFound
	}
	if err != nil {
		return app.Subscription{}, fmt.Errorf("store: subscription %d: %w", id, err)
	}
	return p.subscription(row), nil
}

// subscription turns a row of webhook_subscriptions into a subscription. It is the
// one place where the dispatcher reads the secret and previous_secret columns, which it
// opens (openSecrets: the gateway stores them sealed).
func (p *Postgres) subscription(r db.SubscriptionRow) app.Subscription {
	s := app.Subscription{
		ID: r.ID, URL: r.Url, Events: r.Events, Secret: r.Secret, Active: r.Active, CreatedAt: r.CreatedAt,
		MaxInFlight: int(r.MaxInFlight), Ordering: r.Ordering,
	}
	if r.PreviousSecret != nil {
		s.PreviousSecret = *r.PreviousSecret
	}
	if r.PreviousSecretUntil != nil {
		s.PreviousSecretUntil = *r.PreviousSecretUntil
	}
	if r.RateLimit != nil {
		s.RateLimit = int(*r.RateLimit)
	}
	if err := p.openSecrets(&s); err != nil {
		// One subscription's unreadable secret must not stop the others: it is marked.
		s.Secret, s.PreviousSecret, s.SecretError = "", "", err
	}
	return s
}

// LastSubscriptionID returns the highest subscription id, 0 when there is none: the
// fan-out's cheap check that its cache has every subscription created so far.
func (p *Postgres) LastSubscriptionID(ctx context.Context) (int64, error) {
	id, err := p.q.LastSubscriptionID(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: last subscription id: %w", err)
	}
	return id, nil
}

// Listen announces on changed the id of every subscription changed, created or
// deleted, from a connection of its own that LISTENs on NotifyChannel, until ctx is
// done or the connection fails (the error says why). connected is called once the
// connection listens, before any announcement: what changed before may be missed, so
// the caller reloads everything then.
func (p *Postgres) Listen(ctx context.Context, connected func(), changed func(id int64)) error {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("store: listen: %w", err)
	}
	// The connection leaves the pool: a LISTENing session must not serve other queries.
	pc := conn.Hijack()
	defer pc.Close(context.WithoutCancel(ctx))
	// Not in queries.sql: a constant channel name, nothing for sqlc to check.
	if _, err := pc.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return fmt.Errorf("store: listen: %w", err)
	}
	connected()
	for {
		// A connection that died without a word (a partition) would leave the cache
		// believing itself current: wait at most listenPing, then ping.
		wctx, cancel := context.WithTimeout(ctx, listenPing)
		n, err := pc.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			if id, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
				changed(id)
			}
		case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			pctx, cancel := context.WithTimeout(ctx, listenPing)
			err = pc.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("store: listen: ping: %w", err)
			}
		default:
			return fmt.Errorf("store: listen: %w", err)
		}
	}
}

// listenPing is how long the LISTEN connection waits for a notification before it
// checks that it is alive; a dead one is noticed within twice that.
const listenPing = 400 * time.Millisecond

// InsertDeliveries inserts deliveries without attempts in one statement; those that
// exist are left alone. (Tests and tools: the dispatcher writes a delivery's row with
// its first attempt, RecordAttempts.)
func (p *Postgres) InsertDeliveries(ctx context.Context, ds []app.NewDelivery) error {
	if len(ds) == 0 {
		return nil
	}
	ids, subs := make([]string, len(ds)), make([]int64, len(ds))
	evIDs, types, bodies := make([]string, len(ds)), make([]string, len(ds)), make([][]byte, len(ds))
	for i, d := range ds {
		ids[i], subs[i], evIDs[i], types[i], bodies[i] = d.ID, d.SubscriptionID, d.EventID, d.Event, d.Body
	}
	err := p.q.InsertDeliveries(ctx, db.InsertDeliveriesParams{
		Ids: ids, SubscriptionIds: subs, EventIds: evIDs, Events: types, Bodies: bodies,
	})
	if err != nil {
		return fmt.Errorf("store: insert %d deliveries: %w", len(ds), err)
	}
	return nil
}

// Deliveries returns the deliveries with these ids that exist, by id (without their
// subscriptions).
func (p *Postgres) Deliveries(ctx context.Context, ids []string) (map[string]app.Delivery, error) {
	rows, err := p.q.Deliveries(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("store: %d deliveries: %w", len(ids), err)
	}
	out := make(map[string]app.Delivery, len(rows))
	for _, r := range rows {
		out[r.ID] = app.Delivery{
			ID: r.ID, SubscriptionID: r.SubscriptionID, EventID: r.EventID, Event: r.Event, Body: r.Body,
			Status: r.Status, Attempts: int(r.Attempts), RoundAttempts: int(r.RoundAttempts), CreatedAt: r.CreatedAt,
			PackageID: r.PackageID, PackageSeq: uint64(r.PackageSeq),
		}
	}
	return out, nil
}

// MarkFailed sets a delivery that has not succeeded failed with reason, writing its row
// when it has none yet; app.ErrNotFound when it had succeeded.
func (p *Postgres) MarkFailed(ctx context.Context, d app.Delivery, reason string) error {
	n, err := p.q.MarkFailed(ctx, db.MarkFailedParams{
		ID: d.ID, SubscriptionID: d.SubscriptionID, EventID: d.EventID, Event: d.Event, Body: notNil(d.Body),
		CreatedAt: createdAt(d.CreatedAt), Reason: reason, PackageID: d.PackageID, PackageSeq: int64(d.PackageSeq),
	})
	if err != nil {
		return fmt.Errorf("store: mark delivery %s failed: %w", d.ID, err)
	}
	if n == 0 {
		return app.ErrNotFound
	}
	return nil
}

// notNil returns b, or an empty slice for nil (pgx sends nil as NULL).
func notNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// createdAt is the created_at of a new row: t, or now when t is zero.
func createdAt(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// RecordAttempts writes the attempts and their deliveries' new states in one statement
// per group of distinct deliveries (one, unless a delivery appears twice), the row of a
// delivery with it when it has none yet, and returns each attempt's number by delivery
// id.
func (p *Postgres) RecordAttempts(ctx context.Context, recs []app.AttemptRecord) (map[string]app.Recorded, error) {
	out := make(map[string]app.Recorded, len(recs))
	for len(recs) > 0 {
		// Rows in id order, the same lock order in every statement; a second attempt of
		// one delivery goes to the next statement.
		seen := make(map[string]bool, len(recs))
		var now, later []app.AttemptRecord
		for _, r := range recs {
			if seen[r.DeliveryID] {
				later = append(later, r)
				continue
			}
			seen[r.DeliveryID] = true
			now = append(now, r)
		}
		slices.SortFunc(now, func(a, b app.AttemptRecord) int {
			if a.DeliveryID < b.DeliveryID {
				return -1
			}
			if a.DeliveryID > b.DeliveryID {
				return 1
			}
			return 0
		})
		if err := p.recordAttempts(ctx, now, out); err != nil {
			return nil, err
		}
		recs = later
	}
	return out, nil
}

func (p *Postgres) recordAttempts(ctx context.Context, recs []app.AttemptRecord, out map[string]app.Recorded) error {
	n := len(recs)
	arg := db.RecordAttemptsParams{
		DeliveryIds: make([]string, n), SubscriptionIds: make([]int64, n), StatusCodes: make([]int32, n),
		Errors: make([]string, n), Statuses: make([]string, n), DurationsMs: make([]int32, n),
		Excerpts: make([]string, n), HasResponse: make([]bool, n),
		EventIds: make([]string, n), Events: make([]string, n), Bodies: make([][]byte, n), CreatedAts: make([]time.Time, n),
		PackageIds: make([]string, n), PackageSeqs: make([]int64, n),
	}
	for i, r := range recs {
		// Used only where the delivery has no row yet (its first attempt).
		// (A nil body would be NULL, which the NOT NULL column refuses even when the row
		// exists and the value is not used.)
		arg.EventIds[i], arg.Events[i], arg.Bodies[i], arg.CreatedAts[i] = r.EventID, r.Event, notNil(r.Body), createdAt(r.CreatedAt)
		arg.PackageIds[i], arg.PackageSeqs[i] = r.PackageID, int64(r.PackageSeq)
		// A status code 0 (no answer) and an error "" are stored as NULL, the excerpt only
		// when a response came.
		arg.DeliveryIds[i], arg.SubscriptionIds[i], arg.Statuses[i] = r.DeliveryID, r.SubscriptionID, r.Status
		arg.StatusCodes[i], arg.Errors[i] = int32(r.StatusCode), r.Error
		arg.DurationsMs[i] = int32(min(r.Duration.Milliseconds(), 1<<31-1))
		arg.Excerpts[i], arg.HasResponse[i] = r.Excerpt, r.HasResponse
	}
	if err := p.recordPipelined(ctx, arg, finishesOf(recs), out); err != nil {
		return fmt.Errorf("store: record %d attempts: %w", n, err)
	}
	return nil
}

// finishes are the packages that a group commit moves on (OrderFinishMany), each with
// the delivery whose end moves it.
type finishes struct {
	arg        db.OrderFinishManyParams
	deliveries []string
}

// finishesOf returns the FinishOrder records' packages, sorted by subscription, package
// and number: every group commit locks their places in one order.
func finishesOf(recs []app.AttemptRecord) finishes {
	var done []app.AttemptRecord
	for _, r := range recs {
		if r.FinishOrder && r.PackageSeq > 0 {
			done = append(done, r)
		}
	}
	slices.SortFunc(done, func(a, b app.AttemptRecord) int {
		if c := cmp.Compare(a.SubscriptionID, b.SubscriptionID); c != 0 {
			return c
		}
		if c := cmp.Compare(a.PackageID, b.PackageID); c != 0 {
			return c
		}
		return cmp.Compare(a.PackageSeq, b.PackageSeq)
	})
	var f finishes
	for _, r := range done {
		f.arg.SubscriptionIds = append(f.arg.SubscriptionIds, r.SubscriptionID)
		f.arg.PackageIds = append(f.arg.PackageIds, r.PackageID)
		f.arg.Seqs = append(f.arg.Seqs, int64(r.PackageSeq))
		f.deliveries = append(f.deliveries, r.DeliveryID)
	}
	return f
}

// recordPipelined runs RecordAttempts under PostgreSQL's generic plan, in one round
// trip: BEGIN, database.QueueGenericPlans, the statement and COMMIT in one pipeline.
//
// The pools run with plan_cache_mode = force_custom_plan (pkg/database: a statement
// whose generic plan can go bad on stale statistics is planned anew every time), and
// planning this statement (twelve arrays, two CTEs, an upsert, an insert) cost about
// 0.4 ms of a backend's CPU per group commit, a third of PostgreSQL's work per delivery
// at 16 deliveries a commit. Its generic plan cannot go bad: it reads no table but
// through the upsert's arbiter index (webhook_deliveries_pkey), whatever the statistics
// (plan_test.go checks it on a table filled after the plan was made).
//
// The packages of ordered deliveries done move on in the same transaction (fin), so an
// ordered delivery costs no commit of its own.
func (p *Postgres) recordPipelined(ctx context.Context, arg db.RecordAttemptsParams, fin finishes, out map[string]app.Recorded) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	database.QueueGenericPlans(b)
	b.Queue(db.RecordAttemptsSQL, arg.DeliveryIds, arg.SubscriptionIds, arg.EventIds, arg.Events, arg.Bodies,
		arg.CreatedAts, arg.StatusCodes, arg.Errors, arg.Statuses, arg.DurationsMs, arg.Excerpts, arg.HasResponse,
		arg.PackageIds, arg.PackageSeqs)
	if len(fin.deliveries) > 0 {
		b.Queue(db.OrderFinishManySQL, fin.arg.SubscriptionIds, fin.arg.PackageIds, fin.arg.Seqs)
	}
	b.Queue("COMMIT")
	br := p.pool.SendBatch(ctx, b)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		var attempt int32
		if err := rows.Scan(&id, &attempt); err != nil {
			rows.Close()
			return err
		}
		out[id] = app.Recorded{Attempt: int(attempt)}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(fin.deliveries) > 0 {
		var released []string
		if err := br.QueryRow().Scan(&released); err != nil {
			return err
		}
		for i, id := range fin.deliveries {
			if r, ok := out[id]; ok && i < len(released) {
				r.Released = released[i]
				out[id] = r
			}
		}
	}
	if _, err := br.Exec(); err != nil { // COMMIT
		return err
	}
	return br.Close()
}

// DisableSubscription disables an active subscription with reason.
func (p *Postgres) DisableSubscription(ctx context.Context, id int64, reason string) error {
	if err := p.q.DisableSubscription(ctx, db.DisableSubscriptionParams{ID: id, Reason: reason}); err != nil {
		return fmt.Errorf("store: disable subscription %d: %w", id, err)
	}
	return nil
}

// Health derives the subscriptions' last success and failing streak from the attempts
// of the last window, disables those failing for disableAfter or longer (unless 0)
// with reason, and returns their ids; in one transaction, skipped (ran false) while
// another instance runs it.
func (p *Postgres) Health(ctx context.Context, window, disableAfter time.Duration, reason string) (disabled []int64, ran bool, err error) {
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		q := p.q.WithTx(tx)
		var err error
		if ran, err = q.HealthLock(ctx); err != nil || !ran {
			return err
		}
		if err := q.Health(ctx, window); err != nil {
			return err
		}
		if disableAfter <= 0 {
			return nil
		}
		disabled, err = q.DisableFailing(ctx, db.DisableFailingParams{FailingFor: disableAfter, Reason: reason})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: health pass: %w", err)
	}
	return disabled, ran, nil
}

// RemoveOldAttempts removes the attempts older than retention (by the database's
// clock) among the limit oldest, and returns how many it removed.
func (p *Postgres) RemoveOldAttempts(ctx context.Context, retention time.Duration, limit int) (int, error) {
	n, err := p.q.RemoveOldAttempts(ctx, db.RemoveOldAttemptsParams{RetentionSecs: retention.Seconds(), MaxRows: int32(min(limit, math.MaxInt32))})
	if err != nil {
		return 0, fmt.Errorf("store: remove old attempts: %w", err)
	}
	return int(n), nil
}

// RemoveOldDeliveries removes up to limit deliveries created and last changed longer
// than retention ago and no longer pending, and returns how many it removed. Their
// attempts, older still, are RemoveOldAttempts's: the transaction tells the deliveries'
// trigger not to look for them.
func (p *Postgres) RemoveOldDeliveries(ctx context.Context, retention time.Duration, limit int) (int, error) {
	var n int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		q := p.q.WithTx(tx)
		if err := q.MarkAttemptsRemoved(ctx); err != nil {
			return err
		}
		var err error
		n, err = q.RemoveOldDeliveries(ctx, db.RemoveOldDeliveriesParams{RetentionSecs: retention.Seconds(), MaxRows: int32(min(limit, math.MaxInt32))})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: remove old deliveries: %w", err)
	}
	return int(n), nil
}

// DeleteDeliveriesOf removes the deliveries and attempts of the subscriptions among
// ids that no longer exist (a fan-out that raced their deletion), and returns how many.
// Their places in the order of ordered deliveries go too (up to orderBatch at a time; what
// is left of a very large one is never read again: subscription ids are not reused).
func (p *Postgres) DeleteDeliveriesOf(ctx context.Context, ids []int64) (int64, error) {
	n, err := p.q.DeleteDeliveriesOf(ctx, ids)
	if err != nil {
		return 0, fmt.Errorf("store: delete deliveries of deleted subscriptions: %w", err)
	}
	if _, err := p.q.RemoveUnorderedHeads(ctx, db.RemoveUnorderedHeadsParams{Deleted: ids, MaxRows: orderBatch}); err != nil {
		return n, fmt.Errorf("store: delete the order of deleted subscriptions: %w", err)
	}
	return n, nil
}

// orderBatch bounds one statement that removes the order of subscriptions no longer
// ordered.
const orderBatch = 10000

// ReleaseUnordered removes the order of the subscriptions no longer ordered, or gone
// (up to limit rows of each kind), and returns the deliveries that waited in it.
func (p *Postgres) ReleaseUnordered(ctx context.Context, limit int) ([]app.Release, error) {
	rows, err := p.q.ReleaseUnordered(ctx, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("store: release the deliveries of unordered subscriptions: %w", err)
	}
	if _, err := p.q.RemoveUnorderedHeads(ctx, db.RemoveUnorderedHeadsParams{MaxRows: int32(limit)}); err != nil {
		return nil, fmt.Errorf("store: remove the order of unordered subscriptions: %w", err)
	}
	out := make([]app.Release, len(rows))
	for i, r := range rows {
		out[i] = app.Release{SubscriptionID: r.SubscriptionID, DeliveryID: r.DeliveryID}
	}
	return out, nil
}

// Heartbeat records the instance as alive and returns how many instances are, itself
// included; an instance not seen for ttl is forgotten.
func (p *Postgres) Heartbeat(ctx context.Context, instanceID string, ttl time.Duration) (int, error) {
	others, err := p.q.Heartbeat(ctx, db.HeartbeatParams{InstanceID: instanceID, Ttl: ttl})
	if err != nil {
		return 0, fmt.Errorf("store: heartbeat: %w", err)
	}
	return int(others) + 1, nil
}

// Leave forgets the instance (a clean stop).
func (p *Postgres) Leave(ctx context.Context, instanceID string) error {
	if err := p.q.Leave(ctx, instanceID); err != nil {
		return fmt.Errorf("store: leave: %w", err)
	}
	return nil
}

// OldestPending returns the age of the oldest pending delivery, 0 when none is.
func (p *Postgres) OldestPending(ctx context.Context) (time.Duration, error) {
	secs, err := p.q.OldestPending(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: oldest pending delivery: %w", err)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

var _ app.OrderStore = (*Postgres)(nil)

// Gate decides whether del may go to its ordered subscription now
// (webhook_order_gate, migration 00031); take false passes over an event the
// subscription does not take.
func (p *Postgres) Gate(ctx context.Context, del app.Delivery, take bool) (decision, released string, err error) {
	arg := db.OrderGateParams{
		SubscriptionID: del.SubscriptionID, PackageID: del.PackageID, Seq: int64(del.PackageSeq),
		Body: []byte{}, CreatedAt: createdAt(del.CreatedAt),
	}
	if take {
		arg.DeliveryID, arg.EventID, arg.Event, arg.Body = del.ID, del.EventID, del.Event, notNil(del.Body)
	}
	row, err := p.q.OrderGate(ctx, arg)
	if err != nil {
		return "", "", fmt.Errorf("store: order gate: %w", err)
	}
	return row.Decision, row.Released, nil
}

// Heads returns the next event of each (subs[i], pkgs[i]) in the order, 0 where the
// package has no place yet.
func (p *Postgres) Heads(ctx context.Context, subs []int64, pkgs []string) ([]uint64, error) {
	rows, err := p.q.OrderHeads(ctx, db.OrderHeadsParams{SubscriptionIds: subs, PackageIds: pkgs})
	if err != nil {
		return nil, fmt.Errorf("store: order heads: %w", err)
	}
	out := make([]uint64, len(subs))
	for _, r := range rows {
		if i := int(r.I) - 1; i >= 0 && i < len(out) {
			out[i] = uint64(r.NextSeq)
		}
	}
	return out, nil
}

// Finish records that event seq of package pkg is done for subscription sub and
// returns the delivery released next, "" when none waits (webhook_order_finish).
func (p *Postgres) Finish(ctx context.Context, sub int64, pkg string, seq uint64) (string, error) {
	released, err := p.q.OrderFinish(ctx, db.OrderFinishParams{SubscriptionID: sub, PackageID: pkg, Seq: int64(seq)})
	if err != nil {
		return "", fmt.Errorf("store: order finish: %w", err)
	}
	return released, nil
}

// StalledReleases returns the deliveries released more than after ago and still not
// attempted, up to limit, marked released now.
func (p *Postgres) StalledReleases(ctx context.Context, after time.Duration, limit int) ([]app.Release, error) {
	rows, err := p.q.StalledReleases(ctx, db.StalledReleasesParams{After: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("store: stalled releases: %w", err)
	}
	out := make([]app.Release, len(rows))
	for i, r := range rows {
		out[i] = app.Release{SubscriptionID: r.SubscriptionID, DeliveryID: r.DeliveryID}
	}
	return out, nil
}

// Unstick moves the packages whose next event has not come for after past it, up to
// limit, and returns the deliveries released (webhook_order_unstick).
func (p *Postgres) Unstick(ctx context.Context, after time.Duration, limit int) ([]app.Release, error) {
	rows, err := p.q.UnstickOrder(ctx, db.UnstickOrderParams{After: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("store: unstick ordered packages: %w", err)
	}
	out := make([]app.Release, len(rows))
	for i, r := range rows {
		out[i] = app.Release{SubscriptionID: r.SubscriptionID, DeliveryID: r.DeliveryID}
	}
	return out, nil
}

// ForgetDone removes up to limit places in the order of packages with nothing left to do
// for their subscription and untouched for after, recording how far each package was
// done, and returns how many it removed (ForgetDoneOrder, migration 00040).
func (p *Postgres) ForgetDone(ctx context.Context, after time.Duration, limit int) (int, error) {
	n, err := p.q.ForgetDoneOrder(ctx, db.ForgetDoneOrderParams{After: after, MaxRows: int32(min(limit, math.MaxInt32))})
	if err != nil {
		return 0, fmt.Errorf("store: remove the order of finished packages: %w", err)
	}
	return int(n), nil
}
