package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// Formats of the body's times: timestamp is RFC 3339 UTC ending in Z, expires_at is
// ISO 8601 UTC without a zone suffix, both to the second.
const (
	timestampLayout = "2006-01-02T15:04:05Z"
	expiresLayout   = "2006-01-02T15:04:05"
)

// The body structs list their fields in the order they appear in the JSON; embedded
// structs' fields come at the place of the embedding.

// packageHead is what every package.* body starts with.
type packageHead struct {
	Event          string `json:"event"`
	Timestamp      string `json:"timestamp"`
	PackageID      string `json:"package_id"`
	Title          string `json:"title"`
	RecipientEmail string `json:"recipient_email"`
	OwnerUserID    int64  `json:"owner_user_id"`
}

type createdBody struct {
	packageHead
	Direction string `json:"direction"`
	TTLDays   int32  `json:"ttl_days"`
	ExpiresAt string `json:"expires_at"`
}

// finalizedBody is exactly the seed's table of package.finalized.
type finalizedBody struct {
	packageHead
	FileCount int32  `json:"file_count"`
	ExpiresAt string `json:"expires_at"`
}

type fileUploadedBody struct {
	packageHead
	FileID     string `json:"file_id"`
	Filename   string `json:"filename"`
	Size       int64  `json:"size"`
	UploadedBy string `json:"uploaded_by"`
}

type downloadedBody struct {
	packageHead
	FileID   *string `json:"file_id"` // null for the zip of all files
	Filename string  `json:"filename"`
}

type actorBody struct {
	packageHead
	ActorUserID int64 `json:"actor_user_id"`
}

type expiredBody struct {
	packageHead
	ExpiresAt string `json:"expires_at"`
}

type testBody struct {
	Event     string `json:"event"`
	Timestamp string `json:"timestamp"`
	HookID    int64  `json:"hook_id"`
	Message   string `json:"message"`
}

// RenderBody returns the event type and the exact JSON body of the webhook requests of
// env. An envelope that cannot be rendered (no data, data of another type, a missing
// package or time) yields an error wrapping ErrPoison.
func RenderBody(env *eventsv1.Envelope) (string, []byte, error) {
	typ := env.GetType()
	if env.GetEventId() == "" {
		return typ, nil, fmt.Errorf("%w: envelope without event_id", ErrPoison)
	}
	if got := events.TypeOf(env); got != typ {
		return typ, nil, fmt.Errorf("%w: envelope %s of type %q carries data of %q", ErrPoison, env.GetEventId(), typ, got)
	}
	ts, err := formatTime(env.GetOccurredAt(), timestampLayout, "occurred_at")
	if err != nil {
		return typ, nil, fmt.Errorf("%w: envelope %s: %w", ErrPoison, env.GetEventId(), err)
	}
	v, err := bodyOf(env, typ, ts)
	if err != nil {
		return typ, nil, fmt.Errorf("%w: envelope %s (%s): %w", ErrPoison, env.GetEventId(), typ, err)
	}
	b, err := marshal(v)
	if err != nil {
		return typ, nil, fmt.Errorf("%w: envelope %s: %w", ErrPoison, env.GetEventId(), err)
	}
	return typ, b, nil
}

func bodyOf(env *eventsv1.Envelope, typ, ts string) (any, error) {
	if d, ok := env.GetData().(*eventsv1.Envelope_WebhookTest); ok {
		if d.WebhookTest.GetHookId() <= 0 {
			return nil, fmt.Errorf("hook_id %d", d.WebhookTest.GetHookId())
		}
		return testBody{Event: typ, Timestamp: ts, HookID: d.WebhookTest.GetHookId(), Message: d.WebhookTest.GetMessage()}, nil
	}
	head := func(p *eventsv1.Package) (packageHead, error) {
		if p == nil || p.GetPackageId() == "" {
			return packageHead{}, fmt.Errorf("no package")
		}
		return packageHead{
			Event:          typ,
			Timestamp:      ts,
			PackageID:      p.GetPackageId(),
			Title:          p.GetTitle(),
			RecipientEmail: p.GetRecipientEmail(),
			OwnerUserID:    p.GetOwnerUserId(),
		}, nil
	}
	switch d := env.GetData().(type) {
	case *eventsv1.Envelope_PackageCreated:
		h, err := head(d.PackageCreated.GetPackage())
		if err != nil {
			return nil, err
		}
		exp, err := formatTime(d.PackageCreated.GetExpiresAt(), expiresLayout, "expires_at")
		if err != nil {
			return nil, err
		}
		return createdBody{h, d.PackageCreated.GetPackage().GetDirection(), d.PackageCreated.GetTtlDays(), exp}, nil
	case *eventsv1.Envelope_PackageFinalized:
		h, err := head(d.PackageFinalized.GetPackage())
		if err != nil {
			return nil, err
		}
		exp, err := formatTime(d.PackageFinalized.GetExpiresAt(), expiresLayout, "expires_at")
		if err != nil {
			return nil, err
		}
		return finalizedBody{h, d.PackageFinalized.GetFileCount(), exp}, nil
	case *eventsv1.Envelope_FileUploaded:
		h, err := head(d.FileUploaded.GetPackage())
		if err != nil {
			return nil, err
		}
		f := d.FileUploaded
		return fileUploadedBody{h, f.GetFileId(), f.GetFilename(), f.GetSize(), f.GetUploadedBy()}, nil
	case *eventsv1.Envelope_PackageDownloaded:
		h, err := head(d.PackageDownloaded.GetPackage())
		if err != nil {
			return nil, err
		}
		var fileID *string
		if id := d.PackageDownloaded.GetFileId(); id != "" {
			fileID = &id
		}
		return downloadedBody{h, fileID, d.PackageDownloaded.GetFilename()}, nil
	case *eventsv1.Envelope_PackageRevoked:
		h, err := head(d.PackageRevoked.GetPackage())
		if err != nil {
			return nil, err
		}
		return actorBody{h, d.PackageRevoked.GetActorUserId()}, nil
	case *eventsv1.Envelope_PackageDeleted:
		h, err := head(d.PackageDeleted.GetPackage())
		if err != nil {
			return nil, err
		}
		return actorBody{h, d.PackageDeleted.GetActorUserId()}, nil
	case *eventsv1.Envelope_PackageExpired:
		h, err := head(d.PackageExpired.GetPackage())
		if err != nil {
			return nil, err
		}
		exp, err := formatTime(d.PackageExpired.GetExpiresAt(), expiresLayout, "expires_at")
		if err != nil {
			return nil, err
		}
		return expiredBody{h, exp}, nil
	default:
		return nil, fmt.Errorf("no webhook body for event type %q", typ)
	}
}

func formatTime(ts *timestamppb.Timestamp, layout, name string) (string, error) {
	if ts == nil {
		return "", fmt.Errorf("no %s", name)
	}
	if err := ts.CheckValid(); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return ts.AsTime().UTC().Truncate(time.Second).Format(layout), nil
}

// marshal encodes v as JSON without HTML escaping and without a trailing newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
