package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/gin-gonic/gin"
	"golang.org/x/oauth2"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
)

// linkSSO runs the provider's sign-in for the signed-in user, to link the identity
// it names to them (the account page's "Link SSO").
func (w *Web) linkSSO(c *gin.Context) {
	u, _ := currentUser(c)
	w.startOIDC(c, "/account", u.ID)
}

// oidcLinked ends a callback of a "Link SSO" sign-in: the browser must still be
// signed in as the user who started it; the identity is linked to them, audited and
// e-mailed, or the page says why not.
func (w *Web) oidcLinked(c *gin.Context, login identity.OIDCLogin, claims identity.OIDCClaims) {
	u, ok := currentUser(c)
	if !ok || u.ID != login.LinkUserID {
		w.oidcFail(c, http.StatusBadRequest, "This link was started by another sign-in. Sign in and link again from the Account page.", nil)
		return
	}
	_, err := w.identity.LinkOIDC(c.Request.Context(), w.oidcStore, u, claims, w.oidc.cfg.Policy, client(c))
	var refusal *identity.OIDCRefusal
	if errors.As(err, &refusal) {
		w.log.Info("OpenID link refused", "user_id", u.ID, "issuer", claims.Issuer, "subject", claims.Subject, "why", refusal.Reason)
		w.oidcFail(c, http.StatusConflict, refusal.Reason, nil)
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/account?msg=sso-linked")
}

// unlinkSSO removes the signed-in user's identity of the provider (they keep their
// password), audited and e-mailed.
func (w *Web) unlinkSSO(c *gin.Context) {
	u, _ := currentUser(c)
	if w.oidc == nil {
		_ = c.Error(app.NotFound("page"))
		return
	}
	if _, err := w.identity.UnlinkOIDC(c.Request.Context(), w.oidcStore, u, client(c)); err != nil {
		_ = c.Error(err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/account?msg=sso-unlinked")
}

// OIDCRefresher is the relying party's refresh of sessions begun through the
// provider (identity.OIDCRecheck); nil without a provider.
func (w *Web) OIDCRefresher() identity.OIDCRefresher {
	if w.oidc == nil {
		return nil
	}
	return w.oidc
}

// Refresh redeems a refresh token at the provider's token endpoint and reads the
// identity's claims from the new ID token (verified as at sign-in, but for the
// nonce, which a refreshed token does not carry) and userinfo.
func (o *oidcClient) Refresh(ctx context.Context, refreshToken string) (identity.OIDCClaims, string, error) {
	if err := o.discover(); err != nil {
		return identity.OIDCClaims{}, "", err
	}
	xctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, oidcHTTP), 15*time.Second)
	defer cancel()
	tok, err := o.oauth.TokenSource(xctx, &oauth2.Token{RefreshToken: refreshToken}).Token()
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && refused(re) {
		return identity.OIDCClaims{}, "", identity.ErrRefreshRefused
	}
	if err != nil {
		return identity.OIDCClaims{}, "", err
	}
	next := tok.RefreshToken
	if next == "" {
		next = refreshToken
	}
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		info, err := o.provider.UserInfo(xctx, oauth2.StaticTokenSource(tok))
		if err != nil {
			return identity.OIDCClaims{}, "", err
		}
		var m map[string]json.RawMessage
		if err := info.Claims(&m); err != nil {
			return identity.OIDCClaims{}, "", err
		}
		c := claimReader{groupsClaim: o.cfg.GroupsClaim, OIDCClaims: identity.OIDCClaims{Issuer: o.cfg.Issuer, Subject: info.Subject}}
		c.read(m)
		return c.OIDCClaims, next, nil
	}
	idt, err := o.verifier.Verify(xctx, rawID)
	if err != nil {
		return identity.OIDCClaims{}, "", identity.ErrRefreshRefused
	}
	claims, err := o.claims(xctx, idt, tok)
	return claims, next, err
}

// refused reports whether the token endpoint's answer refuses the refresh token
// itself (the grant is gone), as opposed to failing for another reason.
func refused(re *oauth2.RetrieveError) bool {
	switch re.ErrorCode {
	case "invalid_grant", "unauthorized_client":
		return true
	case "":
		return re.Response != nil && (re.Response.StatusCode == http.StatusBadRequest || re.Response.StatusCode == http.StatusUnauthorized)
	}
	return false
}
