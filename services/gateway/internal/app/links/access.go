package links

import (
	"context"
	"errors"
	"slices"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// The recipient's side of a package: what a magic link opens.

// ErrLinkGone is the one answer for an unknown, revoked, expired or deleted link: it
// gives no hint which.
var ErrLinkGone = &app.Error{Kind: app.KindGone, Detail: "this link is no longer valid"}

// CheckLink answers ErrLinkGone (and audits the attempt) unless token is the link of
// an active package. The link routes call it before they look at anything else of
// the request, so a dead link is 410 whatever else is wrong (a password, if the link
// has one, is checked after); the package it found is put in the returned context,
// where the request's own resolve finds it again without a second query.
func (s *Links) CheckLink(ctx context.Context, token string, client app.Client) (context.Context, error) {
	p, err := s.liveLink(ctx, token, client)
	if err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, resolvedLinkKey{}, resolvedLink{token: token, pkg: p}), nil
}

type resolvedLinkKey struct{}

type resolvedLink struct {
	token string
	pkg   app.Package
}

// resolveLink finds the active package of a raw link token and checks the caller's
// grant when the link has a password (ErrLinkLocked without a valid one). Invalid
// attempts are audited.
func (s *Links) resolveLink(ctx context.Context, token string, client app.Client) (app.Package, error) {
	p, err := s.liveLink(ctx, token, client)
	if err != nil {
		return app.Package{}, err
	}
	if p.PasswordProtected() && !CheckGrant(p, client.Grant, s.now()) {
		return app.Package{}, ErrLinkLocked
	}
	return p, nil
}

// liveLink finds the active package of a raw link token: unknown, revoked, expired,
// deleted and used-up links are all ErrLinkGone, before any password is asked.
func (s *Links) liveLink(ctx context.Context, token string, client app.Client) (app.Package, error) {
	if r, ok := ctx.Value(resolvedLinkKey{}).(resolvedLink); ok && r.token == token {
		return r.pkg, nil
	}
	hash, ok := app.LinkHash(token)
	if ok {
		p, err := s.store.PackageByLink(ctx, hash)
		if err == nil && !p.UsedUp && p.Link != nil && p.Link.LinkState == app.LinkActive && p.Apply(app.OpUseLink, s.now()) == nil {
			return p, nil
		}
		if err != nil && !errors.Is(err, app.ErrNotFound) {
			return app.Package{}, err
		}
	}
	// One row per IP and hour, however many links a guesser tries; an IPv6 client by
	// its /64, as the link rate counts it (else each address of its /64 would write a
	// row of its own).
	invalid := app.LinkAudit(client, "link.invalid", nil, nil)
	invalid.Hourly = true
	invalid.IP = app.RateKey(client.IP)
	_ = s.store.WriteEffects(ctx, app.Effects{Audit: []app.AuditEntry{invalid}})
	return app.Package{}, ErrLinkGone
}

// ViewLink returns the package and files behind a link, recording the visit.
func (s *Links) ViewLink(ctx context.Context, token string, client app.Client) (app.Package, []app.File, error) {
	p, err := s.resolveLink(ctx, token, client)
	if err != nil {
		return app.Package{}, nil, err
	}
	files, err := s.files.ListFiles(ctx, p.ID, p.LinkHash)
	if err != nil {
		return app.Package{}, nil, err
	}
	// A recipient sees the owner's files and their own uploads, never another
	// recipient's.
	files = slices.DeleteFunc(files, func(f app.File) bool {
		if f.UploadedBy != app.ByRecipient || f.RecipientID == nil || p.Link == nil || *f.RecipientID == p.Link.ID {
			return false
		}
		p.FileCount--
		p.TotalSize -= f.Size
		return true
	})
	err = s.store.RecordLinkUse(ctx, p.LinkHash, app.Effects{Audit: []app.AuditEntry{p.LinkAudit(client, "link.view", nil)}})
	return p, files, err
}

// DownloadViaLink opens a file through a link for an answer of the span plan picks
// (a RangeNotSatisfiableError for a range the file cannot satisfy). A file whose
// budget is spent answers ErrFileUsedUp, HEAD included; otherwise the answer takes the
// bytes it will send (none without a body) from the budget, or is ErrFileUsedUp when
// they are more than what is left. An answer with a body from byte 0 counts a download
// and fires package.downloaded. The caller calls finish with what it sent.
func (s *Links) DownloadViaLink(ctx context.Context, token string, client app.Client, fileID uuid.UUID, plan func(app.File) (app.Span, error)) (app.File, app.Span, app.Object, app.Finish, error) {
	p, err := s.resolveLink(ctx, token, client)
	if err != nil {
		return app.File{}, app.Span{}, nil, nil, err
	}
	f, err := s.files.GetFile(ctx, p.ID, fileID, p.LinkHash)
	if err != nil {
		return app.File{}, app.Span{}, nil, nil, err
	}
	if !app.LinkMayDownload(f) {
		return app.File{}, app.Span{}, nil, nil, ErrRecipientFile
	}
	if err := s.scanAllows(f); err != nil {
		return app.File{}, app.Span{}, nil, nil, err
	}
	if f.BudgetSpent(p.MaxDownloads) {
		return app.File{}, app.Span{}, nil, nil, ErrFileUsedUp
	}
	span, err := plan(f)
	if err != nil {
		return app.File{}, app.Span{}, nil, nil, err
	}
	cost := app.AnswerCost(f.Size, span)
	counted := span.Counted()
	finish := func(app.Sent) {}
	if cost > 0 || counted {
		taken, err := s.store.TakeLinkBytes(ctx, p.ID, p.LinkHash, []uuid.UUID{f.ID}, []int64{cost}, counted)
		if err != nil {
			return app.File{}, app.Span{}, nil, nil, err
		}
		if len(taken) == 0 {
			return app.File{}, app.Span{}, nil, nil, ErrFileUsedUp
		}
		if counted {
			f.DownloadCount++
		}
		f.LinkTaken += cost
		finish = func(sent app.Sent) { s.giveBack(ctx, p.LinkHash, map[uuid.UUID]int64{f.ID: app.GiveBack(cost, sent)}) }
	}
	// Open first: a download that cannot start is not recorded as one.
	obj, err := s.objects.Open(ctx, f.ObjectKey)
	if err != nil {
		finish(app.Sent{})
		return app.File{}, app.Span{}, nil, nil, err
	}
	fx := app.Effects{Audit: []app.AuditEntry{p.LinkAudit(client, "file.download", &f.ID)}}
	if counted {
		fx.Events = []*eventsv1.Envelope{packages.PackageDownloaded(p, f.ID.String(), f.Filename)}
	}
	if err := s.store.RecordLinkUse(ctx, p.LinkHash, fx); err != nil {
		obj.Close()
		finish(app.Sent{})
		return app.File{}, app.Span{}, nil, nil, err
	}
	return f, span, obj, finish, nil
}

