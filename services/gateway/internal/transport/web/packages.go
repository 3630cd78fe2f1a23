package web

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
	"github.com/shipfile/shipfile/services/gateway/internal/app/webhookadmin"
)

// dashboardPageSize is how many packages one dashboard page lists.
const dashboardPageSize = 25

type dashboardData struct {
	Packages []app.Package
	Owners   map[int64]app.User
	Users    []app.User // admins filter by owner
	State    string
	Dir      string
	Owner    string
	Next     string // query string of the next page, "" on the last
	// Usage is the user's storage and quota (nil: no policies).
	Usage *usageBar
}

// dashboard lists the user's packages (an admin's: everyone's, or one owner's).
func (w *Web) dashboard(c *gin.Context) {
	u, _ := currentUser(c)
	ctx := c.Request.Context()
	d := dashboardData{State: c.Query("state"), Dir: c.Query("direction"), Owner: c.DefaultQuery("owner", "all")}
	f := app.PackageFilter{Limit: dashboardPageSize + 1}
	switch st := app.State(d.State); st {
	case app.StateDraft, app.StateActive, app.StateRevoked, app.StateExpired:
		f.State = &st
	default:
		d.State = ""
	}
	switch dir := app.Direction(d.Dir); dir {
	case app.Outbound, app.Inbound:
		f.Direction = &dir
	default:
		d.Dir = ""
	}
	if u.IsAdmin() {
		switch d.Owner {
		case "all":
		case "me":
			f.OwnerUserID = &u.ID
		default:
			id, err := strconv.ParseInt(d.Owner, 10, 64)
			if err != nil {
				d.Owner = "all"
				break
			}
			f.OwnerUserID = &id
		}
	}
	if cur := c.Query("cursor"); cur != "" {
		f.After = decodeCursor(cur)
	}
	pkgs, err := w.packages.List(ctx, u, f)
	if err != nil {
		_ = c.Error(err)
		return
	}
	if len(pkgs) > dashboardPageSize {
		pkgs = pkgs[:dashboardPageSize]
		last := pkgs[len(pkgs)-1]
		q := c.Request.URL.Query()
		q.Set("cursor", encodeCursor(last))
		d.Next = q.Encode()
	}
	d.Packages = pkgs
	if u.IsAdmin() {
		if d.Users, err = w.identity.ListUsers(ctx); err != nil {
			_ = c.Error(err)
			return
		}
		d.Owners = map[int64]app.User{}
		for _, o := range d.Users {
			d.Owners[o.ID] = o
		}
	}
	if d.Usage, err = w.usageOf(ctx, u); err != nil {
		_ = c.Error(err)
		return
	}
	w.render(c, http.StatusOK, "dashboard", view{Title: "Packages", Section: "packages", D: d})
}

func encodeCursor(p app.Package) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%s", p.CreatedAt.UnixMicro(), p.ID))
}

// decodeCursor reads a dashboard cursor; a bad one starts from the newest.
func decodeCursor(s string) *app.PackageCursor {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	micros, id, ok := strings.Cut(string(b), ".")
	us, err1 := strconv.ParseInt(micros, 10, 64)
	uid, err2 := uuid.Parse(id)
	if !ok || err1 != nil || err2 != nil {
		return nil
	}
	return &app.PackageCursor{CreatedAt: time.UnixMicro(us).UTC(), ID: uid}
}

// packageFields are the form fields of a new package, named as in the API.
var packageFields = []string{"recipient_email", "recipient_name", "title", "note", "ttl_days", "password", "max_downloads"}

type packageFormData struct {
	Direction app.Direction
	MinTTL    int
	MaxTTL    int
	// HasKey: the user has an encryption key, so a file request may be encrypted end
	// to end (docs/ENCRYPTION.md).
	HasKey bool
	// Policy is what the user's policy asks of a package (nil: no policies); MaxTTL
	// is then the policy's when lower.
	Policy *policyHints
}

