// Package policies is what people may send and how much they may hold: groups with a
// policy each, their members (put by admins, or taken from the OpenID Connect groups
// claim), the default policy of users in no group, each user's running usage and the
// reservations of uploads under way (docs/POLICIES.md). The rules are plain functions
// (rules.go); the other domains ask through the small interfaces they declare.
package policies

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Policy is a set of limits; a nil limit is no limit.
type Policy struct {
	// StorageQuotaBytes bounds what the user's packages hold: every file of every
	// package not expired or deleted, and the bytes of the uploads under way.
	StorageQuotaBytes *int64 `json:"storage_quota_bytes"`
	MaxFileSize       *int64 `json:"max_file_size"`
	MaxPackageSize    *int64 `json:"max_package_size"`
	MaxTTLDays        *int   `json:"max_ttl_days"`
	// MaxActivePackages bounds the user's packages in draft or active.
	MaxActivePackages *int `json:"max_active_packages"`
	// MaxDownloadsCeiling: a link's download limit must be set and at most this.
	MaxDownloadsCeiling *int  `json:"max_downloads_ceiling"`
	RequirePassword     *bool `json:"require_password"`
	RequireEncryption   *bool `json:"require_encryption"`
	// AllowedRecipientDomains: recipients' e-mail domains; empty or nil: any.
	AllowedRecipientDomains []string `json:"allowed_recipient_domains"`
	// MayRequestFiles: false forbids inbound packages (requests).
	MayRequestFiles *bool `json:"may_request_files"`
}

// UnmarshalJSON reads a policy, refusing fields it does not know (a misspelt limit
// would otherwise be no limit).
func (p *Policy) UnmarshalJSON(b []byte) error {
	type plain Policy
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var out plain
	if err := dec.Decode(&out); err != nil {
		return err
	}
	*p = Policy(out)
	return nil
}

// Group is a set of users who share a policy.
type Group struct {
	ID     int64
	Name   string
	Policy Policy
	// OIDCGroups are names in the OpenID Connect groups claim that make a signed-in
	// user a member.
	OIDCGroups []string
	// Members are the members' user ids (ascending).
	Members   []int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// GroupInput is what creating or changing a group takes; nil fields stay as they are
// (or take their defaults on creation).
type GroupInput struct {
	Name       *string
	Policy     *Policy
	OIDCGroups *[]string
}

// Usage is a user's running usage.
type Usage struct {
	UserID         int64
	Email          string
	Name           string
	UsedBytes      int64
	ReservedBytes  int64
	ActivePackages int
	// NotifiedAt is when the 90 % notice went out (nil: not since usage last fell
	// below 90 %).
	NotifiedAt *time.Time
}

// Held is what counts against a quota: the bytes stored and those reserved.
func (u Usage) Held() int64 { return u.UsedBytes + u.ReservedBytes }

// UsageSort is the order of the admin's usage list.
type UsageSort string

// The orders of the usage list (each descending but email).
const (
	SortUsed     UsageSort = "used_bytes"
	SortReserved UsageSort = "reserved_bytes"
	SortActive   UsageSort = "active_packages"
	SortEmail    UsageSort = "email"
)

// Hold is where a reservation belongs: a resumable upload (its whole length, given
// back when the upload completes or ends) or a multipart upload's object key (given
// back when the file row commits or the key's reservation is swept).
type Hold struct {
	TusUploadID *uuid.UUID
	ObjectKey   string
}
