package policies

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// MaxGroupNameLen bounds a group's name.
const MaxGroupNameLen = 100

// CreateGroup validates and stores a group.
func (s *Policies) CreateGroup(ctx context.Context, in GroupInput) (Group, error) {
	if in.Name == nil {
		return Group{}, app.Invalid("name is required")
	}
	g := Group{}
	if err := apply(&g, in); err != nil {
		return Group{}, err
	}
	return s.store.CreateGroup(ctx, g)
}

// UpdateGroup changes the fields of in that are set.
func (s *Policies) UpdateGroup(ctx context.Context, id int64, in GroupInput) (Group, error) {
	g, err := s.store.GetGroup(ctx, id)
	if err != nil {
		return Group{}, err
	}
	if err := apply(&g, in); err != nil {
		return Group{}, err
	}
	return s.store.UpdateGroup(ctx, g)
}

func apply(g *Group, in GroupInput) error {
	if in.Name != nil {
		name := strings.TrimSpace(*in.Name)
		if name == "" || utf8.RuneCountInString(name) > MaxGroupNameLen || !utf8.ValidString(name) || strings.ContainsFunc(name, isHidden) {
			return app.Invalid("name must be 1 to %d characters without control or format characters", MaxGroupNameLen)
		}
		g.Name = name
	}
	if in.Policy != nil {
		if err := Validate(*in.Policy); err != nil {
			return err
		}
		g.Policy = Normalize(*in.Policy)
	}
	if in.OIDCGroups != nil {
		var names []string
		for _, n := range *in.OIDCGroups {
			if n = strings.TrimSpace(n); n == "" || len(n) > 200 || !utf8.ValidString(n) || strings.ContainsFunc(n, unicode.IsControl) {
				return app.Invalid("oidc_groups: each name must be 1 to 200 characters without control characters")
			}
			names = append(names, n)
		}
		g.OIDCGroups = names
	}
	if g.OIDCGroups == nil {
		g.OIDCGroups = []string{}
	}
	return nil
}

// isHidden reports the characters a group's name may not hold: control characters and
// Unicode format characters (bidi overrides, zero-width spaces), as in a package title.
func isHidden(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// Groups returns every group.
func (s *Policies) Groups(ctx context.Context) ([]Group, error) { return s.store.ListGroups(ctx) }

// Group returns a group.
func (s *Policies) Group(ctx context.Context, id int64) (Group, error) {
	return s.store.GetGroup(ctx, id)
}

// DeleteGroup deletes a group; its members fall back on their other groups or the
// default policy.
func (s *Policies) DeleteGroup(ctx context.Context, id int64) error {
	return s.store.DeleteGroup(ctx, id)
}

// PutMember makes a user a member of a group.
func (s *Policies) PutMember(ctx context.Context, groupID, userID int64) error {
	return s.store.PutMember(ctx, groupID, userID)
}

// DeleteMember ends a user's membership of a group.
func (s *Policies) DeleteMember(ctx context.Context, groupID, userID int64) error {
	return s.store.DeleteMember(ctx, groupID, userID)
}

// DefaultPolicy returns the policy of users in no group.
func (s *Policies) DefaultPolicy(ctx context.Context) (Policy, error) {
	return s.store.DefaultPolicy(ctx)
}

// SetDefaultPolicy validates and stores the policy of users in no group.
func (s *Policies) SetDefaultPolicy(ctx context.Context, p Policy) (Policy, error) {
	if err := Validate(p); err != nil {
		return Policy{}, err
	}
	p = Normalize(p)
	return p, s.store.SetDefaultPolicy(ctx, p)
}

// SignedIn makes an SSO user's memberships taken from the provider those its groups
// claim names (at sign-in and at each recheck). A nil claim (the provider sent no
// groups claim) leaves them as they are.
func (s *Policies) SignedIn(ctx context.Context, userID int64, claim []string) error {
	if claim == nil {
		return nil
	}
	return s.store.SyncOIDCMembers(ctx, userID, claim)
}
