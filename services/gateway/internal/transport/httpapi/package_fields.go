package httpapi

import (
	"bytes"
	"encoding/json"
	"time"

	api_types "github.com/oapi-codegen/runtime/types"

	api "github.com/shipfile/shipfile/pkg/apiclient"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

// The fields of a package as the API takes and shows them: the bodies of a create
// and an edit, and the package of every answer. Request bodies are decoded into these
// hand-written structs because their decoding is part of the API: a PATCH tells null
// from absent, and a missing field or a bad date has its own 422 wording.

// createPackageRequest is the body of POST /api/v1/packages: packages.NewPackage, field
// for field.
type createPackageRequest struct {
	Title          *string `json:"title"`
	RecipientEmail *string `json:"recipient_email"`
	RecipientName  *string `json:"recipient_name"`
	// RecipientLanguage and each entry's language default to the sender's
	// (senderLanguage).
	RecipientLanguage *string               `json:"recipient_language"`
	Recipients        *[]app.RecipientInput `json:"recipients"`
	Direction         *string               `json:"direction"`
	TTLDays           *int                  `json:"ttl_days"`
	Note              *string               `json:"note"`
	Password          *string               `json:"password"`
	MaxDownloads      *int                  `json:"max_downloads"`
	NotifyOwner       *bool                 `json:"notify_owner"`
	Encryption        *string               `json:"encryption"`
}

// nullable is a JSON field that may be absent, null or a value.
type nullable[T any] struct {
	app.Nullable[T]
	field string
	kind  string
}

func (n *nullable[T]) UnmarshalJSON(b []byte) error {
	n.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		n.Value = nil
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return app.Invalid("%s must be %s or null", n.field, n.kind)
	}
	n.Value = &v
	return nil
}

// updatePackageRequest is the body of PATCH /api/v1/packages/{id}; its nullable
// fields name themselves in newUpdatePackageRequest.
type updatePackageRequest struct {
	Title         *string `json:"title"`
	Note          *string `json:"note"`
	RecipientName *string `json:"recipient_name"`
	// RecipientEmail is read beside recipients only, where it must name the first
	// entry (docs/API.md, "Several recipients"); alone it changes nothing.
	RecipientEmail *string               `json:"recipient_email"`
	Recipients     *[]app.RecipientInput `json:"recipients"`
	ExpiresAt      *string               `json:"expires_at"`
	Password       nullable[string]      `json:"password"`
	MaxDownloads   nullable[int]         `json:"max_downloads"`
	NotifyOwner    *bool                 `json:"notify_owner"`
	// Encryption is fixed at creation: sent here, it is refused.
	Encryption json.RawMessage `json:"encryption"`
}

// newUpdatePackageRequest is an empty edit, ready to decode.
func newUpdatePackageRequest() updatePackageRequest {
	return updatePackageRequest{
		Password:     nullable[string]{field: "password", kind: "a string"},
		MaxDownloads: nullable[int]{field: "max_downloads", kind: "an integer"},
	}
}

// patch is the edit of the request, with its expires_at parsed.
func (r updatePackageRequest) patch(expires *time.Time) packages.PackagePatch {
	return packages.PackagePatch{
		Title: r.Title, Note: r.Note, RecipientName: r.RecipientName, RecipientEmail: r.RecipientEmail, Recipients: r.Recipients, ExpiresAt: expires,
		Password: r.Password.Nullable, MaxDownloads: r.MaxDownloads.Nullable, NotifyOwner: r.NotifyOwner,
	}
}

// toAPIPackage is a package as the API shows it; timestamps are UTC.
func toAPIPackage(p app.Package) api.Package {
	return api.Package{
		Id: p.ID, Title: p.Title, RecipientEmail: api_types.Email(p.RecipientEmail), RecipientName: p.RecipientName,
		Direction: api.PackageDirection(p.Direction), State: api.PackageState(p.State), TtlDays: p.TTLDays, Note: p.Note,
		OwnerUserId: p.OwnerUserID, FileCount: p.FileCount, TotalSize: p.TotalSize, CreatedAt: p.CreatedAt.UTC(),
		FinalizedAt: utcPtr(p.FinalizedAt), ExpiresAt: p.ExpiresAt.UTC(), RevokedAt: utcPtr(p.RevokedAt),
		LinkUseCount: p.LinkUseCount, LinkLastUsedAt: utcPtr(p.LinkLastUsedAt),
		PasswordProtected: p.PasswordProtected(), MaxDownloads: p.MaxDownloads, NotifyOwner: p.NotifyOwner,
		Recipients: toAPIRecipients(p.Recipients), Encryption: api.Encryption(encryptionOf(p)), OnHold: p.OnHold,
	}
}
