package webhooktest

import (
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// ExpiresAt is the fixed expiry of Envelopes' packages.
var ExpiresAt = time.Date(2026, 11, 28, 16, 32, 5, 0, time.UTC)

// Envelope returns an event of type typ that occurs now (subscriptions get only the
// events that occur after they were created), with a new event id and fixed contents;
// for webhook.test, hookID names the subscription.
func Envelope(typ string, hookID int64) *eventsv1.Envelope {
	env := events.NewEnvelope(typ, time.Now())
	pkg := &eventsv1.Package{
		PackageId:      "0193a5f0-7d4e-7b7c-9f3e-2c1d4b5a6e7f",
		Title:          "Q4 <report> & \"notes\"",
		RecipientEmail: "ada@example.com",
		OwnerUserId:    42,
		Direction:      "outbound",
	}
	exp := timestamppb.New(ExpiresAt)
	switch typ {
	case events.TypePackageCreated:
		env.Data = &eventsv1.Envelope_PackageCreated{PackageCreated: &eventsv1.PackageCreated{Package: pkg, TtlDays: 7, ExpiresAt: exp}}
	case events.TypePackageFinalized:
		env.Data = &eventsv1.Envelope_PackageFinalized{PackageFinalized: &eventsv1.PackageFinalized{Package: pkg, FileCount: 3, ExpiresAt: exp}}
	case events.TypePackageFileUploaded:
		env.Data = &eventsv1.Envelope_FileUploaded{FileUploaded: &eventsv1.FileUploaded{
			Package: pkg, FileId: uuid.NewString(), Filename: "report.pdf", Size: 1048576, UploadedBy: "owner"}}
	case events.TypePackageDownloaded:
		env.Data = &eventsv1.Envelope_PackageDownloaded{PackageDownloaded: &eventsv1.PackageDownloaded{Package: pkg, Filename: "Q4.zip"}}
	case events.TypePackageRevoked:
		env.Data = &eventsv1.Envelope_PackageRevoked{PackageRevoked: &eventsv1.PackageRevoked{Package: pkg, ActorUserId: 1}}
	case events.TypePackageDeleted:
		env.Data = &eventsv1.Envelope_PackageDeleted{PackageDeleted: &eventsv1.PackageDeleted{Package: pkg, ActorUserId: 1}}
	case events.TypePackageExpired:
		env.Data = &eventsv1.Envelope_PackageExpired{PackageExpired: &eventsv1.PackageExpired{Package: pkg, ExpiresAt: exp}}
	case events.TypeWebhookTest:
		env.Data = &eventsv1.Envelope_WebhookTest{WebhookTest: &eventsv1.WebhookTest{HookId: hookID, Message: "This is a test delivery from shipfile."}}
	}
	return env
}
