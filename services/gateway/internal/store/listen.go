package store

import (
	"context"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// followListener runs once, a listener's connection, until ctx is cancelled: again
// after each failure, with a jittered back-off between authFeedMinBackoff and
// authFeedMaxBackoff that starts over once a connection was LISTENing (connected).
// Each failure is logged as lost, with its error and the wait before the next try.
func followListener(ctx context.Context, log *slog.Logger, lost string, once func(context.Context) (connected bool, err error)) {
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
		backoff = min(max(2*backoff, authFeedMinBackoff), authFeedMaxBackoff)
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

// listen opens a dedicated connection named appName (in pg_stat_activity) on the
// pool's configuration, adjusted by configure (which sets OnNotification), and LISTENs
// on channel. The caller defers closeConn. The statements of a listener run on a bare
// pgconn.PgConn (simple protocol, the notifications read by OnNotification), which
// sqlc's DBTX does not fit; LISTEN takes no parameters.
func (s *Postgres) listen(ctx context.Context, appName, channel string, configure func(*pgconn.Config)) (conn *pgconn.PgConn, closeConn func(), err error) {
	cfg := s.pool.Config().ConnConfig.Config.Copy()
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
