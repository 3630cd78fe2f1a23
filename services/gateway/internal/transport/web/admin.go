package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
)

type usersData struct {
	Users []app.User
}

// users lists every user, with the form to add one.
func (w *Web) users(c *gin.Context) {
	w.showUsers(c, http.StatusOK, view{Form: map[string]string{"role": string(app.RoleRegular)}})
}

func (w *Web) showUsers(c *gin.Context, status int, v view) {
	users, err := w.identity.ListUsers(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return
	}
	v.Title, v.Section, v.D = "Users", "users", usersData{Users: users}
	w.render(c, status, "users", v)
}

func (w *Web) createUser(c *gin.Context) {
	in := app.NewUser{
		Email: strings.TrimSpace(c.PostForm("email")), Name: strings.TrimSpace(c.PostForm("name")),
		Role: app.Role(c.PostForm("role")), Password: c.PostForm("password"),
	}
	v := view{Form: map[string]string{"email": in.Email, "name": in.Name, "role": string(in.Role)}}
	_, err := w.identity.CreateUser(c.Request.Context(), in)
	if fe, msg, ok := formErrors(err, "email", "name", "role", "password"); ok {
		v.Errors, v.Error = fe, msg
		w.showUsers(c, http.StatusUnprocessableEntity, v)
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/admin/users?msg=user-created")
}

type userData struct {
	Subject app.User
	Self    bool
}

func (w *Web) userParam(c *gin.Context) (app.User, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		_ = c.Error(app.NotFound("user"))
		return app.User{}, false
	}
	users, err := w.identity.ListUsers(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return app.User{}, false
	}
	for _, u := range users {
		if u.ID == id {
			return u, true
		}
	}
	_ = c.Error(app.NotFound("user"))
	return app.User{}, false
}

// editUser shows a user's form: name, role, disabled, a new password.
func (w *Web) editUser(c *gin.Context) {
	s, ok := w.userParam(c)
	if !ok {
		return
	}
	me, _ := currentUser(c)
	w.render(c, http.StatusOK, "user", view{
		Title: s.Email, Section: "users",
		Form: map[string]string{"name": s.Name, "role": string(s.Role), "disabled": strconv.FormatBool(s.Disabled)},
		D:    userData{Subject: s, Self: s.ID == me.ID},
	})
}

// saveUser applies the form. Admins cannot disable or demote themselves here, so the
// last admin cannot lock everyone out by mistake.
func (w *Web) saveUser(c *gin.Context) {
	s, ok := w.userParam(c)
	if !ok {
		return
	}
	me, _ := currentUser(c)
	name, role := strings.TrimSpace(c.PostForm("name")), app.Role(c.PostForm("role"))
	disabled := c.PostForm("disabled") == "true"
	password := c.PostForm("password")
	v := view{
		Title: s.Email, Section: "users",
		Form: map[string]string{"name": name, "role": string(role), "disabled": strconv.FormatBool(disabled)},
		D:    userData{Subject: s, Self: s.ID == me.ID},
	}
	if s.ID == me.ID && (disabled || role != app.RoleAdmin) {
		v.Error = "You cannot disable your own account or take away your own admin role."
		w.render(c, http.StatusUnprocessableEntity, "user", v)
		return
	}
	p := app.UserPatch{Name: &name, Role: &role, Disabled: &disabled}
	if password != "" {
		p.Password = &password
	}
	_, err := w.identity.UpdateUser(c.Request.Context(), s.ID, p, identity.UserActor(me, client(c)))
	if fe, msg, ok := formErrors(err, "name", "role", "password"); ok {
		v.Errors, v.Error = fe, msg
		w.render(c, http.StatusUnprocessableEntity, "user", v)
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/admin/users?msg=user-saved")
}

// auditPageSize is how many entries one audit page lists.
const auditPageSize = 50

type auditData struct {
	Entries   []app.AuditEntry
	Users     map[int64]app.User
	PackageID string
	Next      string
}

// audit pages through the audit log, newest first, optionally of one package.
func (w *Web) audit(c *gin.Context) {
	ctx := c.Request.Context()
	d := auditData{PackageID: strings.TrimSpace(c.Query("package_id"))}
	f := app.AuditFilter{Limit: auditPageSize + 1}
	v := view{Title: "Audit log", Section: "audit"}
	if d.PackageID != "" {
		id, err := uuid.Parse(d.PackageID)
		if err != nil {
			v.Errors = map[string]string{"package_id": "Must be a package id (a UUID)."}
			v.D = d
			w.render(c, http.StatusUnprocessableEntity, "audit", v)
			return
		}
		f.PackageID = &id
	}
	if n, err := strconv.ParseInt(c.Query("cursor"), 10, 64); err == nil && n > 0 {
		f.BeforeID = n
	}
	entries, err := w.packages.Audit(ctx, f)
	if err != nil {
		_ = c.Error(err)
		return
	}
	if len(entries) > auditPageSize {
		entries = entries[:auditPageSize]
		q := url.Values{"cursor": {strconv.FormatInt(entries[len(entries)-1].ID, 10)}}
		if d.PackageID != "" {
			q.Set("package_id", d.PackageID)
		}
		d.Next = q.Encode()
	}
	users, err := w.identity.ListUsers(ctx)
	if err != nil {
		_ = c.Error(err)
		return
	}
	d.Entries, d.Users = entries, map[int64]app.User{}
	for _, u := range users {
		d.Users[u.ID] = u
	}
	v.D = d
	w.render(c, http.StatusOK, "audit", v)
}
