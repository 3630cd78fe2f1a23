package webhookadmin

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/clip"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/netguard"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Store is the persistence the webhook service needs. ChangeWebhook locks the
// subscription's row, runs the given change, saves the row and writes the effects in
// one transaction; an error from the change rolls everything back.
type Store interface {
	CreateWebhook(ctx context.Context, w Webhook) (Webhook, error)
	ListWebhooks(ctx context.Context) ([]Webhook, error)
	GetWebhook(ctx context.Context, id int64) (Webhook, error)
	ChangeWebhook(ctx context.Context, id int64, change func(w *Webhook) (app.Effects, error)) (Webhook, error)
	DeleteWebhook(ctx context.Context, id int64) error
	// WriteWebhookEffects writes effects that concern an existing subscription.
	WriteWebhookEffects(ctx context.Context, id int64, fx app.Effects) error
	// RedeliverWebhook puts a delivery of the subscription back to pending for a new
	// round of attempts and writes the effects.
	RedeliverWebhook(ctx context.Context, id int64, deliveryID uuid.UUID, fx app.Effects) error
	ListWebhookAttempts(ctx context.Context, f WebhookAttemptFilter) ([]WebhookAttempt, error)
}

// Service manages webhook subscriptions (admins only; checked by the transport). The
// webhooks service delivers their events.
type Service struct {
	store   Store
	secrets SecretSealer
	guard   netguard.Guard
	now     func() time.Time
}

// SecretSealer encrypts a signing secret for storage (secretbox.Keyring); the webhook
// dispatcher decrypts it.
type SecretSealer interface {
	Seal(plaintext string) (string, error)
}

// New returns the webhook service. Secrets are stored sealed by secrets. Unless
// allowPrivate, it refuses URLs whose host is localhost or an address pkg/netguard
// refuses (loopback, private, link-local, carrier-grade NAT, …).
func New(store Store, secrets SecretSealer, allowPrivate bool) *Service {
	return &Service{store: store, secrets: secrets, guard: netguard.Guard{AllowPrivate: allowPrivate}, now: time.Now}
}

// Limits and fixed values of webhook subscriptions.
const (
	MaxWebhookURLLen         = 2048
	MaxWebhookDescriptionLen = 500
	// WebhookSecretPrefix starts every signing secret; base64 of random bytes follows.
	WebhookSecretPrefix = "whsec_"
	webhookSecretBytes  = 32
	// PreviousSecretTTL is how long a rotated-out secret keeps signing webhook-signature.
	PreviousSecretTTL = 24 * time.Hour
	// AdminDisabledReason is the disabled_reason of a subscription an admin turned off.
	AdminDisabledReason = "disabled by an admin"
	// WebhookTestMessage is the message of the webhook.test event.
	WebhookTestMessage = "This is a test delivery from shipfile."
	// DefaultWebhookMaxInFlight, MaxWebhookMaxInFlight and MaxWebhookRateLimit bound
	// max_in_flight (1–256) and rate_limit (1–10000 per second, or none).
	DefaultWebhookMaxInFlight = 16
	MaxWebhookMaxInFlight     = 256
	MaxWebhookRateLimit       = 10000
	// OrderingNone and OrderingPackage are a subscription's orderings: its deliveries
	// go as they come, or each package's events one after the other, in the order they
	// happened (the dispatcher holds a later one while an earlier one is being
	// delivered or retried).
	OrderingNone    = "none"
	OrderingPackage = "package"
)

// Create validates and stores a new, active subscription with a fresh secret. The
// returned record carries the secret, which no later read shows.
func (s *Service) Create(ctx context.Context, in NewWebhook) (Webhook, error) {
	if in.URL == nil {
		return Webhook{}, app.Invalid("url is required")
	}
	w := Webhook{URL: *in.URL, Events: slices.Clone(events.Types), AllEvents: true, Active: true, MaxInFlight: DefaultWebhookMaxInFlight,
		Ordering: OrderingNone}
	if err := s.validateURL(w.URL); err != nil {
		return Webhook{}, err
	}
	if in.Events != nil {
		evs, err := normalizeEvents(*in.Events)
		if err != nil {
			return Webhook{}, err
		}
		w.Events, w.AllEvents = evs, len(evs) == len(events.Types)
	}
	if in.MaxInFlight != nil {
		if err := validateMaxInFlight(*in.MaxInFlight); err != nil {
			return Webhook{}, err
		}
		w.MaxInFlight = *in.MaxInFlight
	}
	if in.RateLimit != nil {
		if err := validateRateLimit(*in.RateLimit); err != nil {
			return Webhook{}, err
		}
		w.RateLimit = in.RateLimit
	}
	if in.Ordering != nil {
		if err := validateOrdering(*in.Ordering); err != nil {
			return Webhook{}, err
		}
		w.Ordering = *in.Ordering
	}
	if in.Description != nil {
		if err := validateDescription(*in.Description); err != nil {
			return Webhook{}, err
		}
		w.Description = *in.Description
	}
	secret, sealed, err := s.newSecret()
	if err != nil {
		return Webhook{}, err
	}
	w.Secret = sealed
	now := s.now().UTC().Truncate(time.Microsecond)
	w.CreatedAt, w.UpdatedAt = now, now
	created, err := s.store.CreateWebhook(ctx, w)
	if err != nil {
		return Webhook{}, err
	}
	created.Secret = secret
	return created, nil
}

