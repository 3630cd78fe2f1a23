package app

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// envelope wraps an event payload with a fresh UUIDv7 id.
func envelope(typ string, fill func(e *eventsv1.Envelope)) *eventsv1.Envelope {
	e := events.NewEnvelope(typ, time.Now().UTC())
	fill(e)
	return e
}

// eventPackage is the package part of an event. Its recipient_email is the first
// recipient's, or, for a package read through a link, that link's recipient's.
func eventPackage(p Package) *eventsv1.Package {
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
	}.Proto()
}

func packageCreated(p Package) *eventsv1.Envelope {
	return envelope(events.TypePackageCreated, func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_PackageCreated{PackageCreated: &eventsv1.PackageCreated{
			Package: eventPackage(p), TtlDays: int32(p.TTLDays), ExpiresAt: timestamppb.New(p.ExpiresAt),
			Recipients: eventRecipients(p),
		}}
	})
}

func packageFinalized(p Package) *eventsv1.Envelope {
	return envelope(events.TypePackageFinalized, func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_PackageFinalized{PackageFinalized: &eventsv1.PackageFinalized{
			Package: eventPackage(p), FileCount: int32(p.FileCount), ExpiresAt: timestamppb.New(p.ExpiresAt),
			Recipients: eventRecipients(p),
		}}
	})
}

// eventRecipients lists the recipients' addresses for a package with several, nil for
// one (whose events stay as they were).
func eventRecipients(p Package) []string {
	if !p.several() {
		return nil
	}
	return p.RecipientEmails()
}

func fileUploaded(p Package, f File) *eventsv1.Envelope {
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

func packageDownloaded(p Package, fileID, filename string) *eventsv1.Envelope {
	return envelope(events.TypePackageDownloaded, func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_PackageDownloaded{PackageDownloaded: &eventsv1.PackageDownloaded{
			Package: eventPackage(p), FileId: fileID, Filename: filename,
		}}
	})
}

func packageRevoked(p Package, actor int64) *eventsv1.Envelope {
	return envelope(events.TypePackageRevoked, func(e *eventsv1.Envelope) {
		ev := &eventsv1.PackageRevoked{Package: eventPackage(p), ActorUserId: actor}
		if p.several() {
			all := true
			ev.AllLinks = &all
		}
		e.Data = &eventsv1.Envelope_PackageRevoked{PackageRevoked: ev}
	})
}

// recipientRevoked is the package.revoked of one recipient's link: recipient_email is
// theirs and all_links false.
func recipientRevoked(p Package, r Recipient, actor int64) *eventsv1.Envelope {
	p.Link = &r
	return envelope(events.TypePackageRevoked, func(e *eventsv1.Envelope) {
		all := false
		e.Data = &eventsv1.Envelope_PackageRevoked{PackageRevoked: &eventsv1.PackageRevoked{
			Package: eventPackage(p), ActorUserId: actor, AllLinks: &all,
		}}
	})
}

func packageDeleted(p Package, actor int64) *eventsv1.Envelope {
	return envelope(events.TypePackageDeleted, func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_PackageDeleted{PackageDeleted: &eventsv1.PackageDeleted{Package: eventPackage(p), ActorUserId: actor}}
	})
}

// mailJob asks the mailer to send recipient r's e-mail carrying their magic link.
func mailJob(p Package, r Recipient, owner User, link string) *eventsv1.MailJob {
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
	}
}

// WebhookJob asks the dispatcher to (re)try a delivery; MsgID is its Nats-Msg-Id.
type WebhookJob struct {
	Job   *eventsv1.WebhookJob
	MsgID string
}
