package transfersdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

// TusReleaseChannel is the PostgreSQL notification channel on which a request for a
// resumable upload asks the request that holds its lease to let go (AskRelease); the
// payload is the holder's lease owner (a uuid).
const TusReleaseChannel = "shipfile_tus_release"

// TusReleaseAppName is the application_name of FollowUploadReleases' connection.
const TusReleaseAppName = "shipfile-tus-release"

const (
	// releasePing is how often an idle listener proves its connection alive.
	releasePing = 10 * time.Second
	// releasePingTimeout bounds one ping; past it the connection is given up.
	releasePingTimeout = 2 * time.Second
)

// FollowUploadReleases keeps a dedicated connection LISTENing on TusReleaseChannel and
// calls ask with each holder named there, until ctx is cancelled; a lost connection
// is reopened with back-off. ask must not block (transfers.Resumable.AskRelease). An ask
// missed while the connection was down still reaches its holder: it is marked in the
// upload's row too, which the holder reads at its next renewal.
func (s *Store) FollowUploadReleases(ctx context.Context, ask func(holder uuid.UUID), log *slog.Logger) {
	sqldb.FollowListener(ctx, log, "tus release listener: connection lost; asks to let go reach a PATCH at its next lease renewal until it is back",
		func(ctx context.Context) (bool, error) { return s.followReleasesOnce(ctx, ask) })
}

func (s *Store) followReleasesOnce(ctx context.Context, ask func(uuid.UUID)) (connected bool, err error) {
	conn, closeConn, err := s.sql.Listen(ctx, TusReleaseAppName, TusReleaseChannel, func(cfg *pgconn.Config) {
		// A wait that times out only moves the socket's deadline (no cancel request that
		// could hit the next ping).
		cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
		}
		cfg.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) {
			if holder, err := uuid.Parse(n.Payload); err == nil {
				ask(holder)
			}
		}
	})
	if err != nil {
		return false, err
	}
	defer closeConn()
	for {
		wctx, cancel := context.WithTimeout(ctx, releasePing)
		err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return true, ctx.Err()
		case err == nil:
			continue
		case !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err):
			return true, fmt.Errorf("wait: %w", err)
		}
		pctx, cancel := context.WithTimeout(ctx, releasePingTimeout)
		_, err = conn.Exec(pctx, "SELECT 1").ReadAll()
		cancel()
		if err != nil {
			return true, fmt.Errorf("ping: %w", err)
		}
	}
}
