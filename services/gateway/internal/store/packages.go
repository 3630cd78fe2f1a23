package store

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/links"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
	"github.com/shipfile/shipfile/services/gateway/internal/store/packagerow"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

var (
	_ packages.Store = (*Postgres)(nil)
	// The link routes read files through the package store: ListFiles and GetFile
	// answer both the owner and a link.
	_ links.Files = (*Postgres)(nil)
)

// CreatePackage inserts a draft and writes its effects: one batch, which PostgreSQL runs
// as one implicit transaction, so the package, its audit entry and its outbox rows
// commit together in a single round trip. Under load, concurrent creations share their
// round trip and commit (groupCommit); each still commits whole or not at all.
//
// Its statements are INSERTs of given values (the package, its recipients, outbox rows,
// and its audit entries, which a round sends last: groupCommit), whose plan is the same
// whatever the statistics: the batch runs them with
// generic plans (database.QueueGenericPlans), which PostgreSQL makes once per connection, instead of
// planning each of them on every execution as the pool's plan_cache_mode has it.
func (s *Postgres) CreatePackage(ctx context.Context, p app.Package, fx app.Effects) error {
	b := &pgx.Batch{}
	q := batched(b)
	// The batch's statements cannot fail when queued: their errors come with Close.
	_ = packagerow.Insert(ctx, sqldb.Batched(b), p)
	for i, r := range p.Recipients {
		_ = q.InsertRecipient(ctx, InsertRecipientParams{
			ID: r.ID, PackageID: p.ID, Position: int32(i), Email: r.Email, Name: r.Name, Language: r.Language,
			LinkHash: r.LinkHash, LinkState: string(r.LinkState), CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt,
		})
	}
	rest := fx
	rest.Audit = nil
	if err := s.sql.QueueEffects(ctx, b, rest); err != nil {
		return err
	}
	audit := &pgx.Batch{}
	_ = sqldb.WriteAudit(ctx, sqldb.Batched(audit), fx.Audit...)
	return s.sql.Committed(fx, s.creates.run(ctx, creation{stmts: b.QueuedQueries, audit: audit.QueuedQueries}))
}

// GetPackage returns a package by id.
func (s *Postgres) GetPackage(ctx context.Context, id uuid.UUID) (app.Package, error) {
	p, err := packagerow.Get(ctx, s.sql.Pool, id)
	if err != nil {
		return app.Package{}, sqldb.NotFound(err, "package")
	}
	ps := []app.Package{p}
	if err := withRecipients(ctx, s.q, ps); err != nil {
		return app.Package{}, err
	}
	return ps[0], nil
}

// withRecipients loads the recipients of packages (one query for them all) and sums
// up their links' uses.
func withRecipients(ctx context.Context, q *Queries, ps []app.Package) error {
	if len(ps) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(ps))
	at := make(map[uuid.UUID]int, len(ps))
	for i, p := range ps {
		ids[i], at[p.ID] = p.ID, i
	}
	rows, err := q.ListRecipients(ctx, ids)
	if err != nil {
		return err
	}
	for _, r := range rows {
		p := &ps[at[r.PackageID]]
		p.Recipients = append(p.Recipients, toRecipient(r))
		p.LinkUseCount += r.UseCount
		if r.LastUsedAt != nil && (p.LinkLastUsedAt == nil || r.LastUsedAt.After(*p.LinkLastUsedAt)) {
			t := *r.LastUsedAt
			p.LinkLastUsedAt = &t
		}
	}
	return nil
}

func toRecipient(r Recipient) app.Recipient {
	return app.Recipient{
		ID: r.ID, Email: r.Email, Name: r.Name, Language: r.Language, LinkHash: r.LinkHash, LinkState: app.LinkState(r.LinkState),
		UseCount: r.UseCount, LastUsedAt: r.LastUsedAt, DownloadCount: r.DownloadCount, CreatedAt: r.CreatedAt,
		RevokedAt: r.RevokedAt,
	}
}

// ListPackages returns a page of packages, newest first, after the cursor; each filter
// left nil selects every value.
func (s *Postgres) ListPackages(ctx context.Context, f app.PackageFilter) ([]app.Package, error) {
	arg := ListPackagesParams{OwnerUserID: f.OwnerUserID, MaxRows: int32(min(f.Limit, math.MaxInt32))}
	if f.State != nil {
		arg.State = ptr(string(*f.State))
	}
	if f.Direction != nil {
		arg.Direction = ptr(string(*f.Direction))
	}
	if f.After != nil {
		arg.AfterCreatedAt, arg.AfterID = &f.After.CreatedAt, &f.After.ID
	}
	rows, err := s.q.ListPackages(ctx, arg)
	if err != nil {
		return nil, err
	}
	ps := make([]app.Package, len(rows))
	for i, r := range rows {
		ps[i] = packagerow.ToPackage(packagerow.Package(r))
	}
	return ps, withRecipients(ctx, s.q, ps)
}

