package transfers

import (
	"crypto/subtle"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// TusUpload is the state of one resumable upload.
type TusUpload struct {
	ID            uuid.UUID
	PackageID     uuid.UUID
	UploadedBy    app.Uploader
	CreatorUserID *int64 // owner uploads
	// CreatorTokenID is the API token an owner's upload was created with (nil: a
	// browser session, or a recipient's upload).
	CreatorTokenID *int64
	LinkHash       []byte // recipient uploads: the link it was created through
	FileID         uuid.UUID
	Filename       string
	ContentType    string
	Length         int64
	Offset         int64
	ObjectKey      string
	S3UploadID     string // "" until the first part is sent
	Parts          []TusPart
	TailKey        string // "" when no tail is stored
	TailSize       int64
	SHA256State    []byte // the digest of the first Offset bytes (encoding.BinaryMarshaler)
	Completed      bool
	CreatedAt      time.Time
	ExpiresAt      time.Time
	// Held says a running request held its lease when it was read (GetUpload).
	Held bool
	// Manifest is the upload's own encrypted manifest entry (an encrypted file
	// request's uploads; app.ParseFileManifest), nil for none.
	Manifest []byte
}

// TusPart is a part of an upload's S3 multipart upload.
type TusPart struct {
	Number int    `json:"n"`
	ETag   string `json:"etag"`
	CRC32C string `json:"crc,omitempty"`
	Size   int64  `json:"size"`
}

// Streamed is what a part sent while it is read came to (ChunkStore's StreamPart): the
// part stored (Size 0 when the body ended or broke off inside it and nothing was
// stored), how many of the body's bytes the buffer holds, and the body's error (io.EOF
// when it ended; nil while it goes on).
type Streamed struct {
	Part    TusPart
	N       int
	BodyErr error
}

// TusOwner is whom an upload belongs to: its package, and the user who created it
// (owner uploads) or the link it was created through (recipient uploads).
type TusOwner struct {
	PackageID     uuid.UUID
	UploadedBy    app.Uploader
	CreatorUserID *int64
	LinkHash      []byte
}

// Owns says whether u belongs to o.
func (o TusOwner) Owns(u TusUpload) bool {
	if u.PackageID != o.PackageID || u.UploadedBy != o.UploadedBy {
		return false
	}
	if o.UploadedBy == app.ByOwner {
		return o.CreatorUserID != nil && u.CreatorUserID != nil && *u.CreatorUserID == *o.CreatorUserID
	}
	return len(o.LinkHash) > 0 && subtle.ConstantTimeCompare(u.LinkHash, o.LinkHash) == 1
}

// OpenUploads counts what a new upload is checked against, in the transaction that
// creates it.
type OpenUploads struct {
	Files     int // the package's files
	InPackage int // the package's unfinished uploads
	ByCreator int // the unfinished uploads of the same token, browser user or link
}

// TusTarget is the package an upload request addresses and who asks.
type TusTarget struct {
	// Owner side: the signed-in user and the package id of the URL.
	User      *app.User
	PackageID uuid.UUID
	// TokenID is the API token of an owner's request (0: a browser session).
	TokenID int64
	// Recipient side: the raw link token of the URL.
	LinkToken string
	Client    app.Client
}

// NewTusUpload is a creation request.
type NewTusUpload struct {
	Length      int64
	Filename    string
	ContentType string
	// Manifest is the metadata entry manifest as sent ("" for none).
	Manifest string
}

// Chunk is the body of a PATCH (or of a POST with creation-with-upload).
type Chunk struct {
	Offset int64
	Body   io.Reader
	// Checksum is the Upload-Checksum header ("sha1 <base64>"), "" for none.
	Checksum string
	// Size is the body's length when the request says it (Content-Length), else -1.
	Size int64
	// Stop ends the reading of Body once what the client already sent is read: a
	// Read blocked on a client gone quiet returns at once, and later ones fail (the
	// transport moves the connection's read deadline). What a PATCH asked to hand its
	// upload over calls. nil: the PATCH stops at its next Read instead.
	Stop func()
}

// ChunkResult is where an upload stands after a chunk.
type ChunkResult struct {
	Upload TusUpload
	File   *app.File // set when the chunk completed the upload
}

// ownerOf is whom the uploads a target may use belong to.
func ownerOf(p app.Package, t TusTarget) TusOwner {
	if t.User != nil {
		uid := t.User.ID
		return TusOwner{PackageID: p.ID, UploadedBy: app.ByOwner, CreatorUserID: &uid}
	}
	return TusOwner{PackageID: p.ID, UploadedBy: app.ByRecipient, LinkHash: p.LinkHash}
}

// tusObjectKey is where a resumable upload's file is stored. It is not under the
// "packages/" prefix whose incomplete multipart uploads the expiry service aborts by
// age: a resumable upload may run longer than that, and its own sweep ends it.
func tusObjectKey(packageID, fileID uuid.UUID) string {
	return tusPrefix + packageID.String() + "/" + fileID.String()
}

// tusPrefix is the prefix of every key of resumable uploads.
const tusPrefix = "tus/"

// tailPrefix is the prefix of an upload's tail objects.
func tailPrefix(u TusUpload) string { return u.ObjectKey + ".tail/" }
