package store

import (
	"fmt"

	"github.com/shipfile/shipfile/services/webhooks/internal/app"
)

// SecretOpener decrypts the secrets the gateway stored sealed (secretbox.Keyring): a
// value in clear, written before encryption, comes back as it is.
type SecretOpener interface {
	Open(sealed string) (string, error)
}

// openSecrets decrypts a subscription's signing secrets as read from
// webhook_subscriptions (secret, previous_secret), in place. Every read of those
// columns goes through it. The error names the subscription, never a secret.
func (p *Postgres) openSecrets(s *app.Subscription) error {
	secret, err := p.secrets.Open(s.Secret)
	if err != nil {
		return fmt.Errorf("store: webhook secret of subscription %d: %w", s.ID, err)
	}
	s.Secret = secret
	if s.PreviousSecret != "" {
		prev, err := p.secrets.Open(s.PreviousSecret)
		if err != nil {
			return fmt.Errorf("store: previous webhook secret of subscription %d: %w", s.ID, err)
		}
		s.PreviousSecret = prev
	}
	return nil
}
