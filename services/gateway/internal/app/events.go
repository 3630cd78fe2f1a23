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

func eventPackage(p Package) *eventsv1.Package {
	return &eventsv1.Package{
		PackageId:      p.ID.String(),
		Title:          p.Title,
		RecipientEmail: p.RecipientEmail,
		OwnerUserId:    p.OwnerUserID,
		Direction:      string(p.Direction),
	}
}

func packageCreated(p Package) *eventsv1.Envelope {
	return envelope(events.TypePackageCreated, func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_PackageCreated{PackageCreated: &eventsv1.PackageCreated{
			Package: eventPackage(p), TtlDays: int32(p.TTLDays), ExpiresAt: timestamppb.New(p.ExpiresAt),
		}}
	})
}

func packageFinalized(p Package) *eventsv1.Envelope {
	return envelope(events.TypePackageFinalized, func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_PackageFinalized{PackageFinalized: &eventsv1.PackageFinalized{
			Package: eventPackage(p), FileCount: int32(p.FileCount), ExpiresAt: timestamppb.New(p.ExpiresAt),
		}}
	})
}

func fileUploaded(p Package, f File) *eventsv1.Envelope {
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
		e.Data = &eventsv1.Envelope_PackageRevoked{PackageRevoked: &eventsv1.PackageRevoked{Package: eventPackage(p), ActorUserId: actor}}
	})
}

func packageDeleted(p Package, actor int64) *eventsv1.Envelope {
	return envelope(events.TypePackageDeleted, func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_PackageDeleted{PackageDeleted: &eventsv1.PackageDeleted{Package: eventPackage(p), ActorUserId: actor}}
	})
}

// mailJob asks the mailer to send the recipient's e-mail carrying the magic link.
func mailJob(p Package, owner User, link string) *eventsv1.MailJob {
	return &eventsv1.MailJob{
		JobId:          events.NewEventID(),
		Kind:           string(p.Direction),
		PackageId:      p.ID.String(),
		Title:          p.Title,
		Note:           p.Note,
		RecipientEmail: p.RecipientEmail,
		RecipientName:  p.RecipientName,
		OwnerName:      owner.Name,
		OwnerEmail:     owner.Email,
		MagicLink:      link,
		ExpiresAt:      timestamppb.New(p.ExpiresAt),
	}
}

// webhookTest is the event of a subscription's Test button; the dispatcher sends it to
// that one subscription whatever its selection.
func webhookTest(hookID int64) *eventsv1.Envelope {
	return envelope(events.TypeWebhookTest, func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_WebhookTest{WebhookTest: &eventsv1.WebhookTest{HookId: hookID, Message: WebhookTestMessage}}
	})
}

// redeliveryJob asks the dispatcher to try a delivery again. Each redelivery has a
// message id of its own, so the stream's duplicate window never drops a second one.
func redeliveryJob(hookID int64, deliveryID string) WebhookJob {
	return WebhookJob{
		Job:   &eventsv1.WebhookJob{DeliveryId: deliveryID, HookId: hookID},
		MsgID: deliveryID + "/redeliver/" + events.NewEventID(),
	}
}