func ptr[T any](v T) *T { return &v }

// ListFiles returns a package's files, oldest first, as the link linkHash sees them
// (nil: the owner).
func (s *Postgres) ListFiles(ctx context.Context, packageID uuid.UUID, linkHash []byte) ([]app.File, error) {
	rows, err := s.q.ListFiles(ctx, ListFilesParams{PackageID: packageID, LinkHash: linkHash})
	if err != nil {
		return nil, err
	}
	out := make([]app.File, len(rows))
	for i, r := range rows {
		out[i] = throughLink(toFile(r.File), linkHash, r.LinkTaken, r.LinkDownloads)
	}
	return out, nil
}

// GetFile returns one file of a package, as the link linkHash sees it (nil: the owner).
func (s *Postgres) GetFile(ctx context.Context, packageID, fileID uuid.UUID, linkHash []byte) (app.File, error) {
	row, err := s.q.GetFile(ctx, GetFileParams{PackageID: packageID, ID: fileID, LinkHash: linkHash})
	if err != nil {
		return app.File{}, sqldb.NotFound(err, "file")
	}
	return throughLink(toFile(row.File), linkHash, row.LinkTaken, row.LinkDownloads), nil
}

// throughLink sets what a link sees of a file: its budget taken there and its own
// downloads of it, never another link's.
func throughLink(f app.File, linkHash []byte, taken int64, downloads int32) app.File {
	if linkHash != nil {
		f.LinkTaken, f.DownloadCount = taken, int(downloads)
	}
	return f
}

// withLocked runs fn in a transaction that holds the package's row lock, then writes
// the effects fn returns in the same transaction. Every package change goes through it.
func (s *Postgres) withLocked(ctx context.Context, id uuid.UUID, fn func(q *Queries, p *app.Package) (app.Effects, error)) error {
	return s.withLockedTx(ctx, id, func(_ pgx.Tx, q *Queries, p *app.Package) (app.Effects, error) { return fn(q, p) })
}

// withLockedTx is withLocked that hands fn the transaction too.
func (s *Postgres) withLockedTx(ctx context.Context, id uuid.UUID, fn func(tx pgx.Tx, q *Queries, p *app.Package) (app.Effects, error)) error {
	return s.sql.InTx(ctx, func(tx pgx.Tx) error {
		p, err := s.locked(ctx, tx, id)
		if err != nil {
			return err
		}
		before := slices.Clone(p.Recipients)
		q := s.q.WithTx(tx)
		fx, err := fn(tx, q, &p)
		if err != nil {
			return err
		}
		if err := saveRecipients(ctx, q, p, before); err != nil {
			return err
		}
		return s.sql.WriteEffects(ctx, tx, fx)
	})
}

// saveRecipients writes the recipients a change added, removed or changed (most
// changes touch none, and write nothing here).
func saveRecipients(ctx context.Context, q *Queries, p app.Package, before []app.Recipient) error {
	if recipientsEqual(p.Recipients, before) {
		return nil
	}
	keep := make([]uuid.UUID, len(p.Recipients))
	moved := len(p.Recipients) < len(before)
	for i, r := range p.Recipients {
		keep[i] = r.ID
		if i < len(before) && before[i].ID != r.ID {
			moved = true
		}
	}
	if err := q.DeleteOtherRecipients(ctx, DeleteOtherRecipientsParams{PackageID: p.ID, Keep: keep}); err != nil {
		return err
	}
	if moved {
		if err := q.ShiftRecipients(ctx, p.ID); err != nil {
			return err
		}
	}
	for i, r := range p.Recipients {
		if !moved && i < len(before) && recipientEqual(r, before[i]) {
			continue
		}
		if err := q.SaveRecipient(ctx, SaveRecipientParams{
			ID: r.ID, PackageID: p.ID, Position: int32(i), Email: r.Email, Name: r.Name, Language: r.Language,
			LinkHash: r.LinkHash, LinkState: string(r.LinkState), CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt,
		}); err != nil {
			return mapRecipientConflict(err)
		}
	}
	return nil
}

