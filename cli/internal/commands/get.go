package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/spf13/cobra"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/cli/internal/crypt"
	"github.com/shipfile/shipfile/cli/internal/progress"
	"github.com/shipfile/shipfile/cli/internal/transfer"
	"github.com/shipfile/shipfile/pkg/apiclient"
)

// gotFile is one file in `shipfile get --json`.
type gotFile struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	Path        string `json:"path"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	ResumedFrom int64  `json:"resumed_from"`
	Received    int64  `json:"received"`
	Skipped     bool   `json:"skipped"`
	// Ciphertext is what the server stores of an encrypted file.
	Ciphertext *cipherInfo `json:"ciphertext,omitempty"`
}

// getResult is `shipfile get --json`.
type getResult struct {
	Package *apiclient.LinkPackage `json:"package"`
	Dir     string                 `json:"dir"`
	Files   []gotFile              `json:"files"`
}

func (a *app) getCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "get LINK [-o DIR]",
		Short: "Download every file of a link (resumable, SHA-256 checked)",
		Long: `Download every file of a magic link into DIR (default: the current directory).
Each file is written to NAME.part first and renamed once its SHA-256 equals the
server's; run again after an interruption, it goes on from there with a Range request.
A file already there with the server's SHA-256 is skipped. A password-protected link
asks for its password on standard input (without echo on a terminal).

An end-to-end encrypted package is decrypted on this machine: with the key of the
link's #AGE-SECRET-KEY-1... (quote the link in the shell), or with the passphrase read
from standard input (after the link's password, when it has one). Its files are
fetched as NAME.part (the ciphertext, SHA-256 checked against the server's), then
decrypted to NAME; a file that fails age's authentication was altered, and nothing of
it is kept.`,
		Args: args(1, 1),
		RunE: run(func(cmd *cobra.Command, argv []string) error {
			l, err := transfer.ParseLink(argv[0])
			if err != nil {
				return usageErr("%v", err)
			}
			if l.Fragment != "" {
				if _, err := crypt.IdentityOf(l.Fragment); err != nil {
					return usageErr("%v", err)
				}
			}
			return a.get(cmd.Context(), l, dir)
		}),
	}
	cmd.Flags().StringVarP(&dir, "output", "o", ".", "the directory to write the files into (made when missing)")
	return cmd
}

func (a *app) get(ctx context.Context, l transfer.Link, dir string) error {
	// The link is the credential: no bearer token goes to the link's server.
	c, err := api.New(l.Base, "")
	if err != nil {
		return err
	}
	var grant string
	r, err := c.API.GetLinkWithResponse(ctx, l.Token, &apiclient.GetLinkParams{})
	if err == nil && r.StatusCode() == http.StatusUnauthorized {
		pw, perr := a.readSecret("Password for this link: ")
		if perr != nil {
			return perr
		}
		ur, err := c.API.UnlockLinkWithResponse(ctx, l.Token, apiclient.Unlock{Password: &pw})
		if err := api.Expect(ur, err, http.StatusOK); err != nil {
			return err
		}
		grant = ur.JSON200.Grant
		r, err = c.API.GetLinkWithResponse(ctx, l.Token, &apiclient.GetLinkParams{LinkGrantHeader: &grant})
		if err := api.Expect(r, err, http.StatusOK); err != nil {
			return err
		}
	} else if err := api.Expect(r, err, http.StatusOK); err != nil {
		return err
	}
	pkg := r.JSON200
	var kind struct {
		Encryption string `json:"encryption"`
	}
	_ = json.Unmarshal(r.Body, &kind)
	encrypted := kind.Encryption == "age"
	if !encrypted && l.Fragment != "" {
		a.note("This link's package is not end-to-end encrypted: the #... of the link is not needed")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	d := &transfer.Downloader{Client: c, Progress: a.progress(), Retry: transfer.DefaultRetry, Grant: grant}
	var dec *decryptor
	if encrypted {
		dec = &decryptor{a: a, c: c, token: l.Token, grant: grant, fragment: l.Fragment, used: map[string]bool{}}
		if err := dec.loadManifest(ctx); err != nil {
			return err
		}
	}
	out := getResult{Package: pkg, Dir: dir, Files: []gotFile{}}
	var total int64
	for _, f := range pkg.Files {
		if f.UploadedBy == apiclient.LinkFileUploadedByRecipient {
			continue // a request's uploads are the owner's to fetch, never the link's
		}
		if dec != nil {
			g, err := dec.download(ctx, d, f, dir)
			if err != nil {
				return err
			}
			total += g.Size
			out.Files = append(out.Files, g)
			continue
		}
		res, err := d.Download(ctx, l.Token, f, dir)
		if err != nil {
			return stopped(f.Filename, err)
		}
		total += f.Size
		out.Files = append(out.Files, gotFile{ID: f.Id.String(), Filename: f.Filename, Path: res.Path, Size: f.Size,
			SHA256: res.SHA256, ResumedFrom: res.ResumedFrom, Received: res.Received, Skipped: res.Skipped})
	}
	if dec != nil {
		a.note("Got and decrypted %d file(s), %s, of %q into %s (end-to-end encrypted; SHA-256 and age's authentication checked)", len(out.Files), progress.Bytes(total), pkg.Title, dir)
	} else {
		a.note("Got %d file(s), %s, of %q into %s (SHA-256 checked)", len(out.Files), progress.Bytes(total), pkg.Title, dir)
	}
	return a.output(out, func(w io.Writer) {
		for _, f := range out.Files {
			fmt.Fprintln(w, f.Path)
		}
	})
}
