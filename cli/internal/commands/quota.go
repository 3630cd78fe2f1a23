package commands

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/cli/internal/printable"
	"github.com/shipfile/shipfile/pkg/apiclient"
)

func (a *app) quotaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "quota",
		Short: "Show how much you hold, your storage quota and what your policy allows",
		Long: `Show the storage your packages hold (every file of every package not expired or
deleted, those strangers uploaded to your requests included), what uploads under way
have reserved, your storage quota, your packages in draft or active, and the limits
of your policy (the most generous of your groups', or the default policy). A limit
not shown is no limit. --json prints the API's answer (GET /api/v1/me/usage).`,
		Args: args(0, 0),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			r, err := c.API.GetMyUsageWithResponse(cmd.Context())
			if err := api.Expect(r, err, http.StatusOK); err != nil {
				return err
			}
			u := r.JSON200
			return a.output(u, func(w io.Writer) { writeQuota(w, *u) })
		}),
	}
}

// writeQuota writes the usage and the policy's limits, one a line.
func writeQuota(w io.Writer, u apiclient.MyUsage) {
	if u.QuotaBytes == nil {
		fmt.Fprintf(w, "Used:      %s (no quota)\n", sizeText(u.UsedBytes))
	} else {
		pct := 0.0
		if *u.QuotaBytes > 0 {
			pct = float64(u.UsedBytes+u.ReservedBytes) * 100 / float64(*u.QuotaBytes)
		}
		fmt.Fprintf(w, "Used:      %s of %s (%.0f %%)\n", sizeText(u.UsedBytes), sizeText(*u.QuotaBytes), pct)
	}
	if u.ReservedBytes > 0 {
		fmt.Fprintf(w, "Reserved:  %s by uploads under way\n", sizeText(u.ReservedBytes))
	}
	p := u.Policy
	if p.MaxActivePackages != nil {
		fmt.Fprintf(w, "Packages:  %d of %d in draft or active\n", u.ActivePackages, *p.MaxActivePackages)
	} else {
		fmt.Fprintf(w, "Packages:  %d in draft or active\n", u.ActivePackages)
	}
	limit := func(name, value string) { fmt.Fprintf(w, "%-24s %s\n", name+":", value) }
	if p.MaxFileSize != nil {
		limit("Largest file", sizeText(*p.MaxFileSize))
	}
	if p.MaxPackageSize != nil {
		limit("Largest package", sizeText(*p.MaxPackageSize))
	}
	if p.MaxTtlDays != nil {
		limit("Longest expiry", fmt.Sprintf("%d days", *p.MaxTtlDays))
	}
	if p.MaxDownloadsCeiling != nil {
		limit("Downloads per link", fmt.Sprintf("at most %d (required)", *p.MaxDownloadsCeiling))
	}
	if p.RequirePassword != nil && *p.RequirePassword {
		limit("Link password", "required")
	}
	if p.RequireEncryption != nil && *p.RequireEncryption {
		limit("Encryption", "required (--encrypt)")
	}
	if p.AllowedRecipientDomains != nil && len(*p.AllowedRecipientDomains) > 0 {
		ds := make([]string, len(*p.AllowedRecipientDomains))
		for i, d := range *p.AllowedRecipientDomains {
			ds[i] = printable.String(d)
		}
		limit("Recipients", "only at "+strings.Join(ds, ", "))
	}
	if p.MayRequestFiles != nil && !*p.MayRequestFiles {
		limit("File requests", "not allowed")
	}
}

// sizeText writes n bytes the way people read sizes: 1.2 GiB, 340 KiB, 12 B.
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/float64(div)), ".0") + " " + string("KMGTPE"[exp]) + "iB"
}
