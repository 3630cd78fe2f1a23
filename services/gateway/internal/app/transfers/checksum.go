package transfers

import (
	"crypto/sha1" //nolint:gosec // tus checksum extension algorithm, not used for security
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"hash"
	"strings"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// checksum is a chunk's Upload-Checksum being verified.
type checksum struct {
	h    hash.Hash
	want []byte
}

func (c *checksum) matches() bool { return subtle.ConstantTimeCompare(c.h.Sum(nil), c.want) == 1 }

// TusChecksumAlgorithms are the algorithms of the checksum extension.
const TusChecksumAlgorithms = "sha1,sha256"

// parseChecksum reads an Upload-Checksum header: "<algorithm> <base64 digest>".
func parseChecksum(header string) (*checksum, error) {
	if header == "" {
		return nil, nil
	}
	alg, enc, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok {
		return nil, &app.Error{Kind: app.KindBadRequest, Detail: "Upload-Checksum must be \"<algorithm> <base64 digest>\""}
	}
	want, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return nil, &app.Error{Kind: app.KindBadRequest, Detail: "Upload-Checksum's digest is not base64"}
	}
	var h hash.Hash
	switch strings.ToLower(alg) {
	case "sha1":
		h = sha1.New() //nolint:gosec // what the client asked for
	case "sha256":
		h = sha256.New()
	default:
		return nil, &app.Error{Kind: app.KindBadRequest, Detail: "Upload-Checksum algorithm must be one of " + TusChecksumAlgorithms}
	}
	if len(want) != h.Size() {
		return nil, &app.Error{Kind: app.KindBadRequest, Detail: "Upload-Checksum's digest has the wrong length"}
	}
	return &checksum{h: h, want: want}, nil
}
