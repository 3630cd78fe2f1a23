// Package packagerow is the gateway's packages row: the statements that name its
// columns or read it whole (queries.sql, compiled by sqlc) and the one mapping between
// the row and app.Package. Every store package that reads a package maps its row here:
// store (the packages' store) and linksdb (the package a link opens) convert their
// own sqlc models of the row to Package (the same fields), so a new column is mapped
// once, in this file.
package packagerow

import (
	"context"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// Insert writes a new package's row (its recipients are the caller's).
func Insert(ctx context.Context, db DBTX, p app.Package) error {
	return New(db).InsertPackage(ctx, InsertPackageParams{
		ID: p.ID, OwnerUserID: p.OwnerUserID, Title: p.Title, RecipientEmail: p.RecipientEmail,
		RecipientName: p.RecipientName, Direction: string(p.Direction), State: string(p.State),
		TtlDays: int32(p.TTLDays), Note: p.Note, CreatedAt: p.CreatedAt, ExpiresAt: p.ExpiresAt,
		PasswordHash: nullString(p.PasswordHash), MaxDownloads: int32Ptr(p.MaxDownloads), NotifyOwner: p.NotifyOwner,
		Encryption: encryptionOf(p), PublicKey: nullString(p.OwnerPublicKey),
	})
}

// Get reads a package's row (pgx.ErrNoRows when there is none).
func Get(ctx context.Context, db DBTX, id uuid.UUID) (app.Package, error) {
	row, err := New(db).GetPackage(ctx, id)
	if err != nil {
		return app.Package{}, err
	}
	return ToPackage(row), nil
}

// Lock reads a package's row FOR UPDATE (pgx.ErrNoRows when there is none).
func Lock(ctx context.Context, db DBTX, id uuid.UUID) (app.Package, error) {
	row, err := New(db).LockPackage(ctx, id)
	if err != nil {
		return app.Package{}, err
	}
	return ToPackage(row), nil
}

// Save writes what a change of a package may set of its row.
func Save(ctx context.Context, db DBTX, p app.Package) error {
	return New(db).SavePackage(ctx, SavePackageParams{
		ID: p.ID, State: string(p.State), FileCount: int32(p.FileCount), TotalSize: p.TotalSize,
		FinalizedAt: p.FinalizedAt, ExpiresAt: p.ExpiresAt, RevokedAt: p.RevokedAt,
		Title: p.Title, Note: p.Note, RecipientName: p.RecipientName, PasswordHash: nullString(p.PasswordHash),
		MaxDownloads: int32Ptr(p.MaxDownloads), NotifyOwner: p.NotifyOwner, RecipientEmail: p.RecipientEmail,
		FileSeq: int32(p.FileSeq),
	})
}

// ToPackage is the package of a row (without its recipients, which have rows of
// their own).
func ToPackage(r Package) app.Package {
	return app.Package{
		ID: r.ID, OwnerUserID: r.OwnerUserID, Title: r.Title, RecipientEmail: r.RecipientEmail,
		RecipientName: r.RecipientName, Direction: app.Direction(r.Direction), State: app.State(r.State),
		TTLDays: int(r.TtlDays), Note: r.Note, FileCount: int(r.FileCount), TotalSize: r.TotalSize,
		CreatedAt: r.CreatedAt, FinalizedAt: r.FinalizedAt, ExpiresAt: r.ExpiresAt, RevokedAt: r.RevokedAt,
		PasswordHash: deref(r.PasswordHash), MaxDownloads: intPtr(r.MaxDownloads), NotifyOwner: r.NotifyOwner,
		Encryption: app.Encryption(r.Encryption), FileSeq: int(r.FileSeq), OwnerPublicKey: deref(r.PublicKey),
		OnHold: r.OnHold,
	}
}

// encryptionOf is a package's encryption column: none unless it says otherwise.
func encryptionOf(p app.Package) string {
	if p.Encryption == "" {
		return string(app.EncryptionNone)
	}
	return string(p.Encryption)
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func int32Ptr(n *int) *int32 {
	if n == nil {
		return nil
	}
	v := int32(*n)
	return &v
}

func intPtr(v *int32) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}
