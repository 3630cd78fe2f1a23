package web

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/shipfile/shipfile/pkg/bytesize"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/policies"
)

// usageBar is the packages page's view of the user's storage (docs/POLICIES.md).
type usageBar struct {
	Used, Reserved, Quota string
	// UsedBytes, ReservedBytes and QuotaBytes are the same in bytes, for the page to
	// write in its language (QuotaBytes 0 when Quota is "").
	UsedBytes, ReservedBytes, QuotaBytes int64
	// Percent of the quota held (used and reserved), 0–100; Quota "" when none.
	Percent int
	Full    bool // 90 % or more
	Active  int
	// MaxActive is the policy's max_active_packages (nil: no limit).
	MaxActive *int
}

// policyHints is what the send and request forms offer under the user's policy, and
// why they offer no more.
type policyHints struct {
	RequirePassword   bool
	RequireEncryption bool
	// DownloadsCeiling: a download limit is required, at most this (0: none).
	DownloadsCeiling int
	MayRequest       bool
	Domains          string // the allowed recipients' domains, "" for any
	// Why lists what the policy asks of a package, as catalog messages.
	Why []message
}

// usageOf returns the user's usage bar; nil without policies.
func (w *Web) usageOf(ctx context.Context, u app.User) (*usageBar, error) {
	if w.policies == nil {
		return nil, nil
	}
	us, pol, err := w.policies.Usage(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	b := &usageBar{Used: bytesize.IEC(us.UsedBytes), UsedBytes: us.UsedBytes, Active: us.ActivePackages, MaxActive: pol.MaxActivePackages}
	if us.ReservedBytes > 0 {
		b.Reserved, b.ReservedBytes = bytesize.IEC(us.ReservedBytes), us.ReservedBytes
	}
	if q := pol.StorageQuotaBytes; q != nil {
		b.Quota, b.QuotaBytes = bytesize.IEC(*q), *q
		b.Percent = 100
		if *q > 0 {
			b.Percent = int(min(us.Held()*100 / *q, 100))
		}
		b.Full = policies.NearlyFull(q, us.Held())
	}
	return b, nil
}

// formPolicy sets d's limits to what the user's policy allows.
func (w *Web) formPolicy(ctx context.Context, u app.User, d *packageFormData) error {
	if w.policies == nil {
		return nil
	}
	pol, err := w.policies.For(ctx, u.ID)
	if err != nil {
		return err
	}
	h := &policyHints{MayRequest: pol.MayRequestFiles == nil || *pol.MayRequestFiles}
	if pol.MaxTTLDays != nil && *pol.MaxTTLDays < d.MaxTTL {
		d.MaxTTL = *pol.MaxTTLDays
		h.Why = append(h.Why, msg("why.ttl", "Count", d.MaxTTL))
	}
	if pol.RequirePassword != nil && *pol.RequirePassword && d.Direction == app.Outbound {
		h.RequirePassword = true
		h.Why = append(h.Why, msg("why.password"))
	}
	if pol.MaxDownloadsCeiling != nil && d.Direction == app.Outbound {
		h.DownloadsCeiling = *pol.MaxDownloadsCeiling
		h.Why = append(h.Why, msg("why.downloads", "N", h.DownloadsCeiling))
	}
	if pol.RequireEncryption != nil && *pol.RequireEncryption {
		h.RequireEncryption = true
		h.Why = append(h.Why, msg("why.encryption"))
	}
	if len(pol.AllowedRecipientDomains) > 0 {
		h.Domains = strings.Join(pol.AllowedRecipientDomains, ", ")
		h.Why = append(h.Why, msg("why.domains", "Domains", h.Domains))
	}
	if pol.MaxFileSize != nil {
		h.Why = append(h.Why, msg("why.file", "Size", size(*pol.MaxFileSize)))
	}
	d.Policy = h
	return nil
}

// policiesData is the admin's policies page.
type policiesData struct {
	Default []message // the default policy's limits
	Groups  []groupRow
	Usage   []usageRow
	Cap     int64 // SHIPFILE_STORAGE_CAP; 0: none
}

// groupRow is one group's line: its policy's limits.
type groupRow struct {
	policies.Group
	Limits []message
	SSO    string
}

// usageRow is one user's line of the usage table.
type usageRow struct {
	policies.Usage
	Quota *int64 // the user's storage quota; nil: none
}

// policiesPage shows the groups, the default policy and every user's usage (admins;
// changes go through the admin API: docs/POLICIES.md).
func (w *Web) policiesPage(c *gin.Context) {
	ctx := c.Request.Context()
	if w.policies == nil {
		_ = c.Error(app.NotFound("page"))
		return
	}
	def, err := w.policies.DefaultPolicy(ctx)
	if err != nil {
		_ = c.Error(err)
		return
	}
	groups, err := w.policies.Groups(ctx)
	if err != nil {
		_ = c.Error(err)
		return
	}
	us, err := w.policies.ListUsage(ctx, policies.SortUsed)
	if err != nil {
		_ = c.Error(err)
		return
	}
	d := policiesData{Default: policyLines(def), Cap: max(w.policies.StorageCap(), 0)}
	for _, g := range groups {
		d.Groups = append(d.Groups, groupRow{Group: g, Limits: policyLines(g.Policy), SSO: strings.Join(g.OIDCGroups, ", ")})
	}
	for _, u := range us {
		pol, err := w.policies.For(ctx, u.UserID)
		if err != nil {
			_ = c.Error(err)
			return
		}
		d.Usage = append(d.Usage, usageRow{Usage: u, Quota: pol.StorageQuotaBytes})
	}
	w.render(c, http.StatusOK, "policies", view{Title: "Policies", Section: "policies", D: d})
}

// policyLines says a policy's limits, one a message ("no limits" when none).
func policyLines(p policies.Policy) []message {
	var out []message
	add := func(id string, pairs ...any) { out = append(out, msg(id, pairs...)) }
	if p.StorageQuotaBytes != nil {
		add("policy.quota", "Size", size(*p.StorageQuotaBytes))
	}
	if p.MaxFileSize != nil {
		add("policy.file", "Size", size(*p.MaxFileSize))
	}
	if p.MaxPackageSize != nil {
		add("policy.package", "Size", size(*p.MaxPackageSize))
	}
	if p.MaxTTLDays != nil {
		add("policy.ttl", "Count", *p.MaxTTLDays)
	}
	if p.MaxActivePackages != nil {
		add("policy.active", "Count", *p.MaxActivePackages)
	}
	if p.MaxDownloadsCeiling != nil {
		add("policy.downloads", "N", *p.MaxDownloadsCeiling)
	}
	if p.RequirePassword != nil && *p.RequirePassword {
		add("policy.password")
	}
	if p.RequireEncryption != nil && *p.RequireEncryption {
		add("policy.encryption")
	}
	if len(p.AllowedRecipientDomains) > 0 {
		add("policy.domains", "Domains", strings.Join(p.AllowedRecipientDomains, ", "))
	}
	if p.MayRequestFiles != nil && !*p.MayRequestFiles {
		add("policy.no_requests")
	}
	if len(out) == 0 {
		add("policy.none")
	}
	return out
}
