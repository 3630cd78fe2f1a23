package store

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/database"
)

// groupRoundTimeout bounds a shared round, which runs on no request's context (its
// members' clients may go away while it runs; each member's own wait is bounded by
// its context as long as the member is still queued).
const groupRoundTimeout = 30 * time.Second

// groupCommit runs the write batches of concurrent requests (package creations) in
// shared round trips. While limit batches are in flight, the next ones queue; when a
// round ends, everything queued goes in the next round: one pgx batch, one implicit
// transaction, one commit, one wake-up of its backend. A lone request goes at once, on
// its own context, so a quiet gateway pays nothing; under load the rounds grow with the
// queue, with no timer. Each batch's statements are INSERTs of given values (see
// CreatePackage), run with generic plans.
//
// A round that fails is run again one member at a time, so each member gets its own
// outcome and one member's error (a constraint it breaks, say) does not fail the others:
// the shared transaction rolled back as a whole, so nothing of it was written.
type groupCommit struct {
	pool  *pgxpool.Pool
	limit int

	mu       sync.Mutex
	inFlight int
	queue    []*groupMember

	// rounds counts the round trips sent, creations the creations they carried (their
	// ratio: creations a commit); exported through WithRegisterer.
	rounds, creations prometheus.Counter
}

type groupMember struct {
	ctx   context.Context
	stmts []*pgx.QueuedQuery
	done  chan error // buffered: the round never waits for the member
	taken bool       // under groupCommit.mu: a round has it
}

func newGroupCommit(pool *pgxpool.Pool) *groupCommit {
	// As many rounds in flight as the gateway has CPUs, and at most half the pool, so
	// that they leave connections to every other request. Fewer rounds make larger ones,
	// which suits a PostgreSQL with few cores; more rounds use more of its backends where
	// it has many, and the gateway's CPUs stand in for both (the measurements:
	// docs/BENCHMARKS.md, "How many rounds in flight").
	return &groupCommit{
		pool: pool, limit: max(1, min(int(pool.Config().MaxConns)/2, runtime.GOMAXPROCS(0))),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_package_create_rounds_total",
			Help: "Round trips (each one transaction and one commit) that carried package creations.",
		}),
		creations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_package_create_round_creations_total",
			Help: "Package creations sent in those round trips (per round: this over shipfile_package_create_rounds_total).",
		}),
	}
}

// run commits stmts, alone or with the statements of concurrent calls, and returns
// the outcome of stmts. A call still queued when ctx ends returns ctx's error and
// writes nothing; once a round has taken it, it waits for that round's outcome.
func (g *groupCommit) run(ctx context.Context, stmts []*pgx.QueuedQuery) error {
	m := &groupMember{ctx: ctx, stmts: stmts, done: make(chan error, 1)}
	g.mu.Lock()
	if g.inFlight < g.limit {
		// Nothing is queued while a slot is free: this call goes at once, alone.
		g.inFlight++
		m.taken = true
		g.mu.Unlock()
		g.round(ctx, []*groupMember{m})
		return <-m.done
	}
	g.queue = append(g.queue, m)
	g.mu.Unlock()
	select {
	case err := <-m.done:
		return err
	case <-ctx.Done():
		g.mu.Lock()
		if !m.taken {
			g.queue = slices.DeleteFunc(g.queue, func(o *groupMember) bool { return o == m })
			g.mu.Unlock()
			return ctx.Err()
		}
		g.mu.Unlock()
		return <-m.done
	}
}

// round sends ms's statements as one batch, gives each member its outcome, and then
// hands its slot to a round of whatever queued meanwhile.
func (g *groupCommit) round(ctx context.Context, ms []*groupMember) {
	g.send(ctx, ms)
	g.mu.Lock()
	next := g.queue
	g.queue = nil
	for _, m := range next {
		m.taken = true
	}
	if len(next) == 0 {
		g.inFlight--
	}
	g.mu.Unlock()
	if len(next) > 0 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), groupRoundTimeout)
			defer cancel()
			g.round(ctx, next)
		}()
	}
}

func (g *groupCommit) send(ctx context.Context, ms []*groupMember) {
	// A member whose client went away while it queued is not written.
	ms = slices.DeleteFunc(ms, func(m *groupMember) bool {
		if err := m.ctx.Err(); err != nil {
			m.done <- err
			return true
		}
		return false
	})
	if len(ms) == 0 {
		return
	}
	err := g.exec(ctx, ms)
	if err == nil || len(ms) == 1 {
		for _, m := range ms {
			m.done <- err
		}
		return
	}
	for _, m := range ms {
		m.done <- g.exec(ctx, []*groupMember{m})
	}
}

// exec runs the members' statements in one batch, an implicit transaction.
func (g *groupCommit) exec(ctx context.Context, ms []*groupMember) error {
	g.rounds.Inc()
	g.creations.Add(float64(len(ms)))
	b := &pgx.Batch{}
	database.QueueGenericPlans(b)
	for _, m := range ms {
		for _, q := range m.stmts {
			// Queued afresh: pgx notes on a queued statement the prepared statement it ran
			// as, which a failed round's connection has deallocated by the retry.
			b.Queue(q.SQL, q.Arguments...)
		}
	}
	return g.pool.SendBatch(ctx, b).Close()
}
