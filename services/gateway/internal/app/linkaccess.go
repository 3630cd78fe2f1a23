package app

import (
	"context"
	"errors"
	"slices"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// The recipient's side of a package: what a magic link opens.

// ErrLinkGone is the one answer for an unknown, revoked, expired or deleted link: it
// gives no hint which.
var ErrLinkGone = &Error{Kind: KindGone, Detail: "this link is no longer valid"}

// CheckLink answers ErrLinkGone (and audits the attempt) unless token is the link of
// an active package. The link routes call it before they look at anything else of
// the request, so a dead link is 410 whatever else is wrong (a password, if the link
// has one, is checked after); the package it found is put in the returned context,
// where the request's own resolve finds it again without a second query.
func (s *Packages) CheckLink(ctx context.Context, token string, client Client) (context.Context, error) {
	p, err := s.liveLink(ctx, token, client)
	if err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, resolvedLinkKey{}, resolvedLink{token: token, pkg: p}), nil
}

type resolvedLinkKey struct{}

type resolvedLink struct {
	token string
	pkg   Package
}

// resolveLink finds the active package of a raw link token and checks the caller's
// grant when the link has a password (ErrLinkLocked without a valid one). Invalid
// attempts are audited.
func (s *Packages) resolveLink(ctx context.Context, token string, client Client) (Package, error) {
	p, err := s.liveLink(ctx, token, client)
	if err != nil {
		return Package{}, err
	}
	if p.PasswordProtected() && !CheckGrant(p, client.Grant, s.now()) {
		return Package{}, ErrLinkLocked
	}
	return p, nil
}

// liveLink finds the active package of a raw link token: unknown, revoked, expired,
// deleted and used-up links are all ErrLinkGone, before any password is asked.
func (s *Packages) liveLink(ctx context.Context, token string, client Client) (Package, error) {
	if r, ok := ctx.Value(resolvedLinkKey{}).(resolvedLink); ok && r.token == token {
		return r.pkg, nil
	}
	hash, ok := linkHash(token)
	if ok {
		p, err := s.store.PackageByLink(ctx, hash)
		if err == nil && !p.UsedUp && p.Link != nil && p.Link.LinkState == LinkActive && p.apply(OpUseLink, s.now()) == nil {
			return p, nil
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Package{}, err
		}
	}
	// One row per IP and hour, however many links a guesser tries.
	invalid := linkAudit(client, "link.invalid", nil, nil)
	invalid.Hourly = true
	_ = s.store.WriteEffects(ctx, Effects{Audit: []AuditEntry{invalid}})
	return Package{}, ErrLinkGone
}

// ViewLink returns the package and files behind a link, recording the visit.
func (s *Packages) ViewLink(ctx context.Context, token string, client Client) (Package, []File, error) {
	p, err := s.resolveLink(ctx, token, client)
	if err != nil {
		return Package{}, nil, err
	}
	files, err := s.store.ListFiles(ctx, p.ID, p.LinkHash)
	if err != nil {
		return Package{}, nil, err
	}
	// A recipient sees the owner's files and their own uploads, never another
	// recipient's.
	files = slices.DeleteFunc(files, func(f File) bool {
		if f.UploadedBy != ByRecipient || f.RecipientID == nil || p.Link == nil || *f.RecipientID == p.Link.ID {
			return false
		}
		p.FileCount--
		p.TotalSize -= f.Size
		return true
	})
	err = s.store.RecordLinkUse(ctx, p.LinkHash, Effects{Audit: []AuditEntry{p.linkAudit(client, "link.view", nil)}})
	return p, files, err
}

// Finish ends an answer through a link: what it took and did not send goes back to
// the budget.
type Finish func(Sent)

// DownloadViaLink opens a file through a link for an answer of the span plan picks
// (a RangeNotSatisfiableError for a range the file cannot satisfy). A file whose
// budget is spent answers ErrFileUsedUp, HEAD included; otherwise the answer takes the
// bytes it will send (none without a body) from the budget, or is ErrFileUsedUp when
// they are more than what is left. An answer with a body from byte 0 counts a download
// and fires package.downloaded. The caller calls finish with what it sent.
func (s *Packages) DownloadViaLink(ctx context.Context, token string, client Client, fileID uuid.UUID, plan func(File) (Span, error)) (File, Span, Object, Finish, error) {
	p, err := s.resolveLink(ctx, token, client)
	if err != nil {
		return File{}, Span{}, nil, nil, err
	}
	f, err := s.store.GetFile(ctx, p.ID, fileID, p.LinkHash)
	if err != nil {
		return File{}, Span{}, nil, nil, err
	}
	if !LinkMayDownload(f) {
		return File{}, Span{}, nil, nil, ErrRecipientFile
	}
	if err := s.scanAllows(f); err != nil {
		return File{}, Span{}, nil, nil, err
	}
	if f.BudgetSpent(p.MaxDownloads) {
		return File{}, Span{}, nil, nil, ErrFileUsedUp
	}
	span, err := plan(f)
	if err != nil {
		return File{}, Span{}, nil, nil, err
	}
	cost := AnswerCost(f.Size, span)
	counted := span.Counted()
	finish := func(Sent) {}
	if cost > 0 || counted {
		taken, err := s.store.TakeLinkBytes(ctx, p.ID, p.LinkHash, []uuid.UUID{f.ID}, []int64{cost}, counted)
		if err != nil {
			return File{}, Span{}, nil, nil, err
		}
		if len(taken) == 0 {
			return File{}, Span{}, nil, nil, ErrFileUsedUp
		}
		if counted {
			f.DownloadCount++
		}
		f.LinkTaken += cost
		finish = func(sent Sent) { s.giveBack(ctx, p.LinkHash, map[uuid.UUID]int64{f.ID: GiveBack(cost, sent)}) }
	}
	// Open first: a download that cannot start is not recorded as one.
	obj, err := s.objects.Open(ctx, f.ObjectKey)
	if err != nil {
		finish(Sent{})
		return File{}, Span{}, nil, nil, err
	}
	fx := Effects{Audit: []AuditEntry{p.linkAudit(client, "file.download", &f.ID)}}
	if counted {
		fx.Events = []*eventsv1.Envelope{packageDownloaded(p, f.ID.String(), f.Filename)}
	}
	if err := s.store.RecordLinkUse(ctx, p.LinkHash, fx); err != nil {
		obj.Close()
		finish(Sent{})
		return File{}, Span{}, nil, nil, err
	}
	return f, span, obj, finish, nil
}

