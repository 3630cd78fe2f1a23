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

	"filippo.io/age"
	"github.com/google/uuid"
	openapi_types "github.com/oapi-codegen/runtime/types"
	"github.com/spf13/cobra"

	"github.com/shipfile/shipfile/cli/internal/api"
	"github.com/shipfile/shipfile/cli/internal/config"
	"github.com/shipfile/shipfile/cli/internal/crypt"
	"github.com/shipfile/shipfile/cli/internal/progress"
	"github.com/shipfile/shipfile/cli/internal/transfer"
	"github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/pkg/qrcode"
)

// link is one recipient's link in the outputs of send and request.
type link struct {
	Email     string `json:"email"`
	MagicLink string `json:"magic_link"`
	// FullLink is magic_link#key, the link to pass on, for a package encrypted with a key.
	FullLink string `json:"full_link,omitempty"`
}

// cipherInfo is what the server stores of an encrypted file: its neutral name and the
// ciphertext's size and SHA-256.
type cipherInfo struct {
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
}

// encryptionInfo says how a sent package is encrypted.
type encryptionInfo struct {
	// Mode is "key" (the key travels in the link's fragment) or "passphrase".
	Mode string `json:"mode"`
	// Key is the package's age identity (AGE-SECRET-KEY-1…) in mode "key".
	Key string `json:"key,omitempty"`
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
	// Ciphertext is what the server stores of an encrypted file (--encrypt).
	Ciphertext *cipherInfo `json:"ciphertext,omitempty"`
}

// sendResult is `shipfile send --json` and `shipfile request --json`.
type sendResult struct {
	Package *apiclient.FinalizedPackage `json:"package"`
	Links   []link                      `json:"links"`
	Files   []sentFile                  `json:"files,omitempty"`
	// Encryption is set for an end-to-end encrypted package.
	Encryption *encryptionInfo `json:"encryption,omitempty"`
}

// encryptFlags are send's end-to-end encryption flags.
type encryptFlags struct {
	on, passphrase bool
}

// packageFlags are the fields send and request share.
type packageFlags struct {
	title, note    string
	days, maxDown  int
	passwordFromIn bool
	qr             bool // print each link's QR code on standard error
}

func (a *app) sendCmd() *cobra.Command {
	var (
		to  []string
		pf  packageFlags
		enc encryptFlags
	)
	cmd := &cobra.Command{
		Use:   "send FILE... --to EMAIL [--to EMAIL...] [--title T] [--note N] [--days D] [--password-stdin] [--max-downloads N] [--encrypt] [--passphrase-stdin]",
		Short: "Send files: create a package, upload them (resumable), finalize, print the link",
		Long: `Create a package for the recipient, upload the files through tus, check each
file's SHA-256 against the server's, finalize the package (the server e-mails the
link) and print the link on standard output.

Interrupted (a network drop, Ctrl-C, a killed process), the same command run again
goes on where it stopped: the package and its upload URLs are kept in the user's
cache directory (shipfile/sends/), keyed by the server, the flags and each file's
path, size and modification time.

--encrypt encrypts every file on this machine before it leaves (age, end to end) to a
fresh key of the package: the link to pass on is the printed one, which ends with
#AGE-SECRET-KEY-1...; the e-mailed link lacks the key. --passphrase-stdin encrypts
with a passphrase read from standard input instead (after the link's password when
--password-stdin is given too): the e-mailed link works, with the passphrase.`,
		Args: args(1, -1),
		RunE: run(func(cmd *cobra.Command, files []string) error {
			enc.on = enc.on || enc.passphrase
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
			return a.send(cmd.Context(), files, to, pf, enc)
		}),
	}
	f := cmd.Flags()
	f.StringArrayVar(&to, "to", nil, "a recipient's e-mail address; repeat it for several (a link each, on a server with recipient lists)")
	a.packageFlags(cmd, &pf, "the package's title, which is never encrypted (default: the first file's name; with --encrypt or --passphrase-stdin, \"N end-to-end encrypted file(s)\")")
	f.IntVar(&pf.maxDown, "max-downloads", 0, "how many times each file may be downloaded through the link (1-10000; default no limit)")
	f.BoolVar(&enc.on, "encrypt", false, "encrypt end to end (age) to a fresh key that only the printed links carry (after #)")
	f.BoolVar(&enc.passphrase, "passphrase-stdin", false, "encrypt end to end with a passphrase read from standard input instead of a key")
	return cmd
}