func (w *Web) sendForm(c *gin.Context) {
	d := packageFormData{Direction: app.Outbound, MinTTL: app.MinTTLDays, MaxTTL: app.MaxTTLDays}
	u, _ := currentUser(c)
	if err := w.formPolicy(c.Request.Context(), u, &d); err != nil {
		_ = c.Error(err)
		return
	}
	w.render(c, http.StatusOK, "package_new", view{
		Title: "Send files", Section: "send", Form: map[string]string{"ttl_days": strconv.Itoa(min(app.DefaultTTLDays, d.MaxTTL)), "notify_owner": "1"},
		D: d,
	})
}

func (w *Web) requestForm(c *gin.Context) {
	hasKey, err := w.hasKey(c)
	if err != nil {
		_ = c.Error(err)
		return
	}
	d := packageFormData{Direction: app.Inbound, MinTTL: app.MinTTLDays, MaxTTL: app.MaxTTLDays, HasKey: hasKey}
	u, _ := currentUser(c)
	if err := w.formPolicy(c.Request.Context(), u, &d); err != nil {
		_ = c.Error(err)
		return
	}
	w.render(c, http.StatusOK, "package_new", view{
		Title: "Request files", Section: "request", Form: map[string]string{"ttl_days": strconv.Itoa(min(app.DefaultTTLDays, d.MaxTTL)), "notify_owner": "1"},
		D: d,
	})
}

// hasKey reports whether the signed-in user has an encryption key (PUT /api/v1/me/key).
func (w *Web) hasKey(c *gin.Context) (bool, error) {
	u, _ := currentUser(c)
	_, err := w.packages.Key(c.Request.Context(), u)
	if app.KindOf(err) == app.KindNotFound {
		return false, nil
	}
	return err == nil, err
}

// createFromForm validates the form and creates the package. On bad input it
// re-renders the form with the errors and returns false; nothing is created.
func (w *Web) createFromForm(c *gin.Context, dir app.Direction) (app.Package, bool) {
	u, _ := currentUser(c)
	form := map[string]string{}
	for _, f := range packageFields {
		form[f] = strings.TrimSpace(c.PostForm(f))
	}
	form["note"] = strings.ReplaceAll(c.PostForm("note"), "\r\n", "\n")
	form["password"] = c.PostForm("password") // kept as typed: spaces count
	form["notify_owner"] = c.PostForm("notify_owner")
	form["more_recipients"] = c.PostForm("more_recipients")
	form["encryption"] = c.PostForm("encryption")
	// The recipients' language: the form's choice, which starts as the sender's.
	form["recipient_language"] = c.PostForm("recipient_language")
	if form["recipient_language"] == "" {
		form["recipient_language"] = w.language(c)
	}
	title := map[app.Direction]string{app.Outbound: "Send files", app.Inbound: "Request files"}[dir]
	d := packageFormData{Direction: dir, MinTTL: app.MinTTLDays, MaxTTL: app.MaxTTLDays}
	cu, _ := currentUser(c)
	if err := w.formPolicy(c.Request.Context(), cu, &d); err != nil {
		_ = c.Error(err)
		return app.Package{}, false
	}
	if dir == app.Inbound {
		hasKey, err := w.hasKey(c)
		if err != nil {
			_ = c.Error(err)
			return app.Package{}, false
		}
		d.HasKey = hasKey
	}
	v := view{Title: title, Section: map[app.Direction]string{app.Outbound: "send", app.Inbound: "request"}[dir], Form: form, D: d}
	in := packages.NewPackage{
		Title: ptr(form["title"]), RecipientEmail: ptr(form["recipient_email"]), RecipientName: ptr(form["recipient_name"]),
		Note: ptr(form["note"]), Direction: ptr(string(dir)), RecipientLanguage: ptr(form["recipient_language"]),
	}
	if more := moreRecipients(form["more_recipients"]); len(more) > 0 {
		list := append([]app.RecipientInput{{Email: ptr(form["recipient_email"]), Name: ptr(form["recipient_name"])}}, more...)
		for i := range list {
			list[i].Language = in.RecipientLanguage
		}
		in.Recipients, in.RecipientEmail, in.RecipientName = &list, nil, nil
	}
	// Every field's error is shown at once, each beside its field.
	errs := map[string]string{}
	if form["ttl_days"] != "" {
		n, err := strconv.Atoi(form["ttl_days"])
		if err != nil {
			errs["ttl_days"] = fmt.Sprintf("Must be a whole number of days from %d to %d.", app.MinTTLDays, app.MaxTTLDays)
		} else {
			in.TTLDays = &n
		}
	}
	if form["password"] != "" {
		in.Password = ptr(form["password"])
	}
	if form["max_downloads"] != "" {
		n, err := strconv.Atoi(form["max_downloads"])
		if err != nil {
			errs["max_downloads"] = fmt.Sprintf("Must be a whole number from %d to %d, or empty for no limit.", packages.MinMaxDownloads, packages.MaxMaxDownloads)
		} else {
			in.MaxDownloads = &n
		}
	}
	in.NotifyOwner = ptr(form["notify_owner"] == "1")
	// End-to-end encryption (the send form's box, the request form's option): the keys
	// stay in the browser.
	if form["encryption"] != "" {
		in.Encryption = ptr(form["encryption"])
	}
	for _, err := range packages.CheckNew(in) {
		field, msg, ok := recipientError(err)
		if !ok {
			var fe map[string]string
			if fe, msg, ok = formErrors(err, append(packageFields, "encryption")...); ok {
				for f, m := range fe {
					field, msg = f, m
				}
			}
		}
		if _, seen := errs[field]; ok && field != "" && !seen {
			errs[field] = msg
		} else if ok && field == "" && v.Error == "" {
			v.Error = msg
		}
	}
	if len(errs) > 0 || v.Error != "" {
		v.Errors = errs
		w.render(c, http.StatusUnprocessableEntity, "package_new", v)
		return app.Package{}, false
	}
	p, err := w.packages.Create(c.Request.Context(), u, client(c), in)
	if field, msg, ok := recipientError(err); ok {
		v.Errors = map[string]string{field: msg}
		w.render(c, http.StatusUnprocessableEntity, "package_new", v)
		return app.Package{}, false
	}
	if fe, msg, ok := formErrors(err, append(packageFields, "encryption")...); ok {
		v.Errors, v.Error = fe, msg
		w.render(c, http.StatusUnprocessableEntity, "package_new", v)
		return app.Package{}, false
	}
	if err != nil {
		_ = c.Error(err)
		return app.Package{}, false
	}
	return p, true
}

