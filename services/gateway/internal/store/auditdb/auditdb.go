// Package auditdb is the audit domain's store on PostgreSQL: the audit chain's
// snapshots (audit.Store), legal holds (audit.HoldStore) and the activity report
// (audit.ReportStore). Its SQL is queries.sql, compiled by sqlc; the chain itself is
// linked by a trigger of migration 00033, so the entries every store writes
// (sqldb.WriteAudit) join it.
package auditdb

import (
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

// Store implements the audit domain's stores.
type Store struct {
	sql *sqldb.DB
	q   *Queries
}

var (
	_ audit.Store       = (*Store)(nil)
	_ audit.HoldStore   = (*Store)(nil)
	_ audit.ReportStore = (*Store)(nil)
)

// NewStore returns the store on d's pool.
func NewStore(d *sqldb.DB) *Store { return &Store{sql: d, q: New(d.Pool)} }
