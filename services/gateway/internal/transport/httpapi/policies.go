package httpapi

import (
	"encoding/csv"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/policies"
)

// The policies and quotas routes: groups, members, the default policy (admins) and
// usage (everyone their own, admins everyone's). A policy's JSON form is
// policies.Policy's (proto/openapi.yaml Policy), the one the store keeps.

// groupResponse is a group's record.
type groupResponse struct {
	ID         int64           `json:"id"`
	Name       string          `json:"name"`
	Policy     policies.Policy `json:"policy"`
	OIDCGroups []string        `json:"oidc_groups"`
	Members    []int64         `json:"members"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

// groupRequest is the body of a group's creation or change.
type groupRequest struct {
	Name       *string          `json:"name"`
	Policy     *policies.Policy `json:"policy"`
	OIDCGroups *[]string        `json:"oidc_groups"`
}

// usageResponse is a user's usage (GET /api/v1/admin/usage).
type usageResponse struct {
	UserID         int64  `json:"user_id"`
	Email          string `json:"email"`
	Name           string `json:"name"`
	UsedBytes      int64  `json:"used_bytes"`
	ReservedBytes  int64  `json:"reserved_bytes"`
	QuotaBytes     *int64 `json:"quota_bytes"`
	ActivePackages int    `json:"active_packages"`
}

// myUsageResponse is the caller's usage (GET /api/v1/me/usage).
type myUsageResponse struct {
	UsedBytes      int64           `json:"used_bytes"`
	ReservedBytes  int64           `json:"reserved_bytes"`
	QuotaBytes     *int64          `json:"quota_bytes"`
	ActivePackages int             `json:"active_packages"`
	Policy         policies.Policy `json:"policy"`
}

func toGroupResponse(g policies.Group) groupResponse {
	return groupResponse{ID: g.ID, Name: g.Name, Policy: g.Policy, OIDCGroups: g.OIDCGroups, Members: g.Members,
		CreatedAt: g.CreatedAt.UTC(), UpdatedAt: g.UpdatedAt.UTC()}
}

func (r groupRequest) toDomain() policies.GroupInput {
	return policies.GroupInput{Name: r.Name, Policy: r.Policy, OIDCGroups: r.OIDCGroups}
}

func (h *handlers) myUsage(c *gin.Context) {
	u, pol, err := h.policies.Usage(c.Request.Context(), currentUser(c).ID)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, myUsageResponse{UsedBytes: u.UsedBytes, ReservedBytes: u.ReservedBytes,
		QuotaBytes: pol.StorageQuotaBytes, ActivePackages: u.ActivePackages, Policy: pol})
}

func (h *handlers) listGroups(c *gin.Context) {
	gs, err := h.policies.Groups(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return
	}
	items := make([]groupResponse, 0, len(gs))
	for _, g := range gs {
		items = append(items, toGroupResponse(g))
	}
	c.JSON(http.StatusOK, gin.H{"items": items})
}

func (h *handlers) createGroup(c *gin.Context) {
	var req groupRequest
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	g, err := h.policies.CreateGroup(c.Request.Context(), req.toDomain())
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusCreated, toGroupResponse(g))
}

func (h *handlers) getGroup(c *gin.Context) {
	id, err := pathID(c, "id", "group")
	if err != nil {
		_ = c.Error(err)
		return
	}
	g, err := h.policies.Group(c.Request.Context(), id)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toGroupResponse(g))
}

func (h *handlers) updateGroup(c *gin.Context) {
	id, err := pathID(c, "id", "group")
	if err != nil {
		_ = c.Error(err)
		return
	}
	var req groupRequest
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	g, err := h.policies.UpdateGroup(c.Request.Context(), id, req.toDomain())
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toGroupResponse(g))
}

func (h *handlers) deleteGroup(c *gin.Context) {
	id, err := pathID(c, "id", "group")
	if err != nil {
		_ = c.Error(err)
		return
	}
	if err := h.policies.DeleteGroup(c.Request.Context(), id); err != nil {
		_ = c.Error(err)
		return
	}
	c.Status(http.StatusNoContent)
}

// membership reads a member route's group and user ids.
func membership(c *gin.Context) (group, user int64, err error) {
	if group, err = pathID(c, "id", "group"); err != nil {
		return 0, 0, err
	}
	user, err = pathID(c, "user_id", "user")
	return group, user, err
}

func (h *handlers) putGroupMember(c *gin.Context) {
	group, user, err := membership(c)
	if err == nil {
		err = h.policies.PutMember(c.Request.Context(), group, user)
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *handlers) deleteGroupMember(c *gin.Context) {
	group, user, err := membership(c)
	if err == nil {
		err = h.policies.DeleteMember(c.Request.Context(), group, user)
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *handlers) getDefaultPolicy(c *gin.Context) {
	p, err := h.policies.DefaultPolicy(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, p)
}

func (h *handlers) putDefaultPolicy(c *gin.Context) {
	var req policies.Policy
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	p, err := h.policies.SetDefaultPolicy(c.Request.Context(), req)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, p)
}

func (h *handlers) listUsage(c *gin.Context) {
	ctx := c.Request.Context()
	format := c.DefaultQuery("format", "json")
	if format != "json" && format != "csv" {
		_ = c.Error(app.Invalid("format must be json or csv"))
		return
	}
	us, err := h.policies.ListUsage(ctx, policies.UsageSort(c.Query("sort")))
	if err != nil {
		_ = c.Error(err)
		return
	}
	items := make([]usageResponse, 0, len(us))
	for _, u := range us {
		pol, err := h.policies.For(ctx, u.UserID)
		if err != nil {
			_ = c.Error(err)
			return
		}
		items = append(items, usageResponse{UserID: u.UserID, Email: u.Email, Name: u.Name, UsedBytes: u.UsedBytes,
			ReservedBytes: u.ReservedBytes, QuotaBytes: pol.StorageQuotaBytes, ActivePackages: u.ActivePackages})
	}
	if format == "json" {
		c.JSON(http.StatusOK, gin.H{"items": items})
		return
	}
	c.Header("Content-Type", "text/csv; charset=utf-8")
	c.Header("Content-Disposition", `attachment; filename="usage.csv"`)
	c.Status(http.StatusOK)
	w := csv.NewWriter(c.Writer)
	_ = w.Write([]string{"user_id", "email", "name", "used_bytes", "reserved_bytes", "quota_bytes", "active_packages"})
	for _, it := range items {
		quota := ""
		if it.QuotaBytes != nil {
			quota = strconv.FormatInt(*it.QuotaBytes, 10)
		}
		_ = w.Write([]string{strconv.FormatInt(it.UserID, 10), csvCell(it.Email), csvCell(it.Name), strconv.FormatInt(it.UsedBytes, 10),
			strconv.FormatInt(it.ReservedBytes, 10), quota, strconv.Itoa(it.ActivePackages)})
	}
	w.Flush()
}

// csvCell keeps a cell from being read as a formula by a spreadsheet.
func csvCell(s string) string {
	if s != "" && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@') {
		return "'" + s
	}
	return s
}