// recipientListError matches the app's errors of one entry of a recipient list.
var recipientListError = regexp.MustCompile(`^recipients\[(\d+)\]\.(email|name) (.*)$`)

// recipientError places an error of the recipient list beside its form field: the
// first entry is the recipient_email and recipient_name fields, the others are
// more_recipients.
func recipientError(err error) (field, msg string, ok bool) {
	var ae *app.Error
	if !errors.As(err, &ae) || ae.Kind != app.KindInvalid {
		return "", "", false
	}
	m := recipientListError.FindStringSubmatch(ae.Detail)
	if m == nil {
		if strings.HasPrefix(ae.Detail, "recipients ") {
			return "more_recipients", capitalize(ae.Detail), true
		}
		return "", "", false
	}
	if m[1] == "0" {
		return "recipient_" + m[2], capitalize(m[3]), true
	}
	return "more_recipients", capitalize(m[3]), true
}

// moreRecipients reads the send and request forms' further addresses: one per line
// (or separated by commas or semicolons), each with no name.
func moreRecipients(s string) []app.RecipientInput {
	var out []app.RecipientInput
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' || r == ',' || r == ';' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, app.RecipientInput{Email: ptr(f)})
		}
	}
	return out
}

// sendSubmit creates an outbound draft; its page takes the files, then finalizes.
func (w *Web) sendSubmit(c *gin.Context) {
	p, ok := w.createFromForm(c, app.Outbound)
	if !ok {
		return
	}
	c.Redirect(http.StatusSeeOther, "/packages/"+p.ID.String())
}

