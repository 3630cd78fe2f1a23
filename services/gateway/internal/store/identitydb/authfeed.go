package identitydb

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

// AuthChannel is the PostgreSQL notification channel on which the triggers of
// migration 00008 announce every change to a user or an API token ("user ID",
// "token ID"), and each gateway's feed sends itself probes ("probe …").
const AuthChannel = "shipfile_auth"

// AuthFeedAppName is the application_name of FollowAuthChanges' connection in
// pg_stat_activity.
const AuthFeedAppName = "shipfile-auth-feed"

const (
	// authFeedPing is how often the feed proves itself current. It must be well under
	// identity.DefaultTokenFeedWindow, so a healthy feed keeps the cache on.
	authFeedPing = 200 * time.Millisecond
	// probePrefix starts the payload of a feed's probe of itself.
	probePrefix = "probe "
	// authFeedPingTimeout bounds one ping; past it the connection is given up.
	authFeedPingTimeout = 2 * time.Second
)

var _ AuthFeed = (*identity.TokenCache)(nil)

// AuthFeed receives the changes FollowAuthChanges hears: identity.TokenCache.
type AuthFeed interface {
	// Forget drops what the cache holds about a changed token or user.
	Forget(identity.AuthChange)
	// Live says every change committed before at has been passed to Forget.
	Live(at time.Time)
	// Lost says changes may have been missed: the cache must empty and stop serving.
	Lost()
}

// FollowAuthChanges keeps a dedicated connection LISTENing on AuthChannel and passes
// every change notified there to feed.Forget, until ctx is cancelled. Every 200 ms it
// notifies a probe to itself: notifications reach a listener in commit order, so once
// its own probe is back, every change committed before the probe was sent has been
// passed on, and it reports feed.Live(when the probe was sent). A probe that does not
// come back in the same round trip (a transaction-mode pooler between the gateway and
// PostgreSQL loses notifications), a failed query or a lost connection is reported
// with feed.Lost, and it reconnects with back-off; after each (re)connect, once LISTEN
// is in place, it reports Lost again (what changed before it was missed) before the
// first Live. The probes are the only notifications a healthy installation sends all
// the time: 5 a second per gateway, none on a request's path.
func (s *Store) FollowAuthChanges(ctx context.Context, feed AuthFeed, log *slog.Logger) {
	sqldb.FollowListener(ctx, log, "auth feed: connection lost; token look-ups bypass the cache until it is back",
		func(ctx context.Context) (bool, error) {
			connected, err := s.followAuthOnce(ctx, feed)
			feed.Lost()
			return connected, err
		})
}

// followAuthOnce runs one connection of the feed until it fails; connected says LISTEN
// was in place.
func (s *Store) followAuthOnce(ctx context.Context, feed AuthFeed) (connected bool, err error) {
	// Called while a probe's query reads the connection, so a change is passed on
	// before the probe that followed it reports Live.
	tag := rand.Text()[:12] // base32: safe inside the probe's SQL literal
	var expect string
	var heard bool
	// The feed's probe is not in queries.sql either: it runs on the listener's bare
	// connection.
	conn, closeConn, err := s.sql.Listen(ctx, AuthFeedAppName, AuthChannel, func(cfg *pgconn.Config) {
		cfg.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) {
			if probe, ok := strings.CutPrefix(n.Payload, probePrefix); ok {
				heard = heard || probe == expect // another gateway's probe is no change
				return
			}
			feed.Forget(parseAuthChange(n.Payload))
		}
	})
	if err != nil {
		return false, err
	}
	defer closeConn()
	feed.Lost() // changes before the LISTEN were not heard
	tick := time.NewTicker(authFeedPing)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		expect, heard = tag+" "+strconv.Itoa(seq), false
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, authFeedPingTimeout)
		_, err := conn.Exec(pctx, "SELECT pg_notify("+quote(AuthChannel)+", "+quote(probePrefix+expect)+")").ReadAll()
		cancel()
		if err != nil {
			return true, fmt.Errorf("probe: %w", err)
		}
		if !heard {
			return true, fmt.Errorf("probe: its own notification did not come back; LISTEN does not work on this connection (a transaction-mode pooler?)")
		}
		feed.Live(start)
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-tick.C:
		}
	}
}

// quote returns s as an SQL string literal; s holds no quote or backslash here.
func quote(s string) string { return "'" + s + "'" }

// parseAuthChange reads a notification's payload, "user ID" or "token ID"; anything
// else becomes a change of unknown kind, which empties the whole cache.
func parseAuthChange(payload string) identity.AuthChange {
	kind, id, ok := strings.Cut(payload, " ")
	n, err := strconv.ParseInt(id, 10, 64)
	if !ok || err != nil || (kind != identity.AuthChangeUser && kind != identity.AuthChangeToken) {
		return identity.AuthChange{Kind: "unknown"}
	}
	return identity.AuthChange{Kind: kind, ID: n}
}
