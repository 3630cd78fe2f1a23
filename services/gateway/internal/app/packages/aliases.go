package packages

import "github.com/shipfile/shipfile/services/gateway/internal/app"

// The model this package shares with the other domains lives in internal/app. These
// aliases name it as the package service's code did before it moved out of
// internal/app (issue 20), so the move rewrote none of its lines and the branches in
// flight that edit it merge as they are. They are transitional: qualify the names
// (app.Package, …) and delete this file once those branches are in.

type (
	ArchiveFinish  = app.ArchiveFinish
	AuditEntry     = app.AuditEntry
	AuditFilter    = app.AuditFilter
	Client         = app.Client
	DirectHasher   = app.DirectHasher
	Direction      = app.Direction
	Effects        = app.Effects
	Error          = app.Error
	File           = app.File
	Finish         = app.Finish
	Hasher         = app.Hasher
	Kind           = app.Kind
	Limits         = app.Limits
	LinkMint       = app.LinkMint
	NewRecipient   = app.NewRecipient
	Object         = app.Object
	ObjectStore    = app.ObjectStore
	Op             = app.Op
	Package        = app.Package
	PackageFilter  = app.PackageFilter
	PackagePatch   = app.PackagePatch
	PasswordHasher = app.PasswordHasher
	Recipient      = app.Recipient
	RecipientInput = app.RecipientInput
	Role           = app.Role
	ScanMode       = app.ScanMode
	Sent           = app.Sent
	Span           = app.Span
	State          = app.State
	Upload         = app.Upload
	Uploader       = app.Uploader
	User           = app.User
)

const (
	ByOwner         = app.ByOwner
	ByRecipient     = app.ByRecipient
	DefaultTTLDays  = app.DefaultTTLDays
	Inbound         = app.Inbound
	KindBadRequest  = app.KindBadRequest
	KindConflict    = app.KindConflict
	KindGone        = app.KindGone
	KindInternal    = app.KindInternal
	KindInvalid     = app.KindInvalid
	KindTooLarge    = app.KindTooLarge
	LinkActive      = app.LinkActive
	LinkNone        = app.LinkNone
	LinkRevoked     = app.LinkRevoked
	MaxRecipientLen = app.MaxRecipientLen
	MaxRecipients   = app.MaxRecipients
	MaxTTLDays      = app.MaxTTLDays
	MinRecipients   = app.MinRecipients
	MinTTLDays      = app.MinTTLDays
	OpEdit          = app.OpEdit
	OpFinalize      = app.OpFinalize
	OpOwnerDownload = app.OpOwnerDownload
	OpOwnerUpload   = app.OpOwnerUpload
	OpRemoveFile    = app.OpRemoveFile
	OpRevoke        = app.OpRevoke
	Outbound        = app.Outbound
	RoleRegular     = app.RoleRegular
	ScanInfected    = app.ScanInfected
	ScanPending     = app.ScanPending
	StateActive     = app.StateActive
	StateDraft      = app.StateDraft
	StateExpired    = app.StateExpired
	StateRevoked    = app.StateRevoked
)

var (
	Conflict              = app.Conflict
	ErrInfectedRemoved    = app.ErrInfectedRemoved
	ErrNotFound           = app.ErrNotFound
	Forbidden             = app.Forbidden
	Invalid               = app.Invalid
	KindOf                = app.KindOf
	LinkMayDownload       = app.LinkMayDownload
	NormalizeContentType  = app.NormalizeContentType
	NormalizeEmail        = app.NormalizeEmail
	NotFound              = app.NotFound
	ScanAllows            = app.ScanAllows
	ValidateFilename      = app.ValidateFilename
	ValidateNote          = app.ValidateNote
	ValidateRecipientName = app.ValidateRecipientName
	ValidateTitle         = app.ValidateTitle
	WholeFile             = app.WholeFile

	userAudit = app.UserAudit
)
