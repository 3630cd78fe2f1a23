// Package lifecycle holds the one definition of when a package counts as expired, for
// every service: a package whose expires_at has passed is expired from that instant,
// whether or not the expiry service has marked it yet (it does so within one interval).
// The gateway refuses an overdue draft's finalize and an overdue link, the mailer sends
// no e-mail for an overdue package, and the expiry service expires exactly the overdue
// ones; all three ask this package.
//
// The clock is the application's: the caller passes its now, a plain time.Time, to the
// Go rules and as a query parameter to the SQL conditions, never the database's now().
// The gateway's state table is a plain function of (state, expires_at, now), unit-tested
// with no server and with any instant; the expiry and mailer decisions then use the same
// kind of clock, so "overdue" means the same instant to the rule and to the query. (The
// price: hosts' clocks must agree, which NTP gives to well under the expiry interval.)
//
// ExpiredSQL and EffectiveStateSQL are the same rule for a WHERE clause or a SELECT list;
// a test evaluates them in PostgreSQL against Overdue and EffectiveState.
package lifecycle

import "time"

// StateExpired is the state of a package the expiry service has expired.
const StateExpired = "expired"

// Overdue reports whether a package in state whose deadline is expiresAt is past its
// deadline at now but not marked expired yet: expires_at <= now.
func Overdue(state string, expiresAt, now time.Time) bool {
	return state != StateExpired && !now.Before(expiresAt)
}

// Expired reports whether the package counts as expired at now: marked expired, or
// Overdue.
func Expired(state string, expiresAt, now time.Time) bool {
	return state == StateExpired || Overdue(state, expiresAt, now)
}

// EffectiveState is the state a package is in at now: StateExpired when it counts as
// expired, else its state.
func EffectiveState(state string, expiresAt, now time.Time) string {
	if Expired(state, expiresAt, now) {
		return StateExpired
	}
	return state
}

// OverdueSQL is Overdue as a SQL condition on the columns state and expires_at of
// packages (qualified by alias when it is not ""), with now the placeholder of the
// caller's clock, e.g. OverdueSQL("p", "$2") is
// "(p.state <> 'expired' AND p.expires_at <= $2)".
func OverdueSQL(alias, now string) string {
	q := ""
	if alias != "" {
		q = alias + "."
	}
	return "(" + q + "state <> '" + StateExpired + "' AND " + q + "expires_at <= " + now + ")"
}

// EffectiveStateSQL is EffectiveState as a SQL expression (see OverdueSQL for alias and
// now): CASE WHEN overdue THEN 'expired' ELSE state END.
func EffectiveStateSQL(alias, now string) string {
	q := ""
	if alias != "" {
		q = alias + "."
	}
	return "CASE WHEN " + OverdueSQL(alias, now) + " THEN '" + StateExpired + "' ELSE " + q + "state END"
}
