package webhookadmindb

import (
	"context"
	"errors"
	"fmt"

	"github.com/shipfile/shipfile/pkg/secretbox"
)

// resealBatch is how many subscriptions one pass of ResealWebhookSecrets reads at once.
const resealBatch = 500

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
func (s *Store) ResealWebhookSecrets(ctx context.Context, ring *secretbox.Keyring) (ResealReport, error) {
	var rep ResealReport
	prefix := secretbox.Prefix + ring.CurrentID() + ":"
	var after int64
	for {
		batch, err := s.q.StaleWebhookSecrets(ctx, StaleWebhookSecretsParams{Prefix: prefix, AfterID: after, MaxRows: resealBatch})
		if err != nil {
			return rep, fmt.Errorf("reseal webhook secrets: %w", err)
		}
		for _, x := range batch {
			after = x.ID
			var errSecret, errPrevious error
			arg := ResealWebhookSecretParams{ID: x.ID, OldSecret: x.Secret, OldPreviousSecret: x.PreviousSecret}
			arg.Secret, _, errSecret = ring.Reseal(x.Secret)
			if x.PreviousSecret != nil {
				p, _, err := ring.Reseal(*x.PreviousSecret)
				arg.PreviousSecret, errPrevious = &p, err
			}
			if err := errors.Join(errSecret, errPrevious); err != nil {
				rep.Unknown = append(rep.Unknown, x.ID)
				continue
			}
			n, err := s.q.ResealWebhookSecret(ctx, arg)
			if err != nil {
				return rep, fmt.Errorf("reseal webhook secret of subscription %d: %w", x.ID, err)
			}
			rep.Resealed += int(n)
		}
		if len(batch) < resealBatch {
			return rep, nil
		}
	}
}
