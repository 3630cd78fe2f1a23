package httpapi

import (
	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/pkg/i18n"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// languages matches a request's Accept-Language to the supported languages.
var languages = i18n.MustNew()

// senderLanguage is the sender's language, the default of a recipient's: the one the
// user chose (users.language, PATCH /api/v1/me), else the best match of the request's
// Accept-Language, English when it names none of pkg/i18n's.
func senderLanguage(c *gin.Context) string {
	if u := currentUser(c); i18n.Supported(u.Language) {
		return u.Language
	}
	return languages.Match(c.GetHeader("Accept-Language"))
}

// defaultLanguages gives the recipients that name no language lang.
func defaultLanguages(rs []app.RecipientInput, lang string) {
	for i := range rs {
		if rs[i].Language == nil {
			rs[i].Language = &lang
		}
	}
}
