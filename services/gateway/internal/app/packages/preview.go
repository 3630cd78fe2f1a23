package packages

import (
	"context"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// ErrNoPreview: the file has no preview (not an image, over the pixel limit, an
// encrypted package, or not made yet).
var ErrNoPreview = app.NotFound("preview")

// OpenPreview opens a file's image preview for its package's owner (or an admin),
// under the rules of the owner's download (OpenFile); it counts nothing.
func (s *Packages) OpenPreview(ctx context.Context, u app.User, id, fileID uuid.UUID) (app.File, app.Object, error) {
	p, err := s.visible(ctx, u, id)
	if err != nil {
		return app.File{}, nil, err
	}
	if err := p.Apply(app.OpOwnerDownload, s.now()); err != nil {
		return app.File{}, nil, err
	}
	f, err := s.store.GetFile(ctx, id, fileID, nil)
	if err != nil {
		return app.File{}, nil, err
	}
	if err := PreviewAllowed(f); err != nil {
		return app.File{}, nil, err
	}
	if err := app.OwnerScanAllows(s.scan, f); err != nil {
		return app.File{}, nil, err
	}
	obj, err := s.objects.Open(ctx, f.PreviewKey)
	if err != nil {
		return app.File{}, nil, err
	}
	return f, obj, nil
}

// PreviewAllowed says whether f's preview may be served by what the file itself
// says: it has one, and it is not infected (nor encrypted: those never get one).
func PreviewAllowed(f app.File) error {
	switch {
	case f.Scan == app.ScanInfected:
		return app.ErrInfectedRemoved
	case f.PreviewKey == "" || f.Encrypted:
		return ErrNoPreview
	}
	return nil
}
