-- The audit entries every store writes in the transaction of its change (sqldb.go).

-- name: InsertAudit :exec
INSERT INTO audit_log (actor, actor_user_id, action, package_id, file_id, ip, user_agent, detail, recipient_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: CountAuditHourly :exec
-- Counts a hit in the one row of its action, IP and hour (the database's clock, UTC),
-- for anonymous failures such as hits of unknown or dead links (docs/API.md, "Hostile
-- clients"): a guesser adds one row per hour, not one per hit.
INSERT INTO audit_log (actor, actor_user_id, action, package_id, file_id, ip, user_agent, detail, recipient_id, hour)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, date_trunc('hour', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')
ON CONFLICT (action, ip, hour) WHERE hour IS NOT NULL DO UPDATE SET hits = audit_log.hits + 1;
