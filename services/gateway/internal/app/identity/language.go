package identity

import (
	"context"
	"strings"

	"github.com/shipfile/shipfile/pkg/i18n"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// SetLanguage stores the language the user chose for the pages and the e-mails
// about their packages and account: a code of i18n.Languages, or "" for none (the
// pages follow the browser, the e-mails are English).
func (s *Identity) SetLanguage(ctx context.Context, userID int64, language string) (app.User, error) {
	if err := ValidateLanguage(language); err != nil {
		return app.User{}, err
	}
	var lang *string
	if language != "" {
		lang = &language
	}
	u, err := s.store.SetUserLanguage(ctx, userID, lang)
	if err != nil {
		return app.User{}, err
	}
	// Token look-ups cache the user; this instance forgets them at once, the others
	// when the change feed tells them.
	s.cache.Forget(AuthChange{Kind: AuthChangeUser, ID: userID})
	return u, nil
}

// ValidateLanguage accepts "" (none) and the codes of i18n.Languages.
func ValidateLanguage(language string) error {
	if language == "" || i18n.Supported(language) {
		return nil
	}
	codes := make([]string, len(i18n.Languages))
	for i, l := range i18n.Languages {
		codes[i] = l.Code
	}
	return app.Invalid("language must be one of %s, or empty", strings.Join(codes, ", "))
}