func (a *app) packageFlags(cmd *cobra.Command, pf *packageFlags, titleHelp string) {
	f := cmd.Flags()
	f.StringVar(&pf.title, "title", "", titleHelp)
	f.StringVar(&pf.note, "note", "", "a note shown in the e-mail and on the link's page")
	f.IntVar(&pf.days, "days", 0, "days until the package expires (1-90; default the server's, 7)")
	f.BoolVar(&pf.passwordFromIn, "password-stdin", false, "protect the link with a password read from standard input")
	f.BoolVar(&pf.qr, "qr", false, "also print each link's QR code (half blocks) on standard error, for a phone to scan")
}

// printQR writes the QR code of each link on standard error, under the address it
// is for: the link itself stays alone on standard output, for scripts.
func (a *app) printQR(links []link) error {
	for _, l := range links {
		s := l.MagicLink
		if l.FullLink != "" {
			s = l.FullLink
		}
		code, err := qrcode.Terminal(s)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.io.Err, "QR code of the link for %s:\n%s\n", l.Email, code)
	}
	return nil
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

func (a *app) send(ctx context.Context, args []string, to []string, pf packageFlags, enc encryptFlags) error {
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
	if pf.title == "" && enc.on {
		// The title is not encrypted: a file's name must not become it.
		pf.title = fmt.Sprintf("%d end-to-end encrypted file(s)", len(files))
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
	var passphrase string
	if enc.passphrase {
		if passphrase, err = a.readPassphrase(); err != nil {
			return err
		}
	}

	keyFiles := make([][]any, len(files))
	for i, f := range files {
		keyFiles[i] = []any{f.abs, f.size, f.mtime}
	}
	keyParts := []any{c.Base, to, pf.title, pf.note, pf.days, pf.maxDown, pf.passwordFromIn, keyFiles}
	if enc.on {
		// Another kind of send: the state of a plain send is never taken up by an
		// encrypted one (nor with a key by one with a passphrase).
		keyParts = append(keyParts, "age", enc.passphrase)
	}
	statePath, err := config.SendStatePath(config.SendKey(keyParts...))
	if err != nil {
		return err
	}
	spoolDir := config.SpoolDir(statePath)
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
				_ = os.RemoveAll(spoolDir)
				return fmt.Errorf("package %s of an earlier run of this command is sent already (its link went out by e-mail; 'shipfile show %s')", id, id)
			case err != nil && api.StatusOf(err) == 0:
				return err
			}
		}
	}
	if pkgID != uuid.Nil && enc.on {
		// The earlier run's key (or passphrase) goes on: its ciphertext is on the server.
		switch {
		case !enc.passphrase && state.Identity == "":
			pkgID = uuid.Nil
		case enc.passphrase:
			id, err := crypt.PassphraseIdentity(passphrase)
			if err != nil {
				return err
			}
			if _, err := crypt.Decrypt(state.PassphraseCheck, id); err != nil {
				if crypt.IsWrongKey(err) {
					return usageErr("this passphrase is not the one the interrupted send of package %s began with: give that one (or remove %s to start over)", pkgID, statePath)
				}
				pkgID = uuid.Nil
			}
		}
	}
	if pkgID == uuid.Nil {
		if enc.on {
			age := apiclient.CreatePackageEncryptionAge
			body.Encryption = &age
		}
		id, err := createPackage(ctx, c, body, to)
		if err != nil {
			return err
		}
		pkgID = id
		state = config.SendState{PackageID: pkgID.String(), Files: map[string]json.RawMessage{}}
		_ = os.RemoveAll(spoolDir)
		if enc.on && !enc.passphrase {
			if state.Identity, err = crypt.NewIdentity(); err != nil {
				return err
			}
		}
		if enc.passphrase {
			r, err := crypt.Recipient("", passphrase)
			if err != nil {
				return err
			}
			if state.PassphraseCheck, err = crypt.Encrypt([]byte("shipfile"), r); err != nil {
				return err
			}
		}
		if err := save(); err != nil {
			return err
		}
	}
	var recipient age.Recipient
	if enc.on {
		if recipient, err = crypt.Recipient(state.Identity, passphrase); err != nil {
			return err
		}
	}

	up := &transfer.Uploader{Client: c, Progress: a.progress(), Retry: transfer.DefaultRetry}
	results := make([]sentFile, 0, len(files))
	var total int64
	for i, f := range files {
		var st sendFileState
		if raw, ok := state.Files[f.abs]; ok {
			_ = json.Unmarshal(raw, &st)
		}
		saveFile := func() error {
			b, _ := json.Marshal(st)
			state.Files[f.abs] = b
			return save()
		}
		sf := sentFile{Path: f.arg, Filename: filepath.Base(f.abs), Size: f.size}
		if !enc.on {
			res, err := up.Upload(ctx, pkgID, transfer.Source{Path: f.abs, Size: f.size}, &st.UploadState, saveFile)
			if err != nil {
				return stopped(f.arg, err)
			}
			sf.FileID, sf.SHA256, sf.ResumedFrom, sf.Sent = res.FileID.String(), res.SHA256, res.ResumedFrom, res.Sent
		} else if err := a.sendEncrypted(ctx, up, pkgID, f, i, spoolDir, recipient, &st, saveFile, &sf); err != nil {
			return err
		}
		total += f.size
		results = append(results, sf)
	}

	// Every file's SHA-256 against the server's records (of the ciphertext, when
	// encrypted).
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
		wantSHA, wantSize := res.SHA256, res.Size
		if res.Ciphertext != nil {
			wantSHA, wantSize = res.Ciphertext.SHA256, res.Ciphertext.Size
			results[i].Ciphertext.Filename = sf.Filename
		} else {
			results[i].Filename = sf.Filename
		}
		if sf.Sha256 != wantSHA || sf.Size != wantSize {
			// Bytes changed on the way: the server's copy is removed and forgotten, so
			// that the same command run again sends the file anew (instead of finding
			// the same wrong copy for ever).
			what := "the server's copy was removed; run the same command again to send it anew"
			dr, err := c.API.DeletePackageFileWithResponse(ctx, pkgID, sf.Id)
			if err := api.Expect(dr, err, http.StatusNoContent); err != nil {
				what = fmt.Sprintf("removing the server's copy failed (%v): remove it ('shipfile rm %s' drops the whole draft) and run the same command again", err, pkgID)
			} else {
				delete(state.Files, files[i].abs)
				if err := save(); err != nil {
					return err
				}
			}
			return fmt.Errorf("%s: the server's SHA-256 %s (%d bytes) differs from the local file's %s (%d bytes); package %s was left as a draft, %s",
				res.Path, sf.Sha256, sf.Size, wantSHA, wantSize, pkgID, what)
		}
	}

	var encInfo *encryptionInfo
	if enc.on {
		if err := putManifest(ctx, c, pkgID, files, results, recipient); err != nil {
			return err
		}
		encInfo = &encryptionInfo{Mode: "passphrase"}
		if !enc.passphrase {
			encInfo = &encryptionInfo{Mode: "key", Key: state.Identity}
		}
	}

	fr, err := c.API.FinalizePackageWithResponse(ctx, pkgID)
	if err := api.Expect(fr, err, http.StatusOK); err != nil {
		return err
	}
	_ = os.Remove(statePath)
	_ = os.RemoveAll(spoolDir)
	p := fr.JSON200
	out := sendResult{Package: p, Links: linksOf(p, fr.Body), Files: results, Encryption: encInfo}
	if encInfo != nil && encInfo.Key != "" {
		for i := range out.Links {
			out.Links[i].FullLink = out.Links[i].MagicLink + "#" + encInfo.Key
		}
	}
	a.note("Sent %d file(s), %s, to %s (SHA-256 checked); package %s expires %s", len(results), progress.Bytes(total), strings.Join(to, ", "), p.Id, day(&p.ExpiresAt))
	if !a.json {
		// Said even under --quiet: without it the recipients cannot open the files.
		switch {
		case encInfo != nil && encInfo.Key != "":
			fmt.Fprintln(a.io.Err, "End-to-end encrypted. The e-mailed link lacks the key: pass on the full link printed below (it ends with #AGE-SECRET-KEY-1...; the part after # never reaches the server).")
		case encInfo != nil:
			fmt.Fprintln(a.io.Err, "End-to-end encrypted with your passphrase. The e-mailed link works with it: pass the passphrase on separately.")
		}
	}
	if pf.qr {
		if err := a.printQR(out.Links); err != nil {
			return err
		}
	}
	return a.output(out, func(w io.Writer) {
		for _, l := range out.Links {
			if l.FullLink != "" {
				fmt.Fprintln(w, l.FullLink)
			} else {
				fmt.Fprintln(w, l.MagicLink)
			}
		}
	})
}

