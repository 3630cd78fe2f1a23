package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	openapi_types "github.com/oapi-codegen/runtime/types"
	"github.com/spf13/cobra"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/cli/internal/config"
	"github.com/shipfile/shipfile/cli/internal/progress"
	"github.com/shipfile/shipfile/cli/internal/transfer"
	"github.com/shipfile/shipfile/pkg/apiclient"
)

// link is one recipient's link in the outputs of send and request.
type link struct {
	Email     string `json:"email"`
	MagicLink string `json:"magic_link"`
}

// sentFile is one file in `shipfile send --json`.
type sentFile struct {
	Path        string `json:"path"`
	FileID      string `json:"file_id"`
	Filename    string `json:"filename"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	ResumedFrom int64  `json:"resumed_from"`
	Sent        int64  `json:"sent"`
}

// sendResult is `shipfile send --json` and `shipfile request --json`.
type sendResult struct {
	Package *apiclient.FinalizedPackage `json:"package"`
	Links   []link                      `json:"links"`
	Files   []sentFile                  `json:"files,omitempty"`
}

// packageFlags are the fields send and request share.
type packageFlags struct {
	title, note    string
	days, maxDown  int
	passwordFromIn bool
}

func (a *app) sendCmd() *cobra.Command {
	var (
		to      []string
		pf      packageFlags
		encrypt bool
	)
	cmd := &cobra.Command{
		Use:   "send FILE... --to EMAIL [--to EMAIL...] [--title T] [--note N] [--days D] [--password-stdin] [--max-downloads N]",
		Short: "Send files: create a package, upload them (resumable), finalize, print the link",
		Long: `Create a package for the recipient, upload the files through tus, check each
file's SHA-256 against the server's, finalize the package (the server e-mails the
link) and print the link on standard output.

Interrupted (a network drop, Ctrl-C, a killed process), the same command run again
goes on where it stopped: the package and its upload URLs are kept in the user's
cache directory (shipfile/sends/), keyed by the server, the flags and each file's
path, size and modification time.`,
		Args: args(1, -1),
		RunE: run(func(cmd *cobra.Command, files []string) error {
			if encrypt {
				return usageErr("--encrypt is not available yet: end-to-end encryption comes with a later version of the server and this command")
			}
			if len(to) == 0 {
				return usageErr("--to EMAIL is required")
			}
			seen := map[string]bool{}
			for _, e := range to {
				k := strings.ToLower(strings.TrimSpace(e))
				if seen[k] {
					return usageErr("--to %s is given twice", e)
				}
				seen[k] = true
			}
			return a.send(cmd.Context(), files, to, pf)
		}),
	}
	f := cmd.Flags()
	f.StringArrayVar(&to, "to", nil, "a recipient's e-mail address; repeat it for several (a link each, on a server with recipient lists)")
	a.packageFlags(cmd, &pf, "the package's title (default: the first file's name)")
	f.IntVar(&pf.maxDown, "max-downloads", 0, "how many times each file may be downloaded through the link (1-10000; default no limit)")
	f.BoolVar(&encrypt, "encrypt", false, "end-to-end encryption (not available yet)")
	return cmd
}

func (a *app) packageFlags(cmd *cobra.Command, pf *packageFlags, titleHelp string) {
	f := cmd.Flags()
	f.StringVar(&pf.title, "title", "", titleHelp)
	f.StringVar(&pf.note, "note", "", "a note shown in the e-mail and on the link's page")
	f.IntVar(&pf.days, "days", 0, "days until the package expires (1-90; default the server's, 7)")
	f.BoolVar(&pf.passwordFromIn, "password-stdin", false, "protect the link with a password read from standard input")
}

// createBody is the package to create.
func (a *app) createBody(pf packageFlags, to string, dir apiclient.CreatePackageDirection) (apiclient.CreatePackage, error) {
	email := openapi_types.Email(to)
	body := apiclient.CreatePackage{Title: pf.title, RecipientEmail: &email, Direction: &dir}
	if pf.note != "" {
		body.Note = &pf.note
	}
	if pf.days != 0 {
		if pf.days < 1 || pf.days > 90 {
			return body, usageErr("--days must be 1 to 90")
		}
		body.TtlDays = &pf.days
	}
	if pf.maxDown != 0 {
		if pf.maxDown < 1 || pf.maxDown > 10000 {
			return body, usageErr("--max-downloads must be 1 to 10000")
		}
		body.MaxDownloads = &pf.maxDown
	}
	if pf.passwordFromIn {
		pw, err := a.readSecret("Password for the link: ")
		if err != nil {
			return body, err
		}
		if len(pw) < 8 || len(pw) > 128 {
			return body, usageErr("the password must have 8 to 128 characters")
		}
		body.Password = &pw
	}
	return body, nil
}

// localFile is a file to send.
type localFile struct {
	arg, abs string
	size     int64
	mtime    int64
}

func (a *app) send(ctx context.Context, args []string, to []string, pf packageFlags) error {
	files := make([]localFile, 0, len(args))
	for _, p := range args {
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		files = append(files, localFile{arg: p, abs: abs, size: fi.Size(), mtime: fi.ModTime().UnixNano()})
	}
	if pf.title == "" {
		pf.title = filepath.Base(files[0].abs)
		if len(files) > 1 {
			pf.title += fmt.Sprintf(" and %d more", len(files)-1)
		}
		if r := []rune(pf.title); len(r) > 200 {
			pf.title = string(r[:200])
		}
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	body, err := a.createBody(pf, to[0], apiclient.CreatePackageDirectionOutbound)
	if err != nil {
		return err
	}

	keyFiles := make([][]any, len(files))
	for i, f := range files {
		keyFiles[i] = []any{f.abs, f.size, f.mtime}
	}
	statePath, err := config.SendStatePath(config.SendKey(c.Base, to, pf.title, pf.note, pf.days, pf.maxDown, pf.passwordFromIn, keyFiles))
	if err != nil {
		return err
	}
	state, err := config.LoadSend(statePath)
	if err != nil {
		return err
	}
	save := func() error { return config.SaveSend(statePath, state) }

	// An earlier run's package, if it is still a draft of ours.
	var pkgID uuid.UUID
	if state.PackageID != "" {
		if id, err := uuid.Parse(state.PackageID); err == nil {
			r, err := c.API.GetPackageWithResponse(ctx, id)
			switch err := api.Expect(r, err, http.StatusOK); {
			case err == nil && r.JSON200.State == apiclient.PackageDetailStateDraft:
				pkgID = id
				a.note("Going on with package %s of an earlier run", id)
			case err == nil && r.JSON200.State == apiclient.PackageDetailStateActive:
				// Finalized by an earlier run that stopped before it could say so.
				_ = os.Remove(statePath)
				return fmt.Errorf("package %s of an earlier run of this command is sent already (its link went out by e-mail; 'shipfile show %s')", id, id)
			case err != nil && api.StatusOf(err) == 0:
				return err
			}
		}
	}
	if pkgID == uuid.Nil {
		id, err := createPackage(ctx, c, body, to)
		if err != nil {
			return err
		}
		pkgID = id
		state = config.SendState{PackageID: pkgID.String(), Files: map[string]json.RawMessage{}}
		if err := save(); err != nil {
			return err
		}
	}

	up := &transfer.Uploader{Client: c, Progress: a.progress(), Retry: transfer.DefaultRetry}
	results := make([]sentFile, 0, len(files))
	var total int64
	for _, f := range files {
		var st transfer.UploadState
		if raw, ok := state.Files[f.abs]; ok {
			_ = json.Unmarshal(raw, &st)
		}
		saveFile := func() error {
			b, _ := json.Marshal(st)
			state.Files[f.abs] = b
			return save()
		}
		res, err := up.Upload(ctx, pkgID, f.abs, f.size, &st, saveFile)
		if err != nil {
			return stopped(f.arg, err)
		}
		total += f.size
		results = append(results, sentFile{Path: f.arg, FileID: res.FileID.String(), Filename: filepath.Base(f.abs),
			Size: f.size, SHA256: res.SHA256, ResumedFrom: res.ResumedFrom, Sent: res.Sent})
	}

	// Every file's SHA-256 against the server's records.
	r, err := c.API.GetPackageWithResponse(ctx, pkgID)
	if err := api.Expect(r, err, http.StatusOK); err != nil {
		return err
	}
	byID := map[string]apiclient.File{}
	for _, f := range r.JSON200.Files {
		byID[f.Id.String()] = f
	}
	for i, res := range results {
		sf, ok := byID[res.FileID]
		if !ok {
			delete(state.Files, files[i].abs)
			_ = save()
			return fmt.Errorf("%s: the server no longer has its file %s; run the same command again to send it anew", res.Path, res.FileID)
		}
		if sf.Sha256 != res.SHA256 || sf.Size != res.Size {
			return fmt.Errorf("%s: the server's SHA-256 %s (%d bytes) differs from the local file's %s (%d bytes); package %s was left as a draft",
				res.Path, sf.Sha256, sf.Size, res.SHA256, res.Size, pkgID)
		}
		results[i].Filename = sf.Filename
	}

	fr, err := c.API.FinalizePackageWithResponse(ctx, pkgID)
	if err := api.Expect(fr, err, http.StatusOK); err != nil {
		return err
	}
	_ = os.Remove(statePath)
	p := fr.JSON200
	out := sendResult{Package: p, Links: linksOf(p, fr.Body), Files: results}
	a.note("Sent %d file(s), %s, to %s (SHA-256 checked); package %s expires %s", len(results), progress.Bytes(total), strings.Join(to, ", "), p.Id, day(&p.ExpiresAt))
	return a.output(out, func(w io.Writer) {
		for _, l := range out.Links {
			fmt.Fprintln(w, l.MagicLink)
		}
	})
}

func (a *app) requestCmd() *cobra.Command {
	var (
		from string
		pf   packageFlags
	)
	cmd := &cobra.Command{
		Use:   "request --from EMAIL [--title T] [--note N] [--days D] [--password-stdin]",
		Short: "Ask someone for files: print an upload link (also e-mailed to them)",
		Args:  args(0, 0),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return usageErr("--from EMAIL is required")
			}
			if pf.title == "" {
				pf.title = "Files for " + strings.TrimSpace(from)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			body, err := a.createBody(pf, from, apiclient.CreatePackageDirectionInbound)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			r, err := c.API.CreatePackageWithResponse(ctx, body)
			if err := api.Expect(r, err, http.StatusCreated); err != nil {
				return err
			}
			fr, err := c.API.FinalizePackageWithResponse(ctx, r.JSON201.Id)
			if err := api.Expect(fr, err, http.StatusOK); err != nil {
				return err
			}
			p := fr.JSON200
			out := sendResult{Package: p, Links: linksOf(p, fr.Body)}
			a.note("Upload link for %s (package %s, expires %s):", p.RecipientEmail, p.Id, day(&p.ExpiresAt))
			return a.output(out, func(w io.Writer) { fmt.Fprintln(w, p.MagicLink) })
		}),
	}
	cmd.Flags().StringVar(&from, "from", "", "who is asked for files (their e-mail address)")
	a.packageFlags(cmd, &pf, `the request's title (default "Files for EMAIL")`)
	return cmd
}

