package service

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipfile/shipfile/pkg/bus"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/ops"
	"github.com/shipfile/shipfile/pkg/storage"
)

// Connections says which of PostgreSQL, NATS and S3 a binary opens; a nil config is
// not opened.
type Connections struct {
	// Database opens a pgx pool (database.OpenAtLeast with MinConns).
	Database *database.Config
	// MinConns is the least MaxConns of the pool (0: the URL's or pgx's default).
	MinConns int
	// NATS connects to NATS and creates or updates the streams (events.Connect), as
	// client name "shipfile-<name>".
	NATS *bus.Config
	// S3 opens the object store and makes sure its bucket exists (storage.Open).
	S3 *storage.Config
}

// Conns are a binary's open connections: the ones its Connections asked for, nil for
// the others.
type Conns struct {
	Pool    *pgxpool.Pool
	Bus     *bus.Conn
	Objects *storage.Store
}

// Open opens what want asks for, in the order PostgreSQL, NATS, S3; when one fails it
// closes the ones already open and returns the error. name is the binary's name.
func Open(ctx context.Context, name string, want Connections) (*Conns, error) {
	c := &Conns{}
	var err error
	if want.Database != nil {
		if c.Pool, err = database.OpenAtLeast(ctx, want.Database.URL, want.MinConns); err != nil {
			return nil, err
		}
	}
	if want.NATS != nil {
		if c.Bus, err = events.Connect(ctx, *want.NATS, "shipfile-"+name); err != nil {
			c.Close()
			return nil, err
		}
	}
	if want.S3 != nil {
		if c.Objects, err = storage.Open(ctx, *want.S3); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Close drains NATS and closes the pool (the object store holds nothing to close).
func (c *Conns) Close() {
	if c.Bus != nil {
		c.Bus.Close()
	}
	if c.Pool != nil {
		c.Pool.Close()
	}
}

// Checks are the readiness checks of the open connections ("postgres", "nats", "s3"),
// followed by extra, for ops.Handler.
func (c *Conns) Checks(extra ...ops.Check) []ops.Check {
	var cs []ops.Check
	if c.Pool != nil {
		cs = append(cs, ops.Check{Name: "postgres", Fn: c.Pool.Ping})
	}
	if c.Bus != nil {
		cs = append(cs, ops.Check{Name: "nats", Fn: c.Bus.Check})
	}
	if c.Objects != nil {
		cs = append(cs, ops.Check{Name: "s3", Fn: c.Objects.Check})
	}
	return append(cs, extra...)
}