// sendFileState is what a later run needs to go on with one file of a send: its tus
// upload, and for an encrypted send its spool (the ciphertext being uploaded) and
// hashes.
type sendFileState struct {
	transfer.UploadState
	// Spool names the file's ciphertext in the spool directory, CipherSize its size.
	Spool      string `json:"spool,omitempty"`
	CipherSize int64  `json:"cipher_size,omitempty"`
	// CipherSHA256 is the uploaded ciphertext's SHA-256, once the upload is complete
	// (the spool is removed then).
	CipherSHA256 string `json:"cipher_sha256,omitempty"`
	// SHA256 is the plaintext's.
	SHA256 string `json:"sha256,omitempty"`
}

// sendEncrypted encrypts file f (the i-th) into the spool and uploads the ciphertext.
// Since age's ciphertext is random, the spool is kept until its upload is complete, so
// that a run again sends the rest of the same ciphertext from the server's offset.
func (a *app) sendEncrypted(ctx context.Context, up *transfer.Uploader, pkgID uuid.UUID, f localFile, i int, spoolDir string,
	recipient age.Recipient, st *sendFileState, saveFile func() error, sf *sentFile) error {
	if st.FileID != "" && st.CipherSHA256 != "" && st.SHA256 != "" {
		// Complete in an earlier run.
		sf.FileID, sf.SHA256, sf.ResumedFrom = st.FileID, st.SHA256, st.CipherSize
		sf.Ciphertext = &cipherInfo{Size: st.CipherSize, SHA256: st.CipherSHA256}
		return nil
	}
	name := fmt.Sprintf("%d.age", i+1)
	spool := filepath.Join(spoolDir, name)
	if fi, err := os.Stat(spool); st.Spool != name || st.SHA256 == "" || err != nil || fi.Size() != st.CipherSize {
		// No ciphertext of an earlier run: encrypt (an upload of another ciphertext
		// cannot go on with this one, so it starts over).
		bar := up.Progress.Start("encrypting "+filepath.Base(f.abs), f.size, 0)
		enc, err := crypt.EncryptFile(ctx, f.abs, spool, recipient, bar.Add)
		if err != nil {
			bar.Abort()
			if errors.Is(err, context.Canceled) {
				return stopped(f.arg, err)
			}
			return fmt.Errorf("%s: encrypting: %w", f.arg, err)
		}
		bar.Finish()
		if enc.Size != f.size {
			return fmt.Errorf("%s changed while it was encrypted", f.arg)
		}
		*st = sendFileState{Spool: name, CipherSize: enc.CipherSize, SHA256: enc.SHA256}
		if err := saveFile(); err != nil {
			return err
		}
	}
	res, err := up.Upload(ctx, pkgID, transfer.Source{Path: spool, Size: st.CipherSize, Name: filepath.Base(f.abs),
		RemoteName: fmt.Sprintf("file-%d.age", i+1)}, &st.UploadState, saveFile)
	if err != nil {
		return stopped(f.arg, err)
	}
	st.CipherSHA256 = res.SHA256
	if err := saveFile(); err != nil {
		return err
	}
	_ = os.Remove(spool)
	sf.FileID, sf.SHA256, sf.ResumedFrom, sf.Sent = res.FileID.String(), st.SHA256, res.ResumedFrom, res.Sent
	sf.Ciphertext = &cipherInfo{Size: st.CipherSize, SHA256: res.SHA256}
	return nil
}

