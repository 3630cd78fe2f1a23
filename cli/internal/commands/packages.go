package commands

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/cli/internal/printable"
	"github.com/shipfile/shipfile/cli/internal/progress"
	"github.com/shipfile/shipfile/pkg/apiclient"
)

func (a *app) lsCmd() *cobra.Command {
	var (
		state, direction, cursor string
		limit                    int
		all                      bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List your packages, newest first (an admin sees everyone's)",
		Args:  args(0, 0),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 100 {
				return usageErr("--limit must be 1 to 100")
			}
			params := apiclient.ListPackagesParams{Limit: &limit}
			if state != "" {
				s := apiclient.ListPackagesParamsState(state)
				if !s.Valid() {
					return usageErr("--state must be draft, active, revoked or expired")
				}
				params.State = &s
			}
			if direction != "" {
				d := apiclient.ListPackagesParamsDirection(direction)
				if !d.Valid() {
					return usageErr("--direction must be outbound or inbound")
				}
				params.Direction = &d
			}
			if cursor != "" {
				params.Cursor = &cursor
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			list := apiclient.PackageList{Items: []apiclient.Package{}}
			for {
				r, err := c.API.ListPackagesWithResponse(cmd.Context(), &params)
				if err := api.Expect(r, err, http.StatusOK); err != nil {
					return err
				}
				list.Items = append(list.Items, r.JSON200.Items...)
				list.NextCursor = r.JSON200.NextCursor
				if !all || list.NextCursor == nil {
					break
				}
				params.Cursor = list.NextCursor
			}
			return a.output(list, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSTATE\tDIRECTION\tFILES\tSIZE\tEXPIRES\tTO\tTITLE")
				for _, p := range list.Items {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", p.Id, p.State, p.Direction, p.FileCount,
						progress.Bytes(p.TotalSize), day(&p.ExpiresAt), printable.String(string(p.RecipientEmail)), printable.String(p.Title))
				}
				tw.Flush()
				if list.NextCursor != nil {
					fmt.Fprintf(w, "more: shipfile ls --cursor %s (or --all)\n", *list.NextCursor)
				}
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&state, "state", "", "only packages in this state: draft, active, revoked, expired")
	f.StringVar(&direction, "direction", "", "only outbound (sent) or inbound (requested) packages")
	f.IntVar(&limit, "limit", defaultPage, "packages per page (1-100)")
	f.StringVar(&cursor, "cursor", "", "the next page: next_cursor of the previous one")
	f.BoolVar(&all, "all", false, "every page")
	return cmd
}

// packageID reads a package id argument (a usage error when it is none).
func packageID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, usageErr("%q is not a package id (see 'shipfile ls')", s)
	}
	return id, nil
}

// packageCmd is a command on one package, "NAME ID": do gets the parsed id (a usage error
// before anything else when it is none) and the API client.
func (a *app) packageCmd(name, short string, do func(ctx context.Context, c *api.Client, id uuid.UUID) error) *cobra.Command {
	return &cobra.Command{
		Use:   name + " ID",
		Short: short,
		Args:  args(1, 1),
		RunE: run(func(cmd *cobra.Command, argv []string) error {
			id, err := packageID(argv[0])
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			return do(cmd.Context(), c, id)
		}),
	}
}

func (a *app) showCmd() *cobra.Command {
	return a.packageCmd("show", "Show a package and its files", func(ctx context.Context, c *api.Client, id uuid.UUID) error {
		r, err := c.API.GetPackageWithResponse(ctx, id)
		if err := api.Expect(r, err, http.StatusOK); err != nil {
			return err
		}
		p := r.JSON200
		return a.output(p, func(w io.Writer) {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "id\t%s\n", p.Id)
			fmt.Fprintf(tw, "title\t%s\n", printable.String(p.Title))
			fmt.Fprintf(tw, "state\t%s (%s)\n", p.State, p.Direction)
			fmt.Fprintf(tw, "recipient\t%s %s\n", printable.String(string(p.RecipientEmail)), printable.String(p.RecipientName))
			fmt.Fprintf(tw, "created\t%s\n", day(&p.CreatedAt))
			fmt.Fprintf(tw, "expires\t%s\n", day(&p.ExpiresAt))
			if p.RevokedAt != nil {
				fmt.Fprintf(tw, "revoked\t%s\n", day(p.RevokedAt))
			}
			fmt.Fprintf(tw, "password\t%v\n", p.PasswordProtected)
			if p.MaxDownloads != nil {
				fmt.Fprintf(tw, "max downloads\t%d\n", *p.MaxDownloads)
			}
			fmt.Fprintf(tw, "link used\t%d times, last %s\n", p.LinkUseCount, day(p.LinkLastUsedAt))
			if p.Note != "" {
				fmt.Fprintf(tw, "note\t%s\n", printable.String(p.Note))
			}
			fmt.Fprintf(tw, "files\t%d, %s\n", p.FileCount, progress.Bytes(p.TotalSize))
			tw.Flush()
			if len(p.Files) > 0 {
				fmt.Fprintln(w)
				tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "FILE ID\tSIZE\tDOWNLOADS\tBY\tSCAN\tSHA-256\tNAME")
				for _, f := range p.Files {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", f.Id, progress.Bytes(f.Size), f.DownloadCount, f.UploadedBy,
						scanColumn(string(f.Scan), f.ScanSignature, f.ScanReleasedAt != nil), f.Sha256, printable.String(f.Filename))
				}
				tw.Flush()
			}
		})
	})
}

// scanColumn is a file's scan state in `shipfile show`: the state, with what clamd
// answered when it found something ("infected: Eicar-Test-Signature"), and "(released)"
// for a file its owner released unchecked.
func scanColumn(state string, signature *string, released bool) string {
	if state == "" {
		state = "-"
	}
	if signature != nil && *signature != "" {
		state += ": " + *signature
	}
	if released {
		state += " (released)"
	}
	return printable.String(state)
}

func (a *app) revokeCmd() *cobra.Command {
	return a.packageCmd("revoke", "Revoke a package: its link stops working at once", func(ctx context.Context, c *api.Client, id uuid.UUID) error {
		r, err := c.API.RevokePackageWithResponse(ctx, id)
		if err := api.Expect(r, err, http.StatusOK); err != nil {
			return err
		}
		return a.output(r.JSON200, func(w io.Writer) {
			fmt.Fprintf(w, "Package %s revoked\n", id)
		})
	})
}

func (a *app) rmCmd() *cobra.Command {
	return a.packageCmd("rm", "Delete a package and its files", func(ctx context.Context, c *api.Client, id uuid.UUID) error {
		r, err := c.API.DeletePackageWithResponse(ctx, id)
		if err := api.Expect(r, err, http.StatusNoContent); err != nil {
			return err
		}
		return a.output(map[string]any{"id": id, "deleted": true}, func(w io.Writer) {
			fmt.Fprintf(w, "Package %s deleted\n", id)
		})
	})
}
