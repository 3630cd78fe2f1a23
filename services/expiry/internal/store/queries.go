package store

import "github.com/shipfile/shipfile/pkg/lifecycle"

// The expiry service's SQL, on the gateway's schema (services/gateway/migrations).

// qExpireDue locks up to $1 packages overdue at $2 (the expiry service's clock;
// lifecycle.OverdueSQL, the rule every service shares), oldest deadline first, skipping rows another transaction holds (another expiry instance, or a
// gateway request changing the package: the next batch or tick sees it again), and
// expires them. The state test is repeated on the locked row, so a package expired
// meanwhile by another instance is never expired (nor announced) twice. It uses
// packages_expiring_idx.
var qExpireDue = `WITH due AS (
	SELECT id, state FROM packages
	WHERE ` + lifecycle.OverdueSQL("", "$2") + `
	ORDER BY expires_at
	LIMIT $1
	FOR UPDATE SKIP LOCKED
)
UPDATE packages p SET state = 'expired'
FROM due
WHERE p.id = due.id AND p.state <> 'expired'
RETURNING p.id::text, p.title, p.recipient_email, p.owner_user_id, p.direction, due.state, p.expires_at`

// qQueueFileObjects queues the objects of the packages' files for deletion and returns
// each file's package and key. The file rows stay: the owner still sees what was sent.
const qQueueFileObjects = `WITH keys AS (
	SELECT package_id::text AS package_id, object_key FROM files WHERE package_id = ANY($1::uuid[])
), queued AS (
	INSERT INTO object_deletions (object_key) SELECT object_key FROM keys ON CONFLICT DO NOTHING
)
SELECT package_id, object_key FROM keys ORDER BY package_id, object_key`

// qInsertAudit writes system audit entries, one per (action, package) pair.
const qInsertAudit = `INSERT INTO audit_log (actor, action, package_id)
SELECT 'system', a.action, a.package_id
FROM unnest($1::text[], $2::uuid[]) WITH ORDINALITY AS a (action, package_id, n)
ORDER BY a.n`

// qLockDeletions locks up to $1 queued object keys, oldest first, skipping keys another
// sweep (or a gateway forgetting a key it removed) holds.
const qLockDeletions = `SELECT object_key FROM object_deletions
ORDER BY created_at, object_key
LIMIT $1
FOR UPDATE SKIP LOCKED`

// qForgetDeletions forgets keys whose objects are gone.
const qForgetDeletions = `DELETE FROM object_deletions WHERE object_key = ANY($1::text[])`

// qOverdueLag is the age of the oldest package overdue at $1 (the expiry service's
// clock) and not expired yet, in seconds (NULL when none); it uses packages_expiring_idx.
var qOverdueLag = `SELECT extract(epoch FROM $1::timestamptz - min(expires_at))::float8
FROM packages WHERE ` + lifecycle.OverdueSQL("", "$1")

// qPendingDeletions counts queued object keys.
const qPendingDeletions = `SELECT count(*) FROM object_deletions`

// qLockOrphans locks up to $2 object key reservations older than $1 seconds by the
// database's clock, oldest first, skipping keys a gateway committing the key's file row
// (or another sweep) holds, and says of each whether its file row exists. It uses
// object_reservations_age_idx and the unique index of files.object_key.
const qLockOrphans = `SELECT r.object_key, EXISTS (SELECT 1 FROM files f WHERE f.object_key = r.object_key)
FROM object_reservations r
WHERE r.reserved_at < now() - make_interval(secs => $1)
ORDER BY r.reserved_at, r.object_key
LIMIT $2
FOR UPDATE OF r SKIP LOCKED`

// qForgetReservations forgets reservations whose objects are gone or committed.
const qForgetReservations = `DELETE FROM object_reservations WHERE object_key = ANY($1::text[])`
