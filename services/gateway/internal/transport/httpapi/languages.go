package httpapi

import (
	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/pkg/i18n"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// languages matches a request's Accept-Language to the supported languages.
var languages = i18n.MustNew()

// senderLanguage is the language of the sender's request (its Accept-Language),
// English when it names none of pkg/i18n's: the default of a recipient's language.
func senderLanguage(c *gin.Context) string {
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
