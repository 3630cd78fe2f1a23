package identity

import (
	"fmt"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Audit actions of sign-ins, accounts and tokens.
const (
	ActionSignIn        = "session.sign_in"        // detail: "password" or "sso"
	ActionSignInFailed  = "session.sign_in_failed" // counted per IP and hour
	ActionSignOut       = "session.sign_out"
	ActionSessionEnded  = "session.ended"    // the provider refused a recheck, or the user left the allowed groups
	ActionSSOLink       = "sso.link"         // an identity of the provider linked to a user
	ActionSSOUnlink     = "sso.unlink"       // the identity unlinked
	ActionSSOLinkRefuse = "sso.link_refused" // a first SSO sign-in whose address belongs to an account it may not take
	ActionRoleChange    = "user.role"        // detail: "regular -> admin (by …)"
	ActionTokenCreate   = "token.create"
	ActionTokenRevoke   = "token.revoke"
	ActionKeySet        = "key.set" // the user's encryption key set or replaced
)

// Events of account notices: the security e-mails a user gets about their own account.
const (
	NoticeSSOLinked   = "sso_linked"
	NoticeSSOUnlinked = "sso_unlinked"
	NoticeRoleChanged = "role_changed"
	NoticeKeyChanged  = "key_changed"
)

// AccountNotice is a security e-mail to a user about their account, written in the
// transaction of the change and sent by the mailer whatever the user's notification
// settings.
type AccountNotice struct {
	UserID int64
	Event  string
	Detail string
}

// AccountChange is what a change to an account writes beside it, in the same
// transaction: audit entries and notices to the user.
type AccountChange struct {
	Audit   []app.AuditEntry
	Notices []AccountNotice
}

// Actor is who makes a change, for the audit log: a user (UserID) from a client, or
// the gateway itself (UserID 0: group sync, shipctl).
type Actor struct {
	UserID int64
	Client app.Client
}

// UserActor is the user u acting from client c.
func UserActor(u app.User, c app.Client) Actor { return Actor{UserID: u.ID, Client: c} }

// System is the gateway acting on its own (group sync, shipctl).
var System = Actor{}

// Audit is an audit entry of an action by a.
func (a Actor) Audit(action, detail string) app.AuditEntry {
	e := app.AuditEntry{Actor: "system", Action: action, Detail: detail, IP: a.Client.IP, UserAgent: a.Client.UserAgent}
	if a.UserID != 0 {
		id := a.UserID
		e.Actor, e.ActorUserID = "user", &id
	}
	return e
}

// by says who did it, for an audit detail or an e-mail: "by user 3", "by group sync".
func (a Actor) by(system string) string {
	if a.UserID == 0 {
		return system
	}
	return fmt.Sprintf("by user %d", a.UserID)
}

// userRef names a user in an audit detail.
func userRef(u app.User) string { return fmt.Sprintf("user %d (%s)", u.ID, u.Email) }

// RoleChange is the audit entry and the notice of u's role going from before to
// u.Role, by a (system says how the gateway came to it, e.g. "by group sync").
func RoleChange(a Actor, u app.User, before app.Role, system string) AccountChange {
	detail := fmt.Sprintf("%s: %s -> %s, %s", userRef(u), before, u.Role, a.by(system))
	return AccountChange{
		Audit:   []app.AuditEntry{a.Audit(ActionRoleChange, detail)},
		Notices: []AccountNotice{{UserID: u.ID, Event: NoticeRoleChanged, Detail: fmt.Sprintf("%s -> %s", before, u.Role)}},
	}
}

// linkChange is the audit entry and the notice of u's identity (issuer, subject)
// linked (or unlinked) by a.
func linkChange(a Actor, u app.User, issuer, subject string, linked bool) AccountChange {
	action, event := ActionSSOLink, NoticeSSOLinked
	if !linked {
		action, event = ActionSSOUnlink, NoticeSSOUnlinked
	}
	return AccountChange{
		Audit:   []app.AuditEntry{a.Audit(action, fmt.Sprintf("%s: issuer %s, subject %s", userRef(u), issuer, subject))},
		Notices: []AccountNotice{{UserID: u.ID, Event: event, Detail: issuer}},
	}
}
