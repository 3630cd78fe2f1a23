package sqldb

import (
	"context"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Back-off between a listener's reconnects (FollowListener).
const (
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
)

// FollowListener runs once, a listener's connection, until ctx is cancelled: again
// after each failure, with a jittered back-off between 100 ms and 5 s that starts over
// once a connection was LISTENing (connected). Each failure is logged as lost, with
// its error and the wait before the next try.
func FollowListener(ctx context.Context, log *slog.Logger, lost string, once func(context.Context) (connected bool, err error)) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		connected, err := once(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			backoff = 0
		}
		backoff = min(max(2*backoff, listenMinBackoff), listenMaxBackoff)
		wait := backoff/2 + mrand.N(backoff/2+1)
		log.Warn(lost, "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Listen opens a dedicated connection named appName (in pg_stat_activity) on the
// pool's configuration, adjusted by configure (which sets OnNotification), and LISTENs
// on channel. The caller defers closeConn. The statements of a listener run on a bare
// pgconn.PgConn (simple protocol, the notifications read by OnNotification), which
// sqlc's DBTX does not fit; LISTEN takes no parameters.
func (d *DB) Listen(ctx context.Context, appName, channel string, configure func(*pgconn.Config)) (conn *pgconn.PgConn, closeConn func(), err error) {
	cfg := d.Pool.Config().ConnConfig.Config.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = appName
	configure(cfg)
	conn, err = pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	closeConn = func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()).ReadAll(); err != nil {
		closeConn()
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	return conn, closeConn, nil
}