func recipientsEqual(a, b []app.Recipient) bool {
	return slices.EqualFunc(a, b, recipientEqual)
}

// recipientEqual compares what a change may set of a recipient.
func recipientEqual(a, b app.Recipient) bool {
	return a.ID == b.ID && a.Email == b.Email && a.Name == b.Name && a.Language == b.Language && bytes.Equal(a.LinkHash, b.LinkHash) &&
		a.LinkState == b.LinkState && timePtrEqual(a.RevokedAt, b.RevokedAt)
}

func timePtrEqual(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// mapRecipientConflict turns a second recipient with the same address (which the app
// checks first, under the package's lock) into a conflict rather than a 500.
func mapRecipientConflict(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return app.Conflict("this address is already a recipient of the package")
	}
	return err
}

// ChangePackage locks the package row, lets change mutate it, saves it and writes the
// effects, in one transaction.
func (s *Postgres) ChangePackage(ctx context.Context, id uuid.UUID, change func(p *app.Package) (app.Effects, error)) (app.Package, error) {
	var out app.Package
	err := s.withLockedTx(ctx, id, func(tx pgx.Tx, _ *Queries, p *app.Package) (app.Effects, error) {
		fx, err := change(p)
		if err != nil {
			return fx, err
		}
		out = *p
		return fx, packagerow.Save(ctx, tx, *p)
	})
	return out, err
}

// AddFile records a stored file in its package and ends its object key's reservation
// (ReserveObjectKey), in one transaction.
func (s *Postgres) AddFile(ctx context.Context, f app.File, change func(p *app.Package) (app.Effects, error)) (app.Package, error) {
	return s.AddFileTx(ctx, f, change, nil)
}

// AddFileTx is AddFile that also runs also (when not nil) in the transaction, after
// change and before the file's row: the statements of another store that commit with
// the file (transfersdb: a resumable upload's completion).
func (s *Postgres) AddFileTx(ctx context.Context, f app.File, change func(p *app.Package) (app.Effects, error), also func(tx pgx.Tx) error) (app.Package, error) {
	var out app.Package
	err := s.withLockedTx(ctx, f.PackageID, func(tx pgx.Tx, q *Queries, p *app.Package) (app.Effects, error) {
		fx, err := change(p)
		if err != nil {
			return fx, err
		}
		if also != nil {
			if err := also(tx); err != nil {
				return fx, err
			}
		}
		// The name an encrypted package gives the file once it counted it, as the
		// change's answer and event have it.
		if err := addFileRow(ctx, q, app.AsRecorded(f, *p)); err != nil {
			return fx, err
		}
		out = *p
		return fx, packagerow.Save(ctx, tx, *p)
	})
	return out, err
}

// addFileRow ends the object key's reservation and inserts the file's row.
func addFileRow(ctx context.Context, q *Queries, f app.File) error {
	if err := q.CommitObjectKey(ctx, f.ObjectKey); err != nil {
		return err
	}
	return q.InsertFile(ctx, InsertFileParams{
		ID: f.ID, PackageID: f.PackageID, Filename: f.Filename, Size: f.Size, ContentType: f.ContentType,
		Sha256: f.SHA256, ObjectKey: f.ObjectKey, UploadedBy: string(f.UploadedBy), CreatedAt: f.CreatedAt,
		RecipientID: f.RecipientID, Scan: scanOf(f), Encrypted: f.Encrypted, Manifest: f.Manifest,
	})
}

// scanOf is the scan state a new file's row starts with: pending (the scanner's
// work) unless the file says otherwise (an encrypted file: skipped).
func scanOf(f app.File) string {
	if f.Scan == "" {
		return string(app.ScanPending)
	}
	return string(f.Scan)
}

// RemoveFile deletes a file's row and queues its object for deletion (its preview's
// too, by the trigger of migration 00034).
func (s *Postgres) RemoveFile(ctx context.Context, packageID, fileID uuid.UUID, change func(p *app.Package, f app.File) (app.Effects, error)) error {
	return s.withLockedTx(ctx, packageID, func(tx pgx.Tx, q *Queries, p *app.Package) (app.Effects, error) {
		row, err := q.GetFile(ctx, GetFileParams{PackageID: packageID, ID: fileID})
		if err != nil {
			return app.Effects{}, sqldb.NotFound(err, "file")
		}
		fx, err := change(p, toFile(row.File))
		if err != nil {
			return fx, err
		}
		if err := q.DeleteFileRow(ctx, fileID); err != nil {
			return fx, err
		}
		if err := q.QueueObjectDeletion(ctx, []string{row.File.ObjectKey}); err != nil {
			return fx, err
		}
		return fx, packagerow.Save(ctx, tx, *p)
	})
}