// giveBack returns to the budgets of the link what answers took and did not send.
func (s *Links) giveBack(ctx context.Context, linkHash []byte, amounts map[uuid.UUID]int64) {
	var ids []uuid.UUID
	var ns []int64
	for id, n := range amounts {
		if n > 0 {
			ids, ns = append(ids, id), append(ns, n)
		}
	}
	if len(ids) > 0 {
		_ = s.store.ReturnLinkBytes(context.WithoutCancel(ctx), linkHash, ids, ns)
	}
}

// ArchiveViaLink returns the files of a link's package for a zip of them all,
// recording the download, and a function to open each file's bytes. Each entry takes
// a whole copy of its file from the file's budget (and counts a download); files whose
// budget does not hold one are left out (ErrFileUsedUp when that is every file). The
// caller calls finish with what it sent of each entry.
func (s *Links) ArchiveViaLink(ctx context.Context, token string, client app.Client) (app.Package, []app.File, func(app.File) (app.Object, error), app.ArchiveFinish, error) {
	p, err := s.resolveLink(ctx, token, client)
	if err != nil {
		return app.Package{}, nil, nil, nil, err
	}
	if p.Encrypted() {
		return app.Package{}, nil, nil, nil, app.ErrEncryptedArchive
	}
	all, err := s.files.ListFiles(ctx, p.ID, p.LinkHash)
	if err != nil {
		return app.Package{}, nil, nil, nil, err
	}
	files := make([]app.File, 0, len(all))
	for _, f := range all {
		if app.LinkMayDownload(f) && s.scanAllows(f) == nil {
			files = append(files, f)
		}
	}
	finish := func(map[uuid.UUID]app.Sent) {}
	if len(files) > 0 {
		ids := make([]uuid.UUID, len(files))
		costs := make([]int64, len(files))
		for i, f := range files {
			ids[i], costs[i] = f.ID, app.AnswerCost(f.Size, app.WholeFile(f))
		}
		taken, err := s.store.TakeLinkBytes(ctx, p.ID, p.LinkHash, ids, costs, true)
		if err != nil {
			return app.Package{}, nil, nil, nil, err
		}
		if len(taken) == 0 {
			return app.Package{}, nil, nil, nil, ErrFileUsedUp
		}
		files = slices.DeleteFunc(files, func(f app.File) bool { return !slices.Contains(taken, f.ID) })
		finish = func(sent map[uuid.UUID]app.Sent) {
			back := make(map[uuid.UUID]int64, len(files))
			for _, f := range files {
				back[f.ID] = app.GiveBack(app.AnswerCost(f.Size, app.WholeFile(f)), sent[f.ID])
			}
			s.giveBack(ctx, p.LinkHash, back)
		}
	}
	fx := app.Effects{
		Events: []*eventsv1.Envelope{packages.PackageDownloaded(p, "", app.ArchiveName(p))},
		Audit:  []app.AuditEntry{p.LinkAudit(client, "archive.download", nil)},
	}
	if err := s.store.RecordLinkUse(ctx, p.LinkHash, fx); err != nil {
		finish(nil)
		return app.Package{}, nil, nil, nil, err
	}
	open := func(f app.File) (app.Object, error) { return s.objects.Open(ctx, f.ObjectKey) }
	return p, files, open, finish, nil
}

// ErrRecipientFile answers a download through a link of a file that was uploaded
// through it.
var ErrRecipientFile = app.Forbidden("files uploaded through this link cannot be downloaded through it")

// UploadViaLink streams a recipient's file into an active inbound package.
func (s *Links) UploadViaLink(ctx context.Context, token string, client app.Client, up app.Upload) (app.File, error) {
	p, err := s.resolveLink(ctx, token, client)
	if err != nil {
		return app.File{}, err
	}
	if p.Direction != app.Inbound {
		return app.File{}, app.Conflict("this package does not accept uploads")
	}
	f, err := s.p.StoreUpload(ctx, p, up, app.ByRecipient, app.OpRecipientUpload, p.LinkAudit(client, "file.upload", nil))
	if err != nil {
		return app.File{}, err
	}
	if err := s.store.RecordLinkUse(ctx, p.LinkHash, app.Effects{}); err != nil {
		return app.File{}, err
	}
	return f, nil
}

// LinkManifest returns the encrypted manifest of a link's package, with the link's
// grant rules; it is not a download and counts nothing.
func (s *Links) LinkManifest(ctx context.Context, token string, client app.Client) ([]byte, error) {
	p, err := s.resolveLink(ctx, token, client)
	if err != nil {
		return nil, err
	}
	return s.p.StoredManifest(ctx, p.ID)
}
