package app

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// AuditActionExpired is the audit log's action for an expiry (actor "system").
const AuditActionExpired = "package.expired"

// PackageExpired is the package.expired envelope of p, occurring at now: the same
// package head the gateway puts in every package event, and the deadline that passed.
func PackageExpired(p Package, now time.Time) *eventsv1.Envelope {
	e := events.NewEnvelope(events.TypePackageExpired, now.UTC())
	e.Data = &eventsv1.Envelope_PackageExpired{PackageExpired: &eventsv1.PackageExpired{
		Package:   p.PackageHead.Proto(),
		ExpiresAt: timestamppb.New(p.ExpiresAt),
	}}
	return e
}

// AuditCheckpoint is the audit.checkpoint envelope of c.
func AuditCheckpoint(c Checkpoint) *eventsv1.Envelope {
	e := events.NewEnvelope(events.TypeAuditCheckpoint, c.At.UTC())
	e.Data = &eventsv1.Envelope_AuditCheckpoint{AuditCheckpoint: &eventsv1.AuditCheckpoint{
		Seq: c.HeadSeq, Hash: c.HeadHash, AnchorSeq: c.AnchorSeq, AnchorHash: c.AnchorHash,
	}}
	return e
}

// expiryEffects are the effects of expiring ps: one package.expired event and one
// audit entry each.
func expiryEffects(ps []Package, now time.Time) Effects {
	fx := Effects{
		Events: make([]*eventsv1.Envelope, 0, len(ps)),
		Audit:  make([]AuditEntry, 0, len(ps)),
	}
	for _, p := range ps {
		fx.Events = append(fx.Events, PackageExpired(p, now))
		fx.Audit = append(fx.Audit, AuditEntry{Action: AuditActionExpired, PackageID: p.ID})
	}
	return fx
}