// requestSubmit creates an inbound package and finalizes it at once, which sends the
// recipient the invitation to upload.
func (w *Web) requestSubmit(c *gin.Context) {
	p, ok := w.createFromForm(c, app.Inbound)
	if !ok {
		return
	}
	u, _ := currentUser(c)
	p, links, err := w.packages.Finalize(c.Request.Context(), u, client(c), p.ID)
	if err != nil {
		_ = c.Error(err)
		return
	}
	w.render(c, http.StatusCreated, "sent", view{Title: "Request sent", Section: "request", D: newSentData(p, links)})
}

// sentData is the page that shows a finalized package's links, this once: Link is
// the first recipient's, Links every recipient's.
type sentData struct {
	Package app.Package
	Link    string
	Links   []app.LinkMint
	Added   bool // a recipient added to an active package: Links is theirs
}

func newSentData(p app.Package, links []app.LinkMint) sentData {
	d := sentData{Package: p, Links: links}
	if len(links) > 0 {
		d.Link = links[0].MagicLink
	}
	return d
}

type packageData struct {
	Package     app.Package
	Files       []packageFile
	Owner       app.User
	Audit       []app.AuditEntry
	Users       map[int64]app.User
	MaxFileSize int64
	UploadURL   string
	TusURL      string // the tus creation URL of the same package
	Editable    bool   // draft or active: the edit form is shown
}

// RecipientEmail is the address of the package's recipient id, "" when unknown.
func (d packageData) RecipientEmail(id *uuid.UUID) string {
	if id == nil {
		return ""
	}
	r, _ := d.Package.Recipient(*id)
	return r.Email
}

// packageAuditEntries is how many audit entries the package page shows.
const packageAuditEntries = 50

func (w *Web) packageID(c *gin.Context) (uuid.UUID, bool) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		_ = c.Error(app.NotFound("package"))
		return uuid.UUID{}, false
	}
	return id, true
}

// packagePage shows a package: its files, its link's use, its audit trail; a draft
// also takes files and can be finalized.
func (w *Web) packagePage(c *gin.Context) {
	id, ok := w.packageID(c)
	if !ok {
		return
	}
	w.showPackage(c, id, http.StatusOK, "")
}

func (w *Web) showPackage(c *gin.Context, id uuid.UUID, status int, errMsg string) {
	w.showPackageForm(c, id, status, errMsg, nil, nil)
}

// showPackageForm shows the package page with the edit form's errors and values (nil:
// the package's own).
func (w *Web) showPackageForm(c *gin.Context, id uuid.UUID, status int, errMsg string, fieldErrs, form map[string]string) {
	u, _ := currentUser(c)
	ctx := c.Request.Context()
	p, files, err := w.packages.Get(ctx, u, id)
	if err != nil {
		_ = c.Error(err)
		return
	}
	// Seeing the package entitles one to its audit trail.
	audit, err := w.packages.Audit(ctx, app.AuditFilter{PackageID: &id, Limit: packageAuditEntries})
	if err != nil {
		_ = c.Error(err)
		return
	}
	users, err := w.identity.ListUsers(ctx)
	if err != nil {
		_ = c.Error(err)
		return
	}
	d := packageData{Package: p, Files: make([]packageFile, len(files)), Audit: audit, Users: map[int64]app.User{}, MaxFileSize: w.cfg.MaxFileSize,
		UploadURL: "/api/v1/packages/" + p.ID.String() + "/files", TusURL: "/api/v1/packages/" + p.ID.String() + "/uploads"}
	for i, f := range files {
		d.Files[i] = packageFile{File: f, fileScan: w.ownerScan(f)}
		if f.Manifest != nil {
			d.Files[i].ManifestB64 = base64.StdEncoding.EncodeToString(f.Manifest)
		}
		if left := f.DownloadsLeft(p.MaxDownloads); left != nil && *left == 0 {
			d.Files[i].LimitReached = true
		}
	}
	for _, o := range users {
		d.Users[o.ID] = o
	}
	d.Owner = d.Users[p.OwnerUserID]
	d.Editable = p.State == app.StateDraft || p.State == app.StateActive
	if form == nil {
		form = map[string]string{"expires_at": p.ExpiresAt.UTC().Format(datetimeLocal)}
		for _, f := range packages.EditTexts {
			form[f.Name] = f.Text(p)
		}
		if p.MaxDownloads != nil {
			form["max_downloads"] = strconv.Itoa(*p.MaxDownloads)
		}
		if p.NotifyOwner {
			form["notify_owner"] = "1"
		}
	}
	w.render(c, status, "package", view{Title: p.Title, Section: "packages", Error: errMsg, Errors: fieldErrs, Form: form, D: d})
}

