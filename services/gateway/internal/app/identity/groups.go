package identity

import "context"

// GroupSync is told the groups claim of a user who signs in through the OpenID
// provider, at each sign-in and at each recheck of their sessions: the policies
// domain (app/policies) makes the user a member of the groups whose oidc_groups the
// claim names, and no longer of those it stopped naming.
type GroupSync interface {
	SignedIn(ctx context.Context, userID int64, claim []string) error
}

// WithGroupSync hands each SSO sign-in's and recheck's groups claim to g.
func WithGroupSync(g GroupSync) IdentityOption { return func(s *Identity) { s.groups = g } }

// syncGroups hands the claim to the group sync, when there is one.
func (s *Identity) syncGroups(ctx context.Context, userID int64, claim []string) error {
	if s.groups == nil {
		return nil
	}
	return s.groups.SignedIn(ctx, userID, claim)
}
