package store

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// AuthChannel is the PostgreSQL notification channel on which the triggers of
// migration 00008 announce every change to a user or an API token ("user ID",
// "token ID").
const AuthChannel = "shipfile_auth"

// AuthFeedAppName is the application_name of FollowAuthChanges' connection in
// pg_stat_activity.
const AuthFeedAppName = "shipfile-auth-feed"

const (
	// authFeedPing is how often the feed proves its connection current. It must be
	// well under app.DefaultTokenFeedWindow, so a healthy feed keeps the cache on.
	authFeedPing = 200 * time.Millisecond
	// authFeedPingTimeout bounds one ping; past it the connection is given up.
	authFeedPingTimeout = 2 * time.Second
	// Back-off between reconnects.
	authFeedMinBackoff = 100 * time.Millisecond
	authFeedMaxBackoff = 5 * time.Second
)

var _ AuthFeed = (*app.TokenCache)(nil)

// AuthFeed receives the changes FollowAuthChanges hears: app.TokenCache.
type AuthFeed interface {
	// Forget drops what the cache holds about a changed token or user.
	Forget(app.AuthChange)
	// Live says every change committed before at has been passed to Forget.
	Live(at time.Time)
	// Lost says changes may have been missed: the cache must empty and stop serving.
	Lost()
}

// FollowAuthChanges keeps a dedicated connection LISTENing on AuthChannel and passes
// every notification to feed.Forget, until ctx is cancelled. It pings the server every
// 200 ms: a notification committed before a ping started has arrived by its answer, so
// each answered ping is reported with feed.Live(its start). When the connection fails
// or a ping goes unanswered it reports feed.Lost and reconnects with back-off; after
// each (re)connect, once LISTEN is in place, it reports Lost again (what changed before
// it was missed) and then Live.
func (s *Postgres) FollowAuthChanges(ctx context.Context, feed AuthFeed, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		connected, err := s.followAuthOnce(ctx, feed)
		feed.Lost()
		if ctx.Err() != nil {
			return
		}
		if connected {
			backoff = 0
		}
		backoff = min(max(2*backoff, authFeedMinBackoff), authFeedMaxBackoff)
		wait := backoff/2 + rand.N(backoff/2+1)
		log.Warn("auth feed: connection lost; token look-ups bypass the cache until it is back", "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// followAuthOnce runs one connection of the feed until it fails; connected says LISTEN
// was in place.
func (s *Postgres) followAuthOnce(ctx context.Context, feed AuthFeed) (connected bool, err error) {
	cfg := s.pool.Config().ConnConfig.Config.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = AuthFeedAppName
	// Called while a ping reads the connection, so a notification is passed on
	// before the ping that received it reports Live.
	cfg.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) { feed.Forget(parseAuthChange(n.Payload)) }
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{AuthChannel}.Sanitize()).ReadAll(); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	feed.Lost() // changes before the LISTEN were not heard
	tick := time.NewTicker(authFeedPing)
	defer tick.Stop()
	for {
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, authFeedPingTimeout)
		err := conn.Ping(pctx)
		cancel()
		if err != nil {
			return true, fmt.Errorf("ping: %w", err)
		}
		feed.Live(start)
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-tick.C:
		}
	}
}

// parseAuthChange reads a notification's payload, "user ID" or "token ID"; anything
// else becomes a change of unknown kind, which empties the whole cache.
func parseAuthChange(payload string) app.AuthChange {
	kind, id, ok := strings.Cut(payload, " ")
	n, err := strconv.ParseInt(id, 10, 64)
	if !ok || err != nil || (kind != app.AuthChangeUser && kind != app.AuthChangeToken) {
		return app.AuthChange{Kind: "unknown"}
	}
	return app.AuthChange{Kind: kind, ID: n}
}