// putManifest encrypts the package's manifest (each file's name, type and size by its
// id) to recipient and stores it with the draft.
func putManifest(ctx context.Context, c *api.Client, pkgID uuid.UUID, files []localFile, results []sentFile, recipient age.Recipient) error {
	m := crypt.Manifest{Version: 1, Files: map[string]crypt.ManifestFile{}}
	for i, f := range files {
		name := filepath.Base(f.abs)
		ct := transfer.ContentType(name)
		if ct == "" {
			ct = "application/octet-stream"
		}
		m.Files[results[i].FileID] = crypt.ManifestFile{Name: name, Type: ct, Size: f.size}
	}
	plain, _ := json.Marshal(m)
	b, err := crypt.Encrypt(plain, recipient)
	if err != nil {
		return err
	}
	if len(b) > crypt.MaxManifest {
		return fmt.Errorf("the encrypted list of names is %d bytes, over the server's %d: send fewer files in one package", len(b), crypt.MaxManifest)
	}
	r, err := c.API.PutPackageManifestWithBodyWithResponse(ctx, pkgID, "application/octet-stream", bytes.NewReader(b))
	return api.Expect(r, err, http.StatusNoContent)
}

func (a *app) requestCmd() *cobra.Command {
	var (
		from    string
		pf      packageFlags
		encrypt bool
	)
	cmd := &cobra.Command{
		Use:   "request --from EMAIL [--title T] [--note N] [--days D] [--password-stdin] [--encrypt]",
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
			if encrypt {
				// Uploads are encrypted to the owner's public key: there must be one.
				if _, err := a.getKey(ctx); err != nil {
					return err
				}
				age := apiclient.CreatePackageEncryptionAge
				body.Encryption = &age
			}
			id, err := createPackage(ctx, c, body, []string{from})
			if err != nil {
				return err
			}
			fr, err := c.API.FinalizePackageWithResponse(ctx, id)
			if err := api.Expect(fr, err, http.StatusOK); err != nil {
				return err
			}
			p := fr.JSON200
			out := sendResult{Package: p, Links: linksOf(p, fr.Body)}
			a.note("Upload link for %s (package %s, expires %s):", p.RecipientEmail, p.Id, day(&p.ExpiresAt))
			if pf.qr {
				if err := a.printQR(out.Links); err != nil {
					return err
				}
			}
			return a.output(out, func(w io.Writer) { fmt.Fprintln(w, p.MagicLink) })
		}),
	}
	cmd.Flags().StringVar(&from, "from", "", "who is asked for files (their e-mail address)")
	cmd.Flags().BoolVar(&encrypt, "encrypt", false, "the request page encrypts every upload end to end to your key ('shipfile key create')")
	a.packageFlags(cmd, &pf, `the request's title (default "Files for EMAIL")`)
	return cmd
}

