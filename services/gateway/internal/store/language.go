package store

import (
	"context"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// SetUserLanguage sets the user's language, or clears it (nil).
func (s *Postgres) SetUserLanguage(ctx context.Context, id int64, language *string) (app.User, error) {
	row, err := s.q.SetUserLanguage(ctx, SetUserLanguageParams{ID: id, Language: language})
	if err != nil {
		return app.User{}, mapUserErr(err)
	}
	return toUser(row), nil
}
