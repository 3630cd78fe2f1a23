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
	"github.com/shipfile/shipfile/pkg/bytesize"
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
		fmt.Fprintf(w, "Used:      %s (no quota)\n", bytesize.IEC(u.UsedBytes))
	} else {
		pct := 0.0
		if *u.QuotaBytes > 0 {
			pct = float64(u.UsedBytes+u.ReservedBytes) * 100 / float64(*u.QuotaBytes)
		}
		fmt.Fprintf(w, "Used:      %s of %s (%.0f %%)\n", bytesize.IEC(u.UsedBytes), bytesize.IEC(*u.QuotaBytes), pct)
	}
	if u.ReservedBytes > 0 {
		fmt.Fprintf(w, "Reserved:  %s by uploads under way\n", bytesize.IEC(u.ReservedBytes))
	}
	p := u.Policy
	if p.MaxActivePackages != nil {
		fmt.Fprintf(w, "Packages:  %d of %d in draft or active\n", u.ActivePackages, *p.MaxActivePackages)
	} else {
		fmt.Fprintf(w, "Packages:  %d in draft or active\n", u.ActivePackages)
	}
	limit := func(name, value string) { fmt.Fprintf(w, "%-24s %s\n", name+":", value) }
	if p.MaxFileSize != nil {
		limit("Largest file", bytesize.IEC(*p.MaxFileSize))
	}
	if p.MaxPackageSize != nil {
		limit("Largest package", bytesize.IEC(*p.MaxPackageSize))
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
