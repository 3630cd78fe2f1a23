package store

import (
	"context"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/groupcommit"
)

// groupRoundTimeout bounds a shared round, which runs on no request's context (its
// members' clients may go away while it runs; each member's own wait is bounded by
// its context as long as the member is still queued).
const groupRoundTimeout = 30 * time.Second

// groupRoundMax is the most creations one round carries.
const groupRoundMax = 1024

// groupCommit runs the write batches of concurrent requests (package creations) in
// shared round trips (pkg/groupcommit). While its rounds are all in flight, the next
// creations queue; when a round ends, what queued goes in the next round: one pgx
// batch, one implicit transaction, one commit, one wake-up of its backend. A lone
// request goes at once, so a quiet gateway pays nothing; under load the rounds grow
// with the queue, with no timer. Each batch's statements are INSERTs of given values
// (see CreatePackage), run with generic plans.
//
// A round sends every member's statements first and every member's audit entries last,
// so the audit chain's head (migration 00038), which a transaction takes at its first
// chained entry and keeps until it commits, is held by a round for its audit entries
// and its commit only: rounds of different owners write their packages, recipients and
// outbox rows side by side and take turns on the head for the rest.
//
// A round that fails is run again one member at a time, so each member gets its own
// outcome and one member's error (a constraint it breaks, say) does not fail the others:
// the shared transaction rolled back as a whole, so nothing of it was written. A member
// whose client went away while it queued is not written; one a round has taken waits
// for that round's outcome.
type groupCommit struct {
	c *groupcommit.Committer[creation, struct{}]

	// rounds counts the round trips sent, creations the creations they carried (their
	// ratio: creations a commit); exported through WithRegisterer.
	rounds, creations prometheus.Counter
}

func newGroupCommit(pool *pgxpool.Pool) *groupCommit {
	g := &groupCommit{
		rounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_package_create_rounds_total",
			Help: "Round trips (each one transaction and one commit) that carried package creations.",
		}),
		creations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipfile_package_create_round_creations_total",
			Help: "Package creations sent in those round trips (per round: this over shipfile_package_create_rounds_total).",
		}),
	}
	// As many rounds in flight as the gateway has CPUs, and at most half the pool, so
	// that they leave connections to every other request. Fewer rounds make larger ones,
	// which suits a PostgreSQL with few cores; more rounds use more of its backends where
	// it has many, and the gateway's CPUs stand in for both (the measurements:
	// docs/BENCHMARKS.md, "How many rounds in flight"). The runners live as long as the
	// store.
	g.c = groupcommit.New(groupcommit.Options{
		Runners: max(1, min(int(pool.Config().MaxConns)/2, runtime.GOMAXPROCS(0))),
		Max:     groupRoundMax,
		Timeout: groupRoundTimeout,
		Split:   true,
		Exact:   true,
	}, func(ctx context.Context, members []creation) ([]struct{}, error) {
		if err := g.exec(ctx, pool, members); err != nil {
			return nil, err
		}
		return make([]struct{}, len(members)), nil
	})
	return g
}

// creation is one member of a round: its statements, and its audit entries, which the
// round sends after every member's statements.
type creation struct {
	stmts, audit []*pgx.QueuedQuery
}

// run commits c, alone or with the statements of concurrent calls, and returns the
// outcome of c. A call still queued when ctx ends returns ctx's error and writes
// nothing; once a round has taken it, it waits for that round's outcome.
func (g *groupCommit) run(ctx context.Context, c creation) error {
	_, err := g.c.Do(ctx, c)
	return err
}

// exec runs the members' statements, then their audit entries, in one batch, an
// implicit transaction.
func (g *groupCommit) exec(ctx context.Context, pool *pgxpool.Pool, members []creation) error {
	g.rounds.Inc()
	g.creations.Add(float64(len(members)))
	b := &pgx.Batch{}
	database.QueueGenericPlans(b)
	// Queued afresh: pgx notes on a queued statement the prepared statement it ran as,
	// which a failed round's connection has deallocated by the retry.
	for _, m := range members {
		for _, q := range m.stmts {
			b.Queue(q.SQL, q.Arguments...)
		}
	}
	for _, m := range members {
		for _, q := range m.audit {
			b.Queue(q.SQL, q.Arguments...)
		}
	}
	return pool.SendBatch(ctx, b).Close()
}
