package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

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
	// Why lists, in words, what the policy asks of a package.
	Why []string
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
	b := &usageBar{Used: policies.Bytes(us.UsedBytes), UsedBytes: us.UsedBytes, Active: us.ActivePackages, MaxActive: pol.MaxActivePackages}
	if us.ReservedBytes > 0 {
		b.Reserved, b.ReservedBytes = policies.Bytes(us.ReservedBytes), us.ReservedBytes
	}
	if q := pol.StorageQuotaBytes; q != nil {
		b.Quota, b.QuotaBytes = policies.Bytes(*q), *q
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
		h.Why = append(h.Why, fmt.Sprintf("links work for at most %d days", d.MaxTTL))
	}
	if pol.RequirePassword != nil && *pol.RequirePassword && d.Direction == app.Outbound {
		h.RequirePassword = true
		h.Why = append(h.Why, "a link needs a password")
	}
	if pol.MaxDownloadsCeiling != nil && d.Direction == app.Outbound {
		h.DownloadsCeiling = *pol.MaxDownloadsCeiling
		h.Why = append(h.Why, fmt.Sprintf("a download limit is required, at most %d", h.DownloadsCeiling))
	}
	if pol.RequireEncryption != nil && *pol.RequireEncryption {
		h.RequireEncryption = true
		h.Why = append(h.Why, "packages must be encrypted end to end")
	}
	if len(pol.AllowedRecipientDomains) > 0 {
		h.Domains = strings.Join(pol.AllowedRecipientDomains, ", ")
		h.Why = append(h.Why, "recipients only at "+h.Domains)
	}
	if pol.MaxFileSize != nil {
		h.Why = append(h.Why, "files of at most "+policies.Bytes(*pol.MaxFileSize))
	}
	d.Policy = h
	return nil
}

// policiesData is the admin's policies page.
type policiesData struct {
	Default []string // the default policy's limits in words
	Groups  []groupRow
	Usage   []usageRow
	Cap     string
}

// groupRow is one group's line: its policy's limits in words.
type groupRow struct {
	policies.Group
	Limits, SSO string
}

// usageRow is one user's line of the usage table.
type usageRow struct {
	policies.Usage
	Used, Reserved, Quota string
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
	d := policiesData{Default: policyLines(def)}
	for _, g := range groups {
		d.Groups = append(d.Groups, groupRow{Group: g, Limits: strings.Join(policyLines(g.Policy), "; "), SSO: strings.Join(g.OIDCGroups, ", ")})
	}
	if cp := w.policies.StorageCap(); cp > 0 {
		d.Cap = policies.Bytes(cp)
	}
	for _, u := range us {
		pol, err := w.policies.For(ctx, u.UserID)
		if err != nil {
			_ = c.Error(err)
			return
		}
		row := usageRow{Usage: u, Used: policies.Bytes(u.UsedBytes), Reserved: policies.Bytes(u.ReservedBytes)}
		if pol.StorageQuotaBytes != nil {
			row.Quota = policies.Bytes(*pol.StorageQuotaBytes)
		}
		d.Usage = append(d.Usage, row)
	}
	w.render(c, http.StatusOK, "policies", view{Title: "Policies", Section: "policies", D: d})
}

// policyLines writes a policy's limits in words, one an entry ("no limits" when none).
func policyLines(p policies.Policy) []string {
	var out []string
	add := func(s string) { out = append(out, s) }
	if p.StorageQuotaBytes != nil {
		add("storage quota " + policies.Bytes(*p.StorageQuotaBytes))
	}
	if p.MaxFileSize != nil {
		add("files up to " + policies.Bytes(*p.MaxFileSize))
	}
	if p.MaxPackageSize != nil {
		add("packages up to " + policies.Bytes(*p.MaxPackageSize))
	}
	if p.MaxTTLDays != nil {
		add(fmt.Sprintf("links up to %d days", *p.MaxTTLDays))
	}
	if p.MaxActivePackages != nil {
		add(fmt.Sprintf("at most %d packages in draft or active", *p.MaxActivePackages))
	}
	if p.MaxDownloadsCeiling != nil {
		add(fmt.Sprintf("download limit required, at most %d", *p.MaxDownloadsCeiling))
	}
	if p.RequirePassword != nil && *p.RequirePassword {
		add("password required")
	}
	if p.RequireEncryption != nil && *p.RequireEncryption {
		add("encryption required")
	}
	if len(p.AllowedRecipientDomains) > 0 {
		add("recipients at " + strings.Join(p.AllowedRecipientDomains, ", "))
	}
	if p.MayRequestFiles != nil && !*p.MayRequestFiles {
		add("no file requests")
	}
	if len(out) == 0 {
		add("no limits")
	}
	return out
}
