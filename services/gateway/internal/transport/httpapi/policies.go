package httpapi

import (
	"encoding/csv"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	api "github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/policies"
)

// The policies and quotas routes: groups, members, the default policy (admins) and
// usage (everyone their own, admins everyone's). The answers are proto/openapi.yaml's
// Group, Policy, MyUsage and UserUsage (pkg/apiclient); a policy in a request body
// decodes into policies.Policy, which refuses fields it does not know.

// groupRequest is the body of a group's creation or change.
type groupRequest struct {
	Name       *string          `json:"name"`
	Policy     *policies.Policy `json:"policy"`
	OIDCGroups *[]string        `json:"oidc_groups"`
}

// toAPIPolicy is a policy as the API shows it: every limit, null where there is none.
func toAPIPolicy(p policies.Policy) api.Policy {
	out := api.Policy{
		StorageQuotaBytes: p.StorageQuotaBytes, MaxFileSize: p.MaxFileSize, MaxPackageSize: p.MaxPackageSize,
		MaxTtlDays: p.MaxTTLDays, MaxActivePackages: p.MaxActivePackages, MaxDownloadsCeiling: p.MaxDownloadsCeiling,
		RequirePassword: p.RequirePassword, RequireEncryption: p.RequireEncryption, MayRequestFiles: p.MayRequestFiles,
	}
	if p.AllowedRecipientDomains != nil {
		out.AllowedRecipientDomains = &p.AllowedRecipientDomains
	}
	return out
}

func toAPIGroup(g policies.Group) api.Group {
	return api.Group{Id: g.ID, Name: g.Name, Policy: toAPIPolicy(g.Policy), OidcGroups: g.OIDCGroups, Members: g.Members,
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
	c.JSON(http.StatusOK, api.MyUsage{UsedBytes: u.UsedBytes, ReservedBytes: u.ReservedBytes,
		QuotaBytes: pol.StorageQuotaBytes, ActivePackages: u.ActivePackages, Policy: toAPIPolicy(pol)})
}

func (h *handlers) listGroups(c *gin.Context) {
	gs, err := h.policies.Groups(c.Request.Context())
	if err != nil {
		_ = c.Error(err)
		return
	}
	items := make([]api.Group, len(gs))
	for i, g := range gs {
		items[i] = toAPIGroup(g)
	}
	c.JSON(http.StatusOK, api.GroupList{Items: items})
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
	c.JSON(http.StatusCreated, toAPIGroup(g))
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
	c.JSON(http.StatusOK, toAPIGroup(g))
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
	c.JSON(http.StatusOK, toAPIGroup(g))
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
	c.JSON(http.StatusOK, toAPIPolicy(p))
}

func (h *handlers) putDefaultPolicy(c *gin.Context) {
	// A pointer, so that a body of null (which would decode as a policy of no limit at
	// all) is told apart and refused.
	var req *policies.Policy
	if err := decodeJSON(c, h.maxJSON, &req); err != nil {
		_ = c.Error(err)
		return
	}
	if req == nil {
		_ = c.Error(app.Invalid("request body must be a policy object"))
		return
	}
	p, err := h.policies.SetDefaultPolicy(c.Request.Context(), *req)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toAPIPolicy(p))
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
	items := make([]api.UserUsage, 0, len(us))
	for _, u := range us {
		pol, err := h.policies.For(ctx, u.UserID)
		if err != nil {
			_ = c.Error(err)
			return
		}
		items = append(items, api.UserUsage{UserId: u.UserID, Email: u.Email, Name: u.Name, UsedBytes: u.UsedBytes,
			ReservedBytes: u.ReservedBytes, QuotaBytes: pol.StorageQuotaBytes, ActivePackages: u.ActivePackages})
	}
	if format == "json" {
		c.JSON(http.StatusOK, api.UsageList{Items: items})
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
		_ = w.Write([]string{strconv.FormatInt(it.UserId, 10), csvCell(it.Email), csvCell(it.Name), strconv.FormatInt(it.UsedBytes, 10),
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
