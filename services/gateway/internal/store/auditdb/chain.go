package auditdb

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
)

// ReadChain runs fn on one read-only, repeatable-read snapshot of the audit chain.
func (s *Store) ReadChain(ctx context.Context, fn func(audit.ChainReader) error) error {
	tx, err := s.sql.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(chainReader{q: s.q.WithTx(tx)}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

type chainReader struct{ q *Queries }

func (r chainReader) Head(ctx context.Context) (int64, string, error) {
	h, err := r.q.AuditChainHead(ctx)
	return h.Seq, h.Hash, err
}

func (r chainReader) Anchor(ctx context.Context) (int64, string, error) {
	a, err := r.q.AuditChainAnchor(ctx)
	return a.Seq, a.Hash, err
}

// Entries reads the numbers (afterSeq, min(uptoSeq, afterSeq+limit)]: a page's range is
// never wider than the page, so PostgreSQL reads it by an index range scan even with no
// statistics or stale ones (after a bulk load, before autovacuum analyzes the table),
// where a range up to uptoSeq can be planned as a scan and sort of all the rest.
func (r chainReader) Entries(ctx context.Context, afterSeq, uptoSeq int64, limit int) ([]audit.Entry, error) {
	uptoSeq = min(uptoSeq, afterSeq+int64(limit))
	rows, err := r.q.ListAuditChain(ctx, ListAuditChainParams{AfterSeq: afterSeq, UptoSeq: uptoSeq, MaxRows: int32(limit)})
	if err != nil {
		return nil, err
	}
	es := make([]audit.Entry, len(rows))
	for i, row := range rows {
		es[i] = toAuditEntry(row)
	}
	return es, nil
}

func (r chainReader) SeqRange(ctx context.Context, from, to time.Time) (int64, int64, error) {
	rg, err := r.q.AuditSeqRange(ctx, AuditSeqRangeParams{FromAt: from, ToAt: to})
	return rg.FirstSeq, rg.LastSeq, err
}

func toAuditEntry(r ListAuditChainRow) audit.Entry {
	return audit.Entry{Seq: r.Seq, CreatedAt: r.CreatedAt, Actor: r.Actor, ActorUserID: r.ActorUserID, Action: r.Action,
		PackageID: r.PackageID, FileID: r.FileID, RecipientID: r.RecipientID, IP: r.Ip, UserAgent: r.UserAgent,
		Detail: r.Detail, PrevHash: r.PrevHash, Hash: r.Hash}
}

// ActivityReport reads every user's activity in [from, to).
func (s *Store) ActivityReport(ctx context.Context, from, to time.Time) ([]audit.Activity, error) {
	rows, err := s.q.ActivityReport(ctx, ActivityReportParams{FromAt: from, ToAt: to})
	if err != nil {
		return nil, err
	}
	out := make([]audit.Activity, len(rows))
	for i, r := range rows {
		out[i] = audit.Activity{UserID: r.UserID, Email: r.Email, Name: r.Name, PackagesSent: r.PackagesSent, BytesSent: r.BytesSent,
			BytesReceived: r.BytesReceived, Downloads: r.Downloads, RecipientDomains: r.RecipientDomains}
	}
	return out, nil
}
