// Package audit is the audit log as a hash chain: the canonical form of an entry, its
// hash, the verification of a chain (from the database or an export) and the export's
// line formats. docs/SECURITY.md ("The audit chain") says what the chain proves.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// GenesisHash is the prev_hash of the first entry of a chain nothing was removed from.
var GenesisHash = strings.Repeat("0", 64)

// TimeLayout is how an entry's created_at is written in its canonical form and in
// exports: UTC, microseconds.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// Entry is one chained audit entry.
type Entry struct {
	Seq         int64
	CreatedAt   time.Time
	Actor       string
	ActorUserID *int64
	Action      string
	PackageID   *uuid.UUID
	FileID      *uuid.UUID
	RecipientID *uuid.UUID
	IP          string
	UserAgent   string
	Detail      string
	PrevHash    string
	Hash        string
}

// Canonical is the entry's canonical JSON, the bytes its hash covers with prev_hash:
// the keys in a fixed order, no spaces, numbers in decimal, null for what is absent,
// created_at in UTC with six fractional digits, strings escaped as PostgreSQL's to_json
// escapes them. The database's audit_canonical (migration 00033) writes the same bytes.
func Canonical(e Entry) []byte {
	b := make([]byte, 0, 256+len(e.UserAgent)+len(e.Detail))
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"created_at":"`...)
	b = e.CreatedAt.UTC().AppendFormat(b, TimeLayout)
	b = append(b, `","actor":`...)
	b = appendString(b, e.Actor)
	b = append(b, `,"actor_user_id":`...)
	if e.ActorUserID == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *e.ActorUserID, 10)
	}
	b = append(b, `,"action":`...)
	b = appendString(b, e.Action)
	b = append(b, `,"package_id":`...)
	b = appendUUID(b, e.PackageID)
	b = append(b, `,"file_id":`...)
	b = appendUUID(b, e.FileID)
	b = append(b, `,"recipient_id":`...)
	b = appendUUID(b, e.RecipientID)
	b = append(b, `,"ip":`...)
	b = appendString(b, e.IP)
	b = append(b, `,"user_agent":`...)
	b = appendString(b, e.UserAgent)
	b = append(b, `,"detail":`...)
	b = appendString(b, e.Detail)
	return append(b, '}')
}

// Hash is the hash of e linked to prevHash: hex(SHA-256(Canonical(e) || prevHash)).
func Hash(e Entry, prevHash string) string {
	h := sha256.New()
	h.Write(Canonical(e))
	h.Write([]byte(prevHash))
	return hex.EncodeToString(h.Sum(nil))
}

func appendUUID(b []byte, id *uuid.UUID) []byte {
	if id == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = append(b, id.String()...)
	return append(b, '"')
}

const lowerHex = "0123456789abcdef"

// appendString writes s as a JSON string the way PostgreSQL's escape_json does: \" \\
// \b \f \n \r \t, the other characters below U+0020 as \u00xx, everything else as it
// is (PostgreSQL text is valid UTF-8; an invalid byte here is written as U+FFFD, which
// no stored entry holds).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xf])
			} else {
				b = append(b, c)
			}
		}
		i++
	}
	return append(b, '"')
}
