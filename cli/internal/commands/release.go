package commands

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/cli/internal/printable"
	"github.com/shipfile/shipfile/pkg/apiclient"
)

func (a *app) releaseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "release ID FILE",
		Short: "Release a file the malware scan could not judge, so that it is served unchecked",
		Long: `Release a file of your package (an admin: of anyone's) whose malware scan could not
judge it (scan: unscannable, e.g. an encrypted archive or a file over the scanner's
limits) or failed (scan: error). A server that blocks unscanned files holds such a file,
through the link and from 'shipfile get ID' for what a stranger uploaded, until it is
released; released, it is served as a clean one would be, and the server records who
released it and when (show: "(released)").

FILE is the file's id (the FILE ID column of 'shipfile show ID') or its name, when no
other file of the package has the same one. A file released already is answered as it
is. Any other file (pending, clean, infected, not scanned) is refused (exit 1).`,
		Args: args(2, 2),
		RunE: run(func(cmd *cobra.Command, argv []string) error {
			id, err := packageID(argv[0])
			if err != nil {
				return err
			}
			if argv[1] == "" {
				return usageErr("no file given: its id or its name (see 'shipfile show %s')", id)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			return a.release(cmd.Context(), c, id, argv[1])
		}),
	}
}

// release releases the file of package id named by file (its id or its name) and
// says what the server now holds.
func (a *app) release(ctx context.Context, c *api.Client, id uuid.UUID, file string) error {
	pr, err := c.API.GetPackageWithResponse(ctx, id)
	if err := api.Expect(pr, err, http.StatusOK); err != nil {
		return err
	}
	before, err := fileOf(pr.JSON200, file)
	if err != nil {
		return err
	}
	r, err := c.API.ReleasePackageFileWithResponse(ctx, id, before.Id)
	if err := api.Expect(r, err, http.StatusOK); err != nil {
		return fmt.Errorf("%s: %w", before.Filename, err)
	}
	f := r.JSON200
	return a.output(f, func(w io.Writer) {
		name := printable.String(f.Filename)
		if before.ScanReleasedAt != nil {
			fmt.Fprintf(w, "%s (file %s) was released already, %s UTC (scan: %s)\n", name, f.Id, day(f.ScanReleasedAt), scanColumn(string(f.Scan), f.ScanSignature, false))
			return
		}
		fmt.Fprintf(w, "Released %s (file %s, scan: %s): it is served unchecked\n", name, f.Id, scanColumn(string(f.Scan), f.ScanSignature, false))
	})
}

// fileOf is the file of p named by file: the file whose id it is, else the only file
// with that name. A name that several files have, or that none has, is an error.
func fileOf(p *apiclient.PackageDetail, file string) (apiclient.File, error) {
	if fid, err := uuid.Parse(file); err == nil {
		for _, f := range p.Files {
			if f.Id == fid {
				return f, nil
			}
		}
	}
	var named []apiclient.File
	for _, f := range p.Files {
		if f.Filename == file {
			named = append(named, f)
		}
	}
	switch len(named) {
	case 1:
		return named[0], nil
	case 0:
		return apiclient.File{}, fmt.Errorf("package %s has no file %q (see 'shipfile show %s')", p.Id, file, p.Id)
	}
	ids := make([]string, len(named))
	for i, f := range named {
		ids[i] = f.Id.String()
	}
	return apiclient.File{}, fmt.Errorf("package %s has %d files named %q: give the file's id (%s)", p.Id, len(named), file, strings.Join(ids, ", "))
}
