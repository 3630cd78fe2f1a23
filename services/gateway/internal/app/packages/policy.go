package packages

import (
	"context"
	"io"
	"math"
	"time"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/policies"
)

// Policies is what the package service asks of the policies domain (app/policies):
// the owner's effective policy, their active packages, and the reservation of an
// upload's bytes as they arrive.
type Policies interface {
	For(ctx context.Context, userID int64) (policies.Policy, error)
	// CheckActive holds the user's package creations and checks that one more fits
	// under the policy's max_active_packages; unlock once the package is created.
	CheckActive(ctx context.Context, userID int64, pol policies.Policy) (unlock func(), err error)
	StartMeter(ctx context.Context, userID, packageSize int64, objectKey string, step int64) (*policies.Meter, error)
	// Committed is told after a file of the user was recorded (the 90 % notice).
	Committed(ctx context.Context, userID int64)
}

// Option configures the package service at construction.
type Option func(*Packages)

// WithPolicies has every entrance of the package service follow the owner's policy:
// the package's terms on create, edit, finalize and a recipient's addition, and the
// storage quota, file and package sizes on uploads, whose bytes are reserved in steps
// of at least step bytes ahead of what is stored.
func WithPolicies(p Policies, step int64) Option {
	return func(s *Packages) { s.policies, s.meterStep = p, step }
}

// policyOf returns the policy of the user (ok false: no policies apply).
func (s *Packages) policyOf(ctx context.Context, userID int64) (policies.Policy, bool, error) {
	if s.policies == nil {
		return policies.Policy{}, false, nil
	}
	pol, err := s.policies.For(ctx, userID)
	return pol, err == nil, err
}

// checkNew checks a new package against its owner's policy: its terms, and that the
// owner may open one more. Call unlock once the package is stored (the owner's other
// creations wait for it while max_active_packages applies).
func (s *Packages) checkNew(ctx context.Context, p app.Package) (unlock func(), err error) {
	pol, ok, err := s.policyOf(ctx, p.OwnerUserID)
	if !ok {
		return func() {}, err
	}
	if err := policies.CheckPackage(pol, policies.TermsOf(p)); err != nil {
		return nil, err
	}
	return s.policies.CheckActive(ctx, p.OwnerUserID, pol)
}

// termsCheck returns the check of a changed package's terms against its owner's
// policy (nil when no policies apply), to run in the package's transaction: the
// policy is read before it.
func (s *Packages) termsCheck(ctx context.Context, ownerID int64) (func(p app.Package, expiryChanged bool) error, error) {
	pol, ok, err := s.policyOf(ctx, ownerID)
	if !ok {
		return nil, err
	}
	now := s.now()
	return func(p app.Package, expiryChanged bool) error {
		t := policies.TermsOf(p)
		if expiryChanged && pol.MaxTTLDays != nil {
			t.TTLDays = expiryDays(p.ExpiresAt, now)
		}
		return policies.CheckPackage(pol, t)
	}, nil
}

// meter starts the reservation of an upload's bytes into p under key (nil: nothing to
// reserve or check).
func (s *Packages) meter(ctx context.Context, p app.Package, key string) (*policies.Meter, error) {
	if s.policies == nil {
		return nil, nil
	}
	return s.policies.StartMeter(ctx, p.OwnerUserID, p.TotalSize, key, s.meterStep)
}

// meteredReader holds the bytes it reads against the meter before handing them on,
// so the store never takes a byte the quota has no room for.
type meteredReader struct {
	ctx context.Context
	r   io.Reader
	m   *policies.Meter
	err error // the meter's refusal
}

func (m *meteredReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if n > 0 {
		if merr := m.m.Take(m.ctx, int64(n)); merr != nil {
			m.err = merr
			return 0, merr
		}
	}
	return n, err
}

// expiryDays is a package's time to live from now, counted up (for the max_ttl_days
// of an edit that moves its expiry).
func expiryDays(expires, now time.Time) int { return int(math.Ceil(expires.Sub(now).Hours() / 24)) }
