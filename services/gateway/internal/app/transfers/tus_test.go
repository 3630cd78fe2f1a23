package transfers

import (
	"crypto/sha1" //nolint:gosec // the tus checksum extension's algorithm
	"crypto/sha256"
	"encoding"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/packages"
)

func TestParseChecksum(t *testing.T) {
	chunk := []byte("chunk")
	s1, s256 := sha1.Sum(chunk), sha256.Sum256(chunk) //nolint:gosec // tus checksum
	for _, tc := range []struct {
		name, header string
		ok, matches  bool
	}{
		{"none", "", true, false},
		{"sha1", "sha1 " + base64.StdEncoding.EncodeToString(s1[:]), true, true},
		{"sha256", "sha256 " + base64.StdEncoding.EncodeToString(s256[:]), true, true},
		{"algorithm in capitals", "SHA256 " + base64.StdEncoding.EncodeToString(s256[:]), true, true},
		{"wrong digest", "sha256 " + base64.StdEncoding.EncodeToString(make([]byte, 32)), true, false},
		{"unknown algorithm", "md5 AAAAAAAAAAAAAAAAAAAAAA==", false, false},
		{"no digest", "sha1", false, false},
		{"not base64", "sha1 !!!", false, false},
		{"wrong length", "sha256 " + base64.StdEncoding.EncodeToString(s1[:]), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseChecksum(tc.header)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if err != nil {
				if app.KindOf(err) != app.KindBadRequest {
					t.Fatalf("kind = %v, want bad request", app.KindOf(err))
				}
				return
			}
			if c == nil {
				if tc.header != "" {
					t.Fatal("no checksum parsed")
				}
				return
			}
			c.h.Write(chunk)
			if c.matches() != tc.matches {
				t.Fatalf("matches = %v, want %v", c.matches(), tc.matches)
			}
		})
	}
}

// TestDigestState: the SHA-256 state saved between PATCHes continues to the same sum
// as hashing the whole file at once.
func TestDigestState(t *testing.T) {
	whole := sha256.Sum256([]byte("hello, resumable world"))
	h := sha256.New()
	h.Write([]byte("hello, "))
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r, err := restoreDigest(state)
	if err != nil {
		t.Fatal(err)
	}
	r.Write([]byte("resumable world"))
	if string(r.Sum(nil)) != string(whole[:]) {
		t.Fatal("the restored digest differs")
	}
	if _, err := restoreDigest([]byte("garbage")); err == nil {
		t.Fatal("a garbage state restored")
	}
}

// TestCheckOpen: unfinished uploads count toward the package's file limit (409), and a
// creator has at most MaxOpen unfinished at once (429 with Retry-After); 0 is no limit.
func TestCheckOpen(t *testing.T) {
	r := &Resumable{p: packages.NewPackages(nil, nil, app.Limits{MaxFiles: 5}, ""), cfg: TusConfig{MaxOpen: 2}}
	unlimited := &Resumable{p: packages.NewPackages(nil, nil, app.Limits{MaxFiles: 5}, "")}
	for _, tc := range []struct {
		name string
		r    *Resumable
		o    OpenUploads
		want app.Kind
	}{
		{"room", r, OpenUploads{Files: 2, InPackage: 1, ByCreator: 1}, -1},
		{"files and unfinished reach the limit", r, OpenUploads{Files: 3, InPackage: 2}, app.KindConflict},
		{"unfinished alone reach the limit", r, OpenUploads{InPackage: 5}, app.KindConflict},
		{"creator at MaxOpen", r, OpenUploads{ByCreator: 2}, app.KindTooMany},
		{"no MaxOpen", unlimited, OpenUploads{ByCreator: 1000}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.checkOpen(tc.o)
			if tc.want < 0 {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			var ae *app.Error
			if !errors.As(err, &ae) || ae.Kind != tc.want {
				t.Fatalf("err = %v, want kind %v", err, tc.want)
			}
			if ae.Kind == app.KindTooMany && ae.RetryAfter <= 0 {
				t.Fatal("429 without a Retry-After")
			}
		})
	}
}

// TestTusOwnerOwns: an upload belongs to its package and its creator (a user) or link.
func TestTusOwnerOwns(t *testing.T) {
	pkg, other := uuid.New(), uuid.New()
	uid, uid2 := int64(7), int64(8)
	own := TusUpload{PackageID: pkg, UploadedBy: app.ByOwner, CreatorUserID: &uid}
	rcp := TusUpload{PackageID: pkg, UploadedBy: app.ByRecipient, LinkHash: []byte("hash-1")}
	for _, tc := range []struct {
		name string
		who  TusOwner
		u    TusUpload
		want bool
	}{
		{"creator", TusOwner{PackageID: pkg, UploadedBy: app.ByOwner, CreatorUserID: &uid}, own, true},
		{"another user", TusOwner{PackageID: pkg, UploadedBy: app.ByOwner, CreatorUserID: &uid2}, own, false},
		{"another package", TusOwner{PackageID: other, UploadedBy: app.ByOwner, CreatorUserID: &uid}, own, false},
		{"a link on an owner's upload", TusOwner{PackageID: pkg, UploadedBy: app.ByRecipient, LinkHash: []byte("hash-1")}, own, false},
		{"its link", TusOwner{PackageID: pkg, UploadedBy: app.ByRecipient, LinkHash: []byte("hash-1")}, rcp, true},
		{"another link", TusOwner{PackageID: pkg, UploadedBy: app.ByRecipient, LinkHash: []byte("hash-2")}, rcp, false},
		{"no link", TusOwner{PackageID: pkg, UploadedBy: app.ByRecipient}, TusUpload{PackageID: pkg, UploadedBy: app.ByRecipient}, false},
		{"the owner on a recipient's upload", TusOwner{PackageID: pkg, UploadedBy: app.ByOwner, CreatorUserID: &uid}, rcp, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.who.Owns(tc.u); got != tc.want {
				t.Fatalf("Owns = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLeaseHolds: a PATCH writes only on a lease it is sure of: a lost lease stops it,
// and once the lease may have lapsed it renews first (a failed renewal then loses it).
func TestLeaseHolds(t *testing.T) {
	stopped := 0
	l := newLease(time.Hour, func() { stopped++ })
	renewals := 0
	var renewErr error
	l.renew = func() (bool, error) { renewals++; return false, renewErr }
	l.renewed(time.Now())
	if err := l.holds(); err != nil || renewals != 0 {
		t.Fatalf("a fresh lease: %v, %d renewals", err, renewals)
	}
	l.renewed(time.Now().Add(-2 * time.Hour)) // the renewals are late
	if err := l.holds(); err != nil || renewals != 1 {
		t.Fatalf("a late lease renewed: %v, %d renewals", err, renewals)
	}
	l.renewed(time.Now().Add(-2 * time.Hour))
	renewErr = errors.New("database down")
	if err := l.holds(); err == nil || stopped != 1 {
		t.Fatalf("a late lease whose renewal fails: %v, stopped %d", err, stopped)
	}

	l = newLease(time.Hour, nil)
	l.renew = func() (bool, error) { return false, ErrUploadLocked }
	l.renewed(time.Now())
	l.renewNow(false)
	if err := l.holds(); err != errLeaseLost {
		t.Fatalf("a lease found gone: %v", err)
	}
	l = newLease(time.Hour, nil)
	l.renew = func() (bool, error) { return true, nil }
	l.renewed(time.Now())
	l.renewNow(false)
	if err := l.interrupted(); err != errHandedOver {
		t.Fatalf("a lease asked for: %v", err)
	}
}