// List returns every subscription, oldest first.
func (s *Service) List(ctx context.Context) ([]Webhook, error) { return s.store.ListWebhooks(ctx) }

// Get returns one subscription.
func (s *Service) Get(ctx context.Context, id int64) (Webhook, error) {
	return s.store.GetWebhook(ctx, id)
}

// Update applies a patch with the rules of Create. Turning a subscription on clears
// why and since when it was off and its failure streak; turning an active one off
// records that an admin did it (an inactive one keeps the reason it already has).
func (s *Service) Update(ctx context.Context, id int64, p WebhookPatch) (Webhook, error) {
	if p.URL != nil {
		if err := s.validateURL(*p.URL); err != nil {
			return Webhook{}, err
		}
	}
	var evs []string
	if p.Events != nil {
		var err error
		if evs, err = normalizeEvents(*p.Events); err != nil {
			return Webhook{}, err
		}
	}
	if p.Description != nil {
		if err := validateDescription(*p.Description); err != nil {
			return Webhook{}, err
		}
	}
	if p.MaxInFlight != nil {
		if err := validateMaxInFlight(*p.MaxInFlight); err != nil {
			return Webhook{}, err
		}
	}
	if p.RateLimit.Set && p.RateLimit.Value != nil {
		if err := validateRateLimit(*p.RateLimit.Value); err != nil {
			return Webhook{}, err
		}
	}
	if p.Ordering != nil {
		if err := validateOrdering(*p.Ordering); err != nil {
			return Webhook{}, err
		}
	}
	return s.store.ChangeWebhook(ctx, id, func(w *Webhook) (app.Effects, error) {
		now := s.now().UTC().Truncate(time.Microsecond)
		if p.URL != nil {
			w.URL = *p.URL
		}
		if evs != nil {
			w.Events, w.AllEvents = evs, len(evs) == len(events.Types)
		}
		if p.MaxInFlight != nil {
			w.MaxInFlight = *p.MaxInFlight
		}
		if p.RateLimit.Set {
			w.RateLimit = p.RateLimit.Value
		}
		if p.Ordering != nil {
			w.Ordering = *p.Ordering
		}
		if p.Description != nil {
			w.Description = *p.Description
		}
		if p.Active != nil {
			switch {
			case *p.Active:
				// Failures before now no longer count (the dispatcher's health pass
				// derives failing_since from the attempt log).
				w.Active, w.DisabledReason, w.DisabledAt, w.FailingSince, w.FailuresCountedFrom = true, nil, nil, nil, &now
			case w.Active:
				reason := AdminDisabledReason
				w.Active, w.DisabledReason, w.DisabledAt = false, &reason, &now
			}
		}
		w.UpdatedAt = now
		return app.Effects{}, nil
	})
}

// Delete removes a subscription with its deliveries and their attempts.
func (s *Service) Delete(ctx context.Context, id int64) error { return s.store.DeleteWebhook(ctx, id) }