// packageFile is a file on the package page.
type packageFile struct {
	app.File
	LimitReached bool // the link's download limit is reached for it
	// ManifestB64 is the file's encrypted manifest entry (standard base64), which the
	// owner's browser decrypts to the file's name, type and size; "" for none.
	ManifestB64 string
	fileScan
}

// datetimeLocal is the value format of an <input type="datetime-local"> (read as UTC).
const datetimeLocal = "2006-01-02T15:04"

// editFields are the edit form's fields, named as in the API: the package's texts
// (packages.EditTexts), then those read here.
var editFields = append(textNames(packages.EditTexts), "expires_at", "password", "max_downloads")

func textNames(fields []packages.TextField) []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return names
}

// editPackage takes the package page's edit form (PATCH in the API).
func (w *Web) editPackage(c *gin.Context) {
	id, ok := w.packageID(c)
	if !ok {
		return
	}
	u, _ := currentUser(c)
	form := map[string]string{}
	for _, f := range editFields {
		form[f] = strings.TrimSpace(c.PostForm(f))
	}
	form["note"] = strings.ReplaceAll(c.PostForm("note"), "\r\n", "\n")
	form["password"] = c.PostForm("password")
	form["notify_owner"] = c.PostForm("notify_owner")
	fail := func(field, msg string) {
		w.showPackageForm(c, id, http.StatusUnprocessableEntity, "", map[string]string{field: msg}, form)
	}
	in := packages.PackagePatch{NotifyOwner: ptr(form["notify_owner"] == "1")}
	for _, f := range packages.EditTexts {
		f.Set(&in, form[f.Name])
	}
	if form["expires_at"] != "" {
		t, err := time.Parse(datetimeLocal, form["expires_at"])
		if err != nil {
			if t, err = time.Parse(time.RFC3339, form["expires_at"]); err != nil {
				fail("expires_at", "Must be a date and time (UTC).")
				return
			}
		}
		in.ExpiresAt = &t
	}
	if form["max_downloads"] == "" {
		in.MaxDownloads = app.Nullable[int]{Set: true}
	} else {
		n, err := strconv.Atoi(form["max_downloads"])
		if err != nil {
			fail("max_downloads", fmt.Sprintf("Must be a whole number from %d to %d, or empty for no limit.", packages.MinMaxDownloads, packages.MaxMaxDownloads))
			return
		}
		in.MaxDownloads = app.Nullable[int]{Set: true, Value: &n}
	}
	switch {
	case c.PostForm("remove_password") == "1":
		in.Password = app.Nullable[string]{Set: true}
	case form["password"] != "":
		in.Password = app.Nullable[string]{Set: true, Value: ptr(form["password"])}
	}
	_, err := w.packages.Update(c.Request.Context(), u, client(c), id, in)
	if fe, msg, ok := formErrors(err, editFields...); ok {
		status := http.StatusUnprocessableEntity
		if app.KindOf(err) == app.KindConflict {
			status = http.StatusConflict
		}
		w.showPackageForm(c, id, status, msg, fe, form)
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/packages/"+id.String()+"?msg=saved")
}

// finalize seals a draft and shows its magic link, this once.
func (w *Web) finalize(c *gin.Context) {
	id, ok := w.packageID(c)
	if !ok {
		return
	}
	u, _ := currentUser(c)
	p, links, err := w.packages.Finalize(c.Request.Context(), u, client(c), id)
	if app.KindOf(err) == app.KindConflict {
		w.showPackage(c, id, http.StatusConflict, capitalize(err.Error()))
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	w.render(c, http.StatusOK, "sent", view{Title: "Package sent", Section: "packages", D: newSentData(p, links)})
}

type confirmData struct {
	Package app.Package
	Hook    webhookadmin.Webhook
	Action  string // "revoke", "delete" or "delete-webhook"
}

func (w *Web) confirm(c *gin.Context, action string) {
	id, ok := w.packageID(c)
	if !ok {
		return
	}
	u, _ := currentUser(c)
	p, _, err := w.packages.Get(c.Request.Context(), u, id)
	if err != nil {
		_ = c.Error(err)
		return
	}
	title := map[string]string{"revoke": "Revoke the link", "delete": "Delete the package"}[action]
	w.render(c, http.StatusOK, "confirm", view{Title: title, Section: "packages", D: confirmData{Package: p, Action: action}})
}

func (w *Web) confirmRevoke(c *gin.Context) { w.confirm(c, "revoke") }
func (w *Web) confirmDelete(c *gin.Context) { w.confirm(c, "delete") }

func (w *Web) revoke(c *gin.Context) {
	id, ok := w.packageID(c)
	if !ok {
		return
	}
	u, _ := currentUser(c)
	_, err := w.packages.Revoke(c.Request.Context(), u, client(c), id)
	if app.KindOf(err) == app.KindConflict {
		w.showPackage(c, id, http.StatusConflict, capitalize(err.Error()))
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/packages/"+id.String()+"?msg=revoked")
}

// addRecipient adds a recipient to an active package and shows their link, this once.
func (w *Web) addRecipient(c *gin.Context) {
	id, ok := w.packageID(c)
	if !ok {
		return
	}
	u, _ := currentUser(c)
	email, name := strings.TrimSpace(c.PostForm("email")), strings.TrimSpace(c.PostForm("name"))
	lang := w.language(c)
	p, r, link, err := w.packages.AddRecipient(c.Request.Context(), u, client(c), id, app.NewRecipient{Email: &email, Name: &name, Language: &lang})
	if k := app.KindOf(err); k == app.KindConflict || k == app.KindInvalid {
		w.showPackageForm(c, id, http.StatusUnprocessableEntity, "", map[string]string{"add_recipient": capitalize(strings.TrimPrefix(err.Error(), "recipients[0]."))},
			map[string]string{"add_email": email, "add_name": name})
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	d := newSentData(p, []app.LinkMint{{RecipientID: r.ID, Email: r.Email, MagicLink: link}})
	d.Added = true
	w.render(c, http.StatusCreated, "sent", view{Title: "Recipient added", Section: "packages", D: d})
}

// revokeRecipient ends one recipient's link.
func (w *Web) revokeRecipient(c *gin.Context) {
	w.packageItemAction(c, "recipient_id", "recipient", "recipient-revoked", func(u app.User, id, rid uuid.UUID) error {
		_, err := w.packages.RevokeRecipient(c.Request.Context(), u, client(c), id, rid)
		return err
	})
}

// packageItemAction runs do on the package of the URL and the item named by param (a
// recipient, a file): an id that is not a UUID is a 404 naming what, a conflict shows the
// package page with the reason, and success goes back to the package page with msg.
func (w *Web) packageItemAction(c *gin.Context, param, what, msg string, do func(u app.User, id, item uuid.UUID) error) {
	id, ok := w.packageID(c)
	if !ok {
		return
	}
	item, err := uuid.Parse(c.Param(param))
	if err != nil {
		_ = c.Error(app.NotFound(what))
		return
	}
	u, _ := currentUser(c)
	err = do(u, id, item)
	if app.KindOf(err) == app.KindConflict {
		w.showPackage(c, id, http.StatusConflict, capitalize(err.Error()))
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/packages/"+id.String()+"?msg="+msg)
}

func (w *Web) deletePackage(c *gin.Context) {
	id, ok := w.packageID(c)
	if !ok {
		return
	}
	u, _ := currentUser(c)
	if err := w.packages.Delete(c.Request.Context(), u, client(c), id); err != nil {
		_ = c.Error(err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/?msg=deleted")
}

func (w *Web) removeFile(c *gin.Context) {
	w.packageItemAction(c, "file_id", "file", "file-removed", func(u app.User, id, fileID uuid.UUID) error {
		return w.packages.RemoveFile(c.Request.Context(), u, client(c), id, fileID)
	})
}

func ptr[T any](v T) *T { return &v }