// DeletePackage deletes a package and its files, queueing their objects for deletion,
// and returns the queued keys.
func (s *Postgres) DeletePackage(ctx context.Context, id uuid.UUID, change func(p *app.Package) (app.Effects, error)) ([]string, error) {
	var keys []string
	err := s.withLocked(ctx, id, func(q *Queries, p *app.Package) (app.Effects, error) {
		fx, err := change(p)
		if err != nil {
			return fx, err
		}
		if keys, err = q.FileKeys(ctx, id); err != nil {
			return fx, err
		}
		previewKeys, err := q.PackagePreviewKeys(ctx, id)
		if err != nil {
			return fx, err
		}
		keys = append(keys, previewKeys...)
		if err := q.QueueObjectDeletion(ctx, keys); err != nil {
			return fx, err
		}
		return fx, q.DeletePackageRow(ctx, id)
	})
	return keys, err
}

// WriteEffects writes effects that belong to no package change, as one batch (one
// implicit transaction, one round trip).
func (s *Postgres) WriteEffects(ctx context.Context, fx app.Effects) error {
	return s.sql.WriteEffectsAlone(ctx, fx)
}

// ObjectsDeleted forgets deletion requests whose objects are gone.
func (s *Postgres) ObjectsDeleted(ctx context.Context, keys []string) error {
	return s.q.ObjectsDeleted(ctx, keys)
}

// ListAudit returns a page of the audit log, newest first.
func (s *Postgres) ListAudit(ctx context.Context, f app.AuditFilter) ([]app.AuditEntry, error) {
	rows, err := s.q.ListAudit(ctx, ListAuditParams{PackageID: f.PackageID, BeforeID: f.BeforeID, MaxRows: int32(f.Limit)})
	if err != nil {
		return nil, err
	}
	out := make([]app.AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = app.AuditEntry{
			ID: r.ID, CreatedAt: r.CreatedAt, Actor: r.Actor, ActorUserID: r.ActorUserID, Action: r.Action,
			PackageID: r.PackageID, FileID: r.FileID, RecipientID: r.RecipientID, IP: r.Ip, UserAgent: r.UserAgent, Detail: r.Detail,
			Hourly: r.Hour != nil, Hits: int(r.Hits),
		}
	}
	return out, nil
}

// InPackageTx runs fn in a transaction that holds the package's row lock: the
// statements of another store that must not race the package's changes (transfersdb:
// a resumable upload's creation, which counts the package's files).
func (s *Postgres) InPackageTx(ctx context.Context, id uuid.UUID, fn func(tx pgx.Tx, p app.Package) error) error {
	return s.sql.InTx(ctx, func(tx pgx.Tx) error {
		p, err := s.locked(ctx, tx, id)
		if err != nil {
			return err
		}
		return fn(tx, p)
	})
}

func (s *Postgres) locked(ctx context.Context, tx pgx.Tx, id uuid.UUID) (app.Package, error) {
	p, err := packagerow.Lock(ctx, tx, id)
	if err != nil {
		return app.Package{}, sqldb.NotFound(err, "package")
	}
	ps := []app.Package{p}
	if err := withRecipients(ctx, s.q.WithTx(tx), ps); err != nil {
		return app.Package{}, err
	}
	return ps[0], nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func toFile(r File) app.File {
	return app.File{
		ID: r.ID, PackageID: r.PackageID, Filename: r.Filename, Size: r.Size, ContentType: r.ContentType,
		SHA256: r.Sha256, ObjectKey: r.ObjectKey, UploadedBy: app.Uploader(r.UploadedBy), CreatedAt: r.CreatedAt,
		DownloadCount: int(r.DownloadCount), RecipientID: r.RecipientID,
		Scan: app.ScanState(r.Scan), ScanSignature: r.ScanSignature, ScannedAt: r.ScannedAt,
		ScanReleasedBy: r.ScanReleasedBy, ScanReleasedAt: r.ScanReleasedAt,
		Encrypted: r.Encrypted, Manifest: r.Manifest,
		PreviewKey: deref(r.PreviewKey), PreviewWidth: int(deref32(r.PreviewWidth)), PreviewHeight: int(deref32(r.PreviewHeight)),
	}
}

func deref32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