// RotateSecret gives the subscription a new secret and returns it; it is never
// available again. The old secret keeps signing webhook-signature for
// PreviousSecretTTL, so receivers can switch without losing deliveries.
func (s *Service) RotateSecret(ctx context.Context, id int64) (string, error) {
	secret, sealed, err := s.newSecret()
	if err != nil {
		return "", err
	}
	_, err = s.store.ChangeWebhook(ctx, id, func(w *Webhook) (app.Effects, error) {
		now := s.now().UTC().Truncate(time.Microsecond)
		// The old secret moves as it is stored (sealed): the gateway never needs it in clear.
		old, until := w.Secret, now.Add(PreviousSecretTTL)
		w.Secret, w.PreviousSecret, w.PreviousSecretUntil = sealed, &old, &until
		w.UpdatedAt = now
		return app.Effects{}, nil
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// Test queues a webhook.test event for the subscription, whatever its selection and
// even when it is inactive, and returns the event's id.
func (s *Service) Test(ctx context.Context, u app.User, c app.Client, id int64) (string, error) {
	env := webhookTest(id)
	actor := u.ID
	fx := app.Effects{
		Events: []*eventsv1.Envelope{env},
		Audit:  []app.AuditEntry{{Actor: "user", ActorUserID: &actor, Action: "webhook.test", IP: c.IP, UserAgent: c.UserAgent}},
	}
	if err := s.store.WriteWebhookEffects(ctx, id, fx); err != nil {
		return "", err
	}
	return env.GetEventId(), nil
}

// Redeliver starts a new round of attempts for one of the subscription's deliveries,
// whatever its status: the same body under the same delivery id.
func (s *Service) Redeliver(ctx context.Context, id int64, deliveryID uuid.UUID) error {
	fx := app.Effects{WebhookJobs: []app.WebhookJob{redeliveryJob(id, deliveryID.String())}}
	return s.store.RedeliverWebhook(ctx, id, deliveryID, fx)
}

// Attempts returns a page of a subscription's delivery attempts, newest first.
func (s *Service) Attempts(ctx context.Context, f WebhookAttemptFilter) ([]WebhookAttempt, error) {
	if _, err := s.store.GetWebhook(ctx, f.WebhookID); err != nil {
		return nil, err
	}
	return s.store.ListWebhookAttempts(ctx, f)
}

// validateURL accepts an absolute http or https URL with a host and no user info. Unless
// private targets are allowed, the host must not be localhost or a literal address the
// guard (pkg/netguard) refuses; the dispatcher asks the same guard about the resolved
// address when it connects, so a name that resolves there is refused then.
func (s *Service) validateURL(raw string) error {
	if raw == "" {
		return app.Invalid("url is required")
	}
	if utf8.RuneCountInString(raw) > MaxWebhookURLLen {
		return app.Invalid("url must be at most %d characters", MaxWebhookURLLen)
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return app.Invalid("url must not contain spaces or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" {
		return app.Invalid("url must be an absolute http or https URL")
	}
	if u.User != nil {
		return app.Invalid("url must not contain a user name or password")
	}
	host := u.Hostname()
	if host == "" {
		return app.Invalid("url must have a host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return app.Invalid("url port must be from 1 to 65535")
		}
	}
	if err := s.guard.CheckHost(host); err != nil {
		if errors.Is(err, netguard.ErrNotCanonical) {
			// Resolvers read 127.1 or 2130706433 as addresses; only canonical ones are
			// accepted, so the guard sees every literal address.
			return app.Invalid("url host must be a domain name or an IP address in standard notation")
		}
		return app.Invalid("url %s, which this server does not allow (SHIPFILE_WEBHOOK_ALLOW_PRIVATE)", err.Error())
	}
	return nil
}

// normalizeEvents checks a selection of event types and returns it without
// duplicates, in the order of events.Types.
func normalizeEvents(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, app.Invalid("events must name at least one event (leave it out to select all of them)")
	}
	for _, e := range in {
		if !slices.Contains(events.Types, e) {
			return nil, app.Invalid("events: unknown event %q; the known events are %s", clip.Marked(e, 100), strings.Join(events.Types, ", "))
		}
	}
	out := make([]string, 0, len(in))
	for _, t := range events.Types {
		if slices.Contains(in, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

func validateMaxInFlight(n int) error {
	if n < 1 || n > MaxWebhookMaxInFlight {
		return app.Invalid("max_in_flight must be from 1 to %d", MaxWebhookMaxInFlight)
	}
	return nil
}

func validateOrdering(o string) error {
	if o != OrderingNone && o != OrderingPackage {
		return app.Invalid("ordering must be %q or %q", OrderingNone, OrderingPackage)
	}
	return nil
}

func validateRateLimit(n int) error {
	if n < 1 || n > MaxWebhookRateLimit {
		return app.Invalid("rate_limit must be from 1 to %d deliveries per second, or null for no limit", MaxWebhookRateLimit)
	}
	return nil
}

func validateDescription(d string) error {
	if utf8.RuneCountInString(d) > MaxWebhookDescriptionLen || strings.ContainsFunc(d, app.IsNoteControl) {
		return app.Invalid("description must be at most %d characters without control characters", MaxWebhookDescriptionLen)
	}
	return nil
}

// newSecret returns a fresh signing secret and the same sealed for storage.
func (s *Service) newSecret() (secret, sealed string, err error) {
	b := make([]byte, webhookSecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("webhook secret: %w", err)
	}
	secret = WebhookSecretPrefix + base64.StdEncoding.EncodeToString(b)
	if sealed, err = s.secrets.Seal(secret); err != nil {
		return "", "", fmt.Errorf("seal webhook secret: %w", err)
	}
	return secret, sealed, nil
}
