package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/pkg/secretbox"
)

// resealBatch is how many subscriptions one pass of ResealWebhookSecrets reads at once.
const resealBatch = 500

// The SQL of ResealWebhookSecrets is written by hand rather than through sqlc: it runs
// once at start, and a pattern over the current key id is all it filters on.
const (
	// qStaleSecrets pages the subscriptions with a secret not sealed under the key whose
	// prefix is $1 (plaintext or another key), by id after $2.
	qStaleSecrets = `SELECT id, secret, previous_secret FROM webhook_subscriptions
WHERE id > $2 AND (left(secret, length($1)) <> $1 OR left(previous_secret, length($1)) <> $1)
ORDER BY id LIMIT $3`
	// qResealSecrets replaces a subscription's secrets only if they are still what was
	// read (compare and swap): another gateway starting at once, or a rotation meanwhile,
	// wins and the row is left to it.
	qResealSecrets = `UPDATE webhook_subscriptions SET secret = $2, previous_secret = $3
WHERE id = $1 AND secret = $4 AND previous_secret IS NOT DISTINCT FROM $5`
)

// ResealReport says what ResealWebhookSecrets did.
type ResealReport struct {
	Resealed int     // subscriptions whose secrets are now sealed under the current key
	Unknown  []int64 // subscriptions with a secret sealed under a key the ring lacks (left as they are)
}

// ResealWebhookSecrets seals under the ring's current key every webhook secret (and
// previous secret) stored in clear or under the ring's previous key. It is idempotent,
// and safe with several instances running it at once: each row is replaced only if it
// is still what was read. Rows sealed under a key the ring does not hold are left
// alone and reported. It never logs or returns a secret.
func (s *Postgres) ResealWebhookSecrets(ctx context.Context, ring *secretbox.Keyring) (ResealReport, error) {
	var rep ResealReport
	prefix := secretbox.Prefix + ring.CurrentID() + ":"
	var after int64
	for {
		rows, err := s.pool.Query(ctx, qStaleSecrets, prefix, after, resealBatch)
		if err != nil {
			return rep, fmt.Errorf("reseal webhook secrets: %w", err)
		}
		type row struct {
			id          int64
			secret      string
			previous    *string
			newSecret   string
			newPrevious *string
		}
		batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var x row
			err := r.Scan(&x.id, &x.secret, &x.previous)
			return x, err
		})
		if err != nil {
			return rep, fmt.Errorf("reseal webhook secrets: %w", err)
		}
		for i := range batch {
			x := &batch[i]
			after = x.id
			var errSecret, errPrevious error
			x.newSecret, _, errSecret = ring.Reseal(x.secret)
			if x.previous != nil {
				p, _, err := ring.Reseal(*x.previous)
				x.newPrevious, errPrevious = &p, err
			}
			if err := errors.Join(errSecret, errPrevious); err != nil {
				rep.Unknown = append(rep.Unknown, x.id)
				continue
			}
			tag, err := s.pool.Exec(ctx, qResealSecrets, x.id, x.newSecret, x.newPrevious, x.secret, x.previous)
			if err != nil {
				return rep, fmt.Errorf("reseal webhook secret of subscription %d: %w", x.id, err)
			}
			rep.Resealed += int(tag.RowsAffected())
		}
		if len(batch) < resealBatch {
			return rep, nil
		}
	}
}
