package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	api_types "github.com/oapi-codegen/runtime/types"

	api "github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
)

// createdToken is a CreatedToken: the token's record and, this once, the raw token.
type createdToken struct {
	api.Token
	api.RawToken
}

// toAPIUser is a user record in the admin API; timestamps are UTC.
func toAPIUser(u app.User) api.User {
	methods := u.AuthMethods()
	auth := make([]api.UserAuth, len(methods))
	for i, m := range methods {
		auth[i] = api.UserAuth(m)
	}
	return api.User{Id: u.ID, Email: api_types.Email(u.Email), Name: u.Name, Role: api.UserRole(u.Role), Disabled: u.Disabled,
		CreatedAt: u.CreatedAt.UTC(), Auth: auth}
}

// toAPIToken is an API token's record; the raw token is never in it.
func toAPIToken(t app.Token) api.Token {
	return api.Token{
		Id: t.ID, Name: t.Name, Prefix: t.Prefix,
		CreatedAt: t.CreatedAt.UTC(), ExpiresAt: utcPtr(t.ExpiresAt), LastUsedAt: utcPtr(t.LastUsedAt),
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// toAPIMe is GET /api/v1/me; Language is null when the user has chosen none.
func toAPIMe(u app.User) api.Me {
	m := api.Me{Id: u.ID, Email: api_types.Email(u.Email), Name: u.Name, Role: api.MeRole(u.Role), CreatedAt: u.CreatedAt.UTC()}
	if u.Language != "" {
		lang := api.MeLanguage(u.Language)
		m.Language = &lang
	}
	return m
}

func (h *handlers) me(c *gin.Context) {
	c.JSON(http.StatusOK, toAPIMe(currentUser(c)))
}

// patchMeRequest is PATCH /api/v1/me: the fields the user may change themselves.
// Language is present-and-null to clear it, so it is decoded in two steps.
type patchMeRequest struct {
	Language json.RawMessage `json:"language"`
}

func (h *handlers) patchMe(c *gin.Context) {
	var req patchMeRequest
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	u := currentUser(c)
	if req.Language == nil {
		c.JSON(http.StatusOK, toAPIMe(u))
		return
	}
	var lang *string
	if err := json.Unmarshal(req.Language, &lang); err != nil {
		_ = c.Error(app.Invalid("language must be a string or null"))
		return
	}
	code := ""
	if lang != nil {
		code = *lang
		if code == "" {
			_ = c.Error(app.Invalid("language must be one of the supported codes, or null"))
			return
		}
	}
	u, err := h.identity.SetLanguage(c.Request.Context(), u.ID, code)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toAPIMe(u))
}

func (h *handlers) listTokens(c *gin.Context) {
	tokens, err := h.identity.ListTokens(c.Request.Context(), currentUser(c).ID)
	if err != nil {
		_ = c.Error(err)
		return
	}
	out := make([]api.Token, len(tokens))
	for i, t := range tokens {
		out[i] = toAPIToken(t)
	}
	c.JSON(http.StatusOK, api.TokenList{Items: out})
}

type createTokenRequest struct {
	Name      *string `json:"name"`
	ExpiresAt *string `json:"expires_at"`
}

func (h *handlers) createToken(c *gin.Context) {
	var req createTokenRequest
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	name, err := required("name", req.Name)
	if err != nil {
		_ = c.Error(err)
		return
	}
	expires, err := parseTime("expires_at", req.ExpiresAt)
	if err != nil {
		_ = c.Error(err)
		return
	}
	// A token minted with a token expires no later than that token.
	if parent, ok := c.Get(ctxTokenExpires); ok {
		expires = identity.TokenExpiryWithin(expires, parent.(*time.Time))
	}
	t, raw, err := h.identity.CreateToken(c.Request.Context(), currentUser(c).ID, name, expires, identity.UserActor(currentUser(c), client(c)))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusCreated, createdToken{toAPIToken(t), api.RawToken{Token: raw}})
}

func (h *handlers) deleteToken(c *gin.Context) {
	id, err := pathID(c, "id", "token")
	if err != nil {
		_ = c.Error(err)
		return
	}
	if err := h.identity.RevokeToken(c.Request.Context(), currentUser(c).ID, id, identity.UserActor(currentUser(c), client(c))); err != nil {
		_ = c.Error(err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *handlers) listUsers(c *gin.Context) {
	users, err := h.identity.ListUsers(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return
	}
	out := make([]api.User, len(users))
	for i, u := range users {
		out[i] = toAPIUser(u)
	}
	c.JSON(http.StatusOK, api.UserList{Items: out})
}

type createUserRequest struct {
	Email    *string `json:"email"`
	Name     *string `json:"name"`
	Role     *string `json:"role"`
	Password *string `json:"password"`
}

func (h *handlers) createUser(c *gin.Context) {
	var req createUserRequest
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	in := app.NewUser{Role: app.RoleRegular}
	var err error
	if in.Email, err = required("email", req.Email); err != nil {
		_ = c.Error(err)
		return
	}
	if in.Name, err = required("name", req.Name); err != nil {
		_ = c.Error(err)
		return
	}
	if req.Role != nil {
		in.Role = app.Role(*req.Role)
	}
	if req.Password != nil {
		in.Password = *req.Password
		if in.Password == "" {
			_ = c.Error(app.Invalid("password must be at least %d characters", app.MinPasswordLen))
			return
		}
	}
	u, err := h.identity.CreateUser(c.Request.Context(), in)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusCreated, toAPIUser(u))
}

type updateUserRequest struct {
	Email    *string `json:"email"`
	Name     *string `json:"name"`
	Role     *string `json:"role"`
	Disabled *bool   `json:"disabled"`
	Password *string `json:"password"`
}

func (h *handlers) updateUser(c *gin.Context) {
	id, err := pathID(c, "id", "user")
	if err != nil {
		_ = c.Error(err)
		return
	}
	var req updateUserRequest
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	p := app.UserPatch{Email: req.Email, Name: req.Name, Disabled: req.Disabled, Password: req.Password}
	if req.Role != nil {
		r := app.Role(*req.Role)
		p.Role = &r
	}
	u, err := h.identity.UpdateUser(c.Request.Context(), id, p, identity.UserActor(currentUser(c), client(c)))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toAPIUser(u))
}