// stopped says why the transfer of name stopped, and how to go on when it can.
func stopped(name string, err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted during %s; run the same command again to go on where it stopped", name)
	}
	if api.Retryable(err) && !transfer.IsLocal(err) {
		return fmt.Errorf("%s: %w; run the same command again to go on where it stopped", name, err)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// createPackage creates the package. With several recipients it sends the SPEC's
// `recipients` list (recipient_email naming its first entry); a server without recipient
// lists ignores that field and answers a package without `recipients`: that draft is
// deleted again and the send fails, rather than going to the first address alone.
func createPackage(ctx context.Context, c *api.Client, body apiclient.CreatePackage, to []string) (uuid.UUID, error) {
	if len(to) == 1 {
		r, err := c.API.CreatePackageWithResponse(ctx, body)
		if err := api.Expect(r, err, http.StatusCreated); err != nil {
			return uuid.Nil, err
		}
		return r.JSON201.Id, nil
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return uuid.Nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return uuid.Nil, err
	}
	list := make([]map[string]string, len(to))
	for i, e := range to {
		list[i] = map[string]string{"email": e}
	}
	doc["recipients"] = list
	raw, _ = json.Marshal(doc)
	r, err := c.API.CreatePackageWithBodyWithResponse(ctx, "application/json", bytes.NewReader(raw))
	if err := api.Expect(r, err, http.StatusCreated); err != nil {
		return uuid.Nil, err
	}
	var got struct {
		Recipients []json.RawMessage `json:"recipients"`
	}
	if json.Unmarshal(r.Body, &got) != nil || len(got.Recipients) != len(to) {
		if dr, err := c.API.DeletePackageWithResponse(ctx, r.JSON201.Id); api.Expect(dr, err, http.StatusNoContent) != nil {
			return uuid.Nil, fmt.Errorf("this server takes one recipient per package, and the draft %s could not be removed: give --to once", r.JSON201.Id)
		}
		return uuid.Nil, errors.New("this server takes one recipient per package (it has no recipient lists): give --to once, and run send once per recipient")
	}
	return r.JSON201.Id, nil
}

// linksOf are the recipients' links of a finalize answer: its `links` list where the
// server has several recipients, else the one magic_link.
func linksOf(p *apiclient.FinalizedPackage, body []byte) []link {
	var doc struct {
		Links []link `json:"links"`
	}
	if json.Unmarshal(body, &doc) == nil && len(doc.Links) > 0 {
		return doc.Links
	}
	return []link{{Email: string(p.RecipientEmail), MagicLink: p.MagicLink}}
}
