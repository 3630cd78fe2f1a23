package store

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
)

// ReleaseFile records that user released a file the scanner could not judge, in the
// package's transaction: check sees the package and the file and names the effects; a
// file released already is returned as it is. The update itself is conditional on the
// file's state, so a verdict the scanner records meanwhile (clean, infected) makes it a
// conflict rather than a release of something else.
func (s *Postgres) ReleaseFile(ctx context.Context, packageID, fileID uuid.UUID, user int64, check func(p *app.Package, f app.File) (app.Effects, error)) (app.File, error) {
	var out app.File
	err := s.withLocked(ctx, packageID, func(q *Queries, p *app.Package) (app.Effects, error) {
		row, err := q.GetFile(ctx, GetFileParams{PackageID: packageID, ID: fileID})
		if err != nil {
			return app.Effects{}, sqldb.NotFound(err, "file")
		}
		out = toFile(row.File)
		if out.ScanReleased() && app.ScanReleasable(out) == nil {
			return app.Effects{}, nil
		}
		fx, err := check(p, out)
		if err != nil {
			return fx, err
		}
		released, err := q.ReleaseFileScan(ctx, ReleaseFileScanParams{ReleasedBy: &user, PackageID: packageID, ID: fileID})
		if errors.Is(err, pgx.ErrNoRows) {
			return fx, app.Conflict("the file's scan state changed; read it again")
		}
		if err != nil {
			return fx, err
		}
		out = toFile(released)
		return fx, nil
	})
	return out, err
}
