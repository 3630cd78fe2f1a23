package packages

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// envelope wraps an event payload with a fresh UUIDv7 id.
func envelope(typ string, fill func(e *eventsv1.Envelope)) *eventsv1.Envelope {
	e := events.NewEnvelope(typ, time.Now().UTC())
	fill(e)
	return e
}

// eventPackage is the package part of an event. Its recipient_email is the first
// recipient's, or, for a package read through a link, that link's recipient's.
func eventPackage(p app.Package) *eventsv1.Package {
	email := p.RecipientEmail
	if p.Link != nil {
		email = p.Link.Email
	}
	return events.PackageHead{
		ID:             p.ID.String(),
		Title:          p.Title,
		RecipientEmail: email,
		OwnerUserID:    p.OwnerUserID,
		Direction:      string(p.Direction),
		PackageFields:  p.PackageFields,
	}.Proto()
}

func packageCreated(p app.Package) *eventsv1.Envelope {
	return envelope(events.TypePackageCreated, func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_PackageCreated{PackageCreated: &eventsv1.PackageCreated{
			Package: eventPackage(p), TtlDays: int32(p.TTLDays), ExpiresAt: timestamppb.New(p.ExpiresAt),
			Recipients: eventRecipients(p),
		}}
	})
}

func packageFinalized(p app.Package) *eventsv1.Envelope {
	return envelope(events.TypePackageFinalized, func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_PackageFinalized{PackageFinalized: &eventsv1.PackageFinalized{
			Package: eventPackage(p), FileCount: int32(p.FileCount), ExpiresAt: timestamppb.New(p.ExpiresAt),
			Recipients: eventRecipients(p),
		}}
	})
}

// eventRecipients lists the recipients' addresses for a package with several, nil for
// one (whose events stay as they were).
func eventRecipients(p app.Package) []string {
	if !p.Several() {
		return nil
	}
	return p.RecipientEmails()
}

func fileUploaded(p app.Package, f app.File) *eventsv1.Envelope {
	if f.RecipientID != nil && p.Link == nil {
		if r, ok := p.Recipient(*f.RecipientID); ok {
			p.Link = &r
		}
	}
	return envelope(events.TypePackageFileUploaded, func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_FileUploaded{FileUploaded: &eventsv1.FileUploaded{
			Package: eventPackage(p), FileId: f.ID.String(), Filename: f.Filename, Size: f.Size, UploadedBy: string(f.UploadedBy),
		}}
	})
}

func packageDownloaded(p app.Package, fileID, filename string) *eventsv1.Envelope {
	return envelope(events.TypePackageDownloaded, func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_PackageDownloaded{PackageDownloaded: &eventsv1.PackageDownloaded{
			Package: eventPackage(p), FileId: fileID, Filename: filename,
		}}
	})
}

func packageRevoked(p app.Package, actor int64) *eventsv1.Envelope {
	return envelope(events.TypePackageRevoked, func(e *eventsv1.Envelope) {
		ev := &eventsv1.PackageRevoked{Package: eventPackage(p), ActorUserId: actor}
		if p.Several() {
			all := true
			ev.AllLinks = &all
		}
		e.Data = &eventsv1.Envelope_PackageRevoked{PackageRevoked: ev}
	})
}

// recipientRevoked is the package.revoked of one recipient's link: recipient_email is
// theirs and all_links false.
func recipientRevoked(p app.Package, r app.Recipient, actor int64) *eventsv1.Envelope {
	p.Link = &r
	return envelope(events.TypePackageRevoked, func(e *eventsv1.Envelope) {
		all := false
		e.Data = &eventsv1.Envelope_PackageRevoked{PackageRevoked: &eventsv1.PackageRevoked{
			Package: eventPackage(p), ActorUserId: actor, AllLinks: &all,
		}}
	})
}

func packageDeleted(p app.Package, actor int64) *eventsv1.Envelope {
	return envelope(events.TypePackageDeleted, func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_PackageDeleted{PackageDeleted: &eventsv1.PackageDeleted{Package: eventPackage(p), ActorUserId: actor}}
	})
}

// mailJob asks the mailer to send recipient r's e-mail carrying their magic link.
func mailJob(p app.Package, r app.Recipient, owner app.User, link string) *eventsv1.MailJob {
	return &eventsv1.MailJob{
		JobId:          events.NewEventID(),
		Kind:           string(p.Direction),
		PackageId:      p.ID.String(),
		Title:          p.Title,
		Note:           p.Note,
		RecipientEmail: r.Email,
		RecipientName:  r.Name,
		OwnerName:      owner.Name,
		OwnerEmail:     owner.Email,
		MagicLink:      link,
		ExpiresAt:      timestamppb.New(p.ExpiresAt),
		Encrypted:      p.Encrypted(),
		Language:       r.Language,
	}
}
