package httpapi

import "github.com/gin-gonic/gin"

// ContentSecurityPolicy is the policy of every answer unless a handler sets its own:
// scripts and styles only from this origin (no inline script, no eval), no framing,
// forms post only here.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// securityHeaders sets the headers every answer carries, pages and API alike. Pages
// behind a magic link tighten Referrer-Policy to no-referrer; the docs pages widen
// the policy for their viewers' inline styles.
func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	c.Next()
}