// stopped says why the transfer of name stopped, and how to go on when it can.
func stopped(name string, err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted during %s; run the same command again to go on where it stopped", name)
	}
	var se *transfer.ScanError
	if errors.As(err, &se) {
		return fmt.Errorf("%s: %w", name, err)
	}
	if api.Retryable(err) && !transfer.IsLocal(err) {
		return fmt.Errorf("%s: %w; run the same command again to go on where it stopped", name, err)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// createPackage creates the package. With several recipients it sends the `recipients` list
// (docs/API.md, "Several recipients"; recipient_email naming its first entry); a server
// without recipient lists ignores that field and answers a package without `recipients`:
// that draft is deleted again and the send fails, rather than going to the first address
// alone. The same for a server that answers another `encryption` than the one asked for.
func createPackage(ctx context.Context, c *api.Client, body apiclient.CreatePackage, to []string) (uuid.UUID, error) {
	if len(to) == 1 {
		r, err := c.API.CreatePackageWithResponse(ctx, body)
		if err := api.Expect(r, err, http.StatusCreated); err != nil {
			return uuid.Nil, err
		}
		if body.Encryption != nil && string(r.JSON201.Encryption) != string(*body.Encryption) {
			return uuid.Nil, noEncryption(ctx, c, r.JSON201.Id)
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
	if body.Encryption != nil && string(r.JSON201.Encryption) != string(*body.Encryption) {
		return uuid.Nil, noEncryption(ctx, c, r.JSON201.Id)
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

// noEncryption deletes the draft id of a server that ignored `encryption` and says so.
func noEncryption(ctx context.Context, c *api.Client, id uuid.UUID) error {
	if dr, err := c.API.DeletePackageWithResponse(ctx, id); api.Expect(dr, err, http.StatusNoContent) != nil {
		return fmt.Errorf("this server does not encrypt end to end, and the draft %s could not be removed: send without --encrypt, or update the server", id)
	}
	return errors.New("this server does not encrypt end to end (its packages have no `encryption`): send without --encrypt, or update the server")
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
