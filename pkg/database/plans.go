package database

import "github.com/jackc/pgx/v5"

// QueueGenericPlans queues on b the statement that makes the rest of b's transaction run
// with plan_cache_mode = force_generic_plan: the transaction b opens with BEGIN, or the
// implicit one pgx runs a batch in. The setting ends with that transaction
// (set_config's is_local, which, unlike SET LOCAL, also holds in an implicit one), so the
// connection goes back to the pool with its own mode (PlanCacheMode: force_custom_plan).
//
// Only for statements whose generic plan cannot go bad on stale statistics: an INSERT of
// given values, an upsert through its arbiter index, a lookup by primary key. Planning
// such a statement afresh on each execution costs PostgreSQL tens to hundreds of
// microseconds for nothing (what it costs the gateway's package creations and the
// dispatcher's group commits: docs/BENCHMARKS.md, "API create, issue 21 (2026-11-26)").
func QueueGenericPlans(b *pgx.Batch) {
	b.Queue(`SELECT set_config('plan_cache_mode', 'force_generic_plan', true)`)
}