// giveBack returns to the budgets of the link what answers took and did not send.
func (s *Packages) giveBack(ctx context.Context, linkHash []byte, amounts map[uuid.UUID]int64) {
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

// ArchiveFinish ends an archive through a link: sent says what went out of each
// file's entry (a file missing from it sent nothing). What the entries took and did
// not send goes back to the budgets; entries sent whole keep what they took.
type ArchiveFinish func(sent map[uuid.UUID]Sent)

// ArchiveViaLink returns the files of a link's package for a zip of them all,
// recording the download, and a function to open each file's bytes. Each entry takes
// a whole copy of its file from the file's budget (and counts a download); files whose
// budget does not hold one are left out (ErrFileUsedUp when that is every file). The
// caller calls finish with what it sent of each entry.
func (s *Packages) ArchiveViaLink(ctx context.Context, token string, client Client) (Package, []File, func(File) (Object, error), ArchiveFinish, error) {
	p, err := s.resolveLink(ctx, token, client)
	if err != nil {
		return Package{}, nil, nil, nil, err
	}
	all, err := s.store.ListFiles(ctx, p.ID, p.LinkHash)
	if err != nil {
		return Package{}, nil, nil, nil, err
	}
	files := make([]File, 0, len(all))
	for _, f := range all {
		if LinkMayDownload(f) && s.scanAllows(f) == nil {
			files = append(files, f)
		}
	}
	finish := func(map[uuid.UUID]Sent) {}
	if len(files) > 0 {
		ids := make([]uuid.UUID, len(files))
		costs := make([]int64, len(files))
		for i, f := range files {
			ids[i], costs[i] = f.ID, AnswerCost(f.Size, WholeFile(f))
		}
		taken, err := s.store.TakeLinkBytes(ctx, p.ID, p.LinkHash, ids, costs, true)
		if err != nil {
			return Package{}, nil, nil, nil, err
		}
		if len(taken) == 0 {
			return Package{}, nil, nil, nil, ErrFileUsedUp
		}
		files = slices.DeleteFunc(files, func(f File) bool { return !slices.Contains(taken, f.ID) })
		finish = func(sent map[uuid.UUID]Sent) {
			back := make(map[uuid.UUID]int64, len(files))
			for _, f := range files {
				back[f.ID] = GiveBack(AnswerCost(f.Size, WholeFile(f)), sent[f.ID])
			}
			s.giveBack(ctx, p.LinkHash, back)
		}
	}
	fx := Effects{
		Events: []*eventsv1.Envelope{packageDownloaded(p, "", ArchiveName(p))},
		Audit:  []AuditEntry{p.linkAudit(client, "archive.download", nil)},
	}
	if err := s.store.RecordLinkUse(ctx, p.LinkHash, fx); err != nil {
		finish(nil)
		return Package{}, nil, nil, nil, err
	}
	open := func(f File) (Object, error) { return s.objects.Open(ctx, f.ObjectKey) }
	return p, files, open, finish, nil
}

// ErrRecipientFile answers a download through a link of a file that was uploaded
// through it.
var ErrRecipientFile = Forbidden("files uploaded through this link cannot be downloaded through it")

// LinkMayDownload reports whether a file may be downloaded through its package's
// link: files the owner put in may, files uploaded through the link never (whoever
// holds a forwarded request link must not read what the recipient sent).
func LinkMayDownload(f File) bool { return f.UploadedBy != ByRecipient }

// UploadViaLink streams a recipient's file into an active inbound package.
func (s *Packages) UploadViaLink(ctx context.Context, token string, client Client, up Upload) (File, error) {
	p, err := s.resolveLink(ctx, token, client)
	if err != nil {
		return File{}, err
	}
	if p.Direction != Inbound {
		return File{}, Conflict("this package does not accept uploads")
	}
	f, err := s.upload(ctx, p, up, ByRecipient, OpRecipientUpload, p.linkAudit(client, "file.upload", nil))
	if err != nil {
		return File{}, err
	}
	if err := s.store.RecordLinkUse(ctx, p.LinkHash, Effects{}); err != nil {
		return File{}, err
	}
	return f, nil
}
