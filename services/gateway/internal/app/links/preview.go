package links

import (
	"context"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// PreviewViaLink opens a file's image preview through a link, under the rules of a
// download through it (a live link, the password's grant, the recipient's own files,
// the scan), but it takes nothing of the file's budget, counts no download and fires
// no event: a preview is not the file.
func (s *Links) PreviewViaLink(ctx context.Context, token string, client app.Client, fileID uuid.UUID) (app.File, app.Object, error) {
	p, err := s.resolveLink(ctx, token, client)
	if err != nil {
		return app.File{}, nil, err
	}
	f, err := s.files.GetFile(ctx, p.ID, fileID, p.LinkHash)
	if err != nil {
		return app.File{}, nil, err
	}
	if !app.LinkMayDownload(f) {
		return app.File{}, nil, ErrRecipientFile
	}
	if err := packages.PreviewAllowed(f); err != nil {
		return app.File{}, nil, err
	}
	if err := s.scanAllows(f); err != nil {
		return app.File{}, nil, err
	}
	obj, err := s.objects.Open(ctx, f.PreviewKey)
	if err != nil {
		return app.File{}, nil, err
	}
	return f, obj, nil
}
