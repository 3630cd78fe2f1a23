// Package store implements the gateway's persistence of packages (their files and
// recipients, and the files as a link sees them) and encryption keys on PostgreSQL, and
// its objects on S3. The SQL lives in queries.sql and the other *.sql files beside it
// and is compiled by sqlc (make generate) into the *.gen.go files; the Go files adapt
// the generated code to the app packages' types and errors. The other domains' stores
// (identity, links, policies, audit, webhook administration, previews, resumable
// uploads) are the <domain>db packages under this directory; what they all share is
// sqldb.
package store

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

// Postgres is the gateway's store on a pgx pool: packages and their files and
// recipients, encryption keys. The domains with a store of their own (identity, links,
// policies, audit, webhook administration, previews, resumable uploads) are in the
// <domain>db packages beside it; every store writes its changes' effects through one
// sqldb.DB.
type Postgres struct {
	pool *pgxpool.Pool
	q    *Queries
	// sql runs the transactions that write effects and wakes the outbox relay.
	sql *sqldb.DB
	// creates shares round trips and commits between concurrent package creations.
	creates *groupCommit
}

// Option configures a Postgres store.
type Option func(*Postgres)

// WithDB has the store write effects through d (its outbox wake-up and sealer), the
// DB every other store of the gateway shares. Without it the store has a DB of its
// own on its pool, which wakes nothing and seals nothing.
func WithDB(d *sqldb.DB) Option { return func(s *Postgres) { s.sql = d } }

// WithRegisterer registers the store's metrics with reg: how many package creations
// share a round trip and a commit.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(s *Postgres) { reg.MustRegister(s.creates.rounds, s.creates.creations) }
}

// NewPostgres returns the store on pool.
func NewPostgres(pool *pgxpool.Pool, opts ...Option) *Postgres {
	s := &Postgres{pool: pool, q: New(pool), creates: newGroupCommit(pool)}
	for _, o := range opts {
		o(s)
	}
	if s.sql == nil {
		s.sql = sqldb.NewDB(pool)
	}
	return s
}

// Close stops the runners of the package creations' group commits once the rounds
// under way are done; a creation after Close fails (groupcommit.ErrClosed).
func (s *Postgres) Close() { s.creates.c.Close() }

// GetUser returns the user with that id: the package service reads a package's owner
// through it. Everything else about users is the identity domain's store, identitydb.
func (s *Postgres) GetUser(ctx context.Context, id int64) (app.User, error) {
	row, err := s.q.GetUser(ctx, id)
	if err != nil {
		return app.User{}, sqldb.NotFound(err, "user")
	}
	return toUser(row), nil
}

func toUser(r User) app.User {
	u := app.User{ID: r.ID, Email: r.Email, Name: r.Name, Role: app.Role(r.Role), Disabled: r.Disabled, CreatedAt: r.CreatedAt}
	if r.PasswordHash != nil {
		u.PasswordHash = *r.PasswordHash
	}
	if r.OidcIssuer != nil && r.OidcSubject != nil {
		u.OIDCIssuer, u.OIDCSubject = *r.OidcIssuer, *r.OidcSubject
	}
	if r.Language != nil {
		u.Language = *r.Language
	}
	return u
}
