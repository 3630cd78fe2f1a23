//go:build faults

package faults

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestKillGatewayMidUploadQuota: a user with a storage quota has a multipart upload and
// a tus upload streaming through the gateway when it is SIGKILLed. Both held bytes of
// the quota (docs/POLICIES.md): the tus upload its whole Upload-Length, the multipart
// upload what it had read. Once each upload's window passes, no reservation is left:
// no quota_holds row, GET /api/v1/me/usage says reserved_bytes 0, and a tus upload of
// the whole quota is accepted.
//
//   - tus: the upload expires SHIPFILE_UPLOAD_RESUME_WINDOW (3 s here) after its last
//     saved part; the restarted gateway's sweep ends it, and its hold with it.
//   - multipart: such an upload cannot be resumed; its hold lives as long as its object
//     key's reservation, which the expiry service's orphan sweep removes once it is
//     SHIPFILE_ORPHAN_GRACE old without a renewal (at least 10 minutes, as a gateway
//     renews the reservation of a running upload every 5). The scenario does not wait
//     that long: it moves the reservation's time back past the grace, as the passing
//     minutes would have.
func TestKillGatewayMidUploadQuota(t *testing.T) {
	const (
		part   = 5 << 20
		size   = 64 << 20  // each upload's file
		quota  = 192 << 20 // both fit, with room to spare
		window = 3 * time.Second
		grace  = 10 * time.Minute
	)
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	g := s.StartGateway("SHIPFILE_UPLOAD_PART_SIZE="+itoa(part), "SHIPFILE_UPLOAD_RESUME_WINDOW="+window.String(),
		"SHIPFILE_UPLOAD_SWEEP_INTERVAL=1s", "SHIPFILE_UPLOAD_LOCK_LEASE=2s")
	db := rig.DB(t, s.DBURL)
	ctx := context.Background()

	// The user and their quota: a group of their own.
	user := rig.NewClient(s.API.Base, s.UserToken("quota@example.com"))
	me := user.Must(t, "GET", "/api/v1/me", nil, http.StatusOK)
	group := s.API.Must(t, "POST", "/api/v1/admin/groups", map[string]any{
		"name": "quota-faults", "policy": map[string]any{"storage_quota_bytes": quota},
	}, http.StatusCreated)
	s.API.Must(t, "PUT", "/api/v1/admin/groups/"+itoa(int64(group.JSON["id"].(float64)))+"/members/"+itoa(int64(me.JSON["id"].(float64))), nil, http.StatusNoContent)
	usage := func() (reserved, used, quotaBytes int64) {
		a := user.Must(t, "GET", "/api/v1/me/usage", nil, http.StatusOK)
		q, _ := a.JSON["quota_bytes"].(float64)
		return int64(a.JSON["reserved_bytes"].(float64)), int64(a.JSON["used_bytes"].(float64)), int64(q)
	}
	if _, _, q := usage(); q != quota {
		t.Fatalf("quota_bytes = %d, want %d", q, quota)
	}
	holds := func(where string) int {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM quota_holds WHERE `+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The multipart upload, 64 MiB at 8 MiB/s.
	multipartPkg := user.MustCreatePackage(t, rig.PackageBody("multipart killed mid-upload")).Id.String()
	type result struct {
		a   rig.Answer
		err error
	}
	multipartDone := make(chan result, 1)
	go func() {
		a, err := user.Upload(ctx, multipartPkg, "multipart.bin", rig.Throttle(rig.Payload(size, 11), 8<<20))
		multipartDone <- result{a, err}
	}()

	// The tus upload, 64 MiB in one PATCH at 8 MiB/s.
	tusPkg := user.MustCreatePackage(t, rig.PackageBody("tus killed mid-PATCH")).Id.String()
	resp, err := tusDo(user, "POST", "/api/v1/packages/"+tusPkg+"/uploads", nil, "Upload-Length", itoa(size),
		"Upload-Metadata", "filename "+base64.StdEncoding.EncodeToString([]byte("tus.bin")))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("tus creation: %v %v", resp, err)
	}
	url := resp.Header.Get("Location")
	uploadID := url[strings.LastIndex(url, "/")+1:]
	tusDone := make(chan result, 1)
	go func() {
		resp, err := tusDo(user, "PATCH", url, rig.Throttle(rig.Payload(size, 12), 8<<20), "Upload-Offset", "0")
		var a rig.Answer
		if resp != nil {
			a.Status = resp.StatusCode
		}
		tusDone <- result{a, err}
	}()

	// Kill the gateway once both have stored parts: the multipart upload a part in
	// MinIO, the tus upload two parts saved.
	servicetest.WaitFor(t, 20*time.Second, "both uploads to store parts", func() bool {
		var offset int64
		if err := db.QueryRow(ctx, `SELECT "offset" FROM tus_uploads WHERE id = $1`, uploadID).Scan(&offset); err != nil {
			t.Fatal(err)
		}
		stored := false
		for _, k := range s.IncompleteUploads() {
			stored = stored || strings.HasPrefix(k, "packages/"+multipartPkg+"/")
		}
		return offset >= 2*part && stored && holds("object_key IS NOT NULL") == 1
	})
	g.Kill()
	killedAt := time.Now()
	for _, up := range []struct {
		name string
		done chan result
	}{{"multipart upload", multipartDone}, {"tus PATCH", tusDone}} {
		name, r := up.name, <-up.done
		record(t, name+" answer when the gateway was killed", describe(r.a, r.err))
		if r.err == nil && r.a.Status < 500 {
			t.Errorf("the %s through a killed gateway got %s", name, r.a)
		}
	}

	g.Start()
	g.WaitReady(60 * time.Second)
	reserved, _, _ := usage()
	record(t, "reserved_bytes after the restart (MiB)", reserved>>20)
	// The tus hold is the whole Upload-Length; the multipart one at least the part it stored.
	if reserved < size+part {
		t.Fatalf("reserved_bytes after the restart = %d, want at least %d: the uploads held nothing the scenario could check", reserved, size+part)
	}

	// tus: the restarted gateway's sweep ends the upload once its window has passed.
	servicetest.WaitFor(t, 30*time.Second, "the tus upload's hold to go", func() bool {
		return holds("tus_upload_id IS NOT NULL") == 0
	})
	record(t, "seconds from the kill to the tus hold's end (resume window 3 s)", time.Since(killedAt).Round(100*time.Millisecond).Seconds())
	var tusRows int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM tus_uploads WHERE id = $1`, uploadID).Scan(&tusRows); err != nil {
		t.Fatal(err)
	}
	if tusRows != 0 {
		t.Errorf("the expired tus upload's row is still there")
	}

	// multipart: the object key's reservation, moved back past the orphan grace, is
	// removed by the expiry service with the hold.
	tag, err := db.Exec(ctx, `UPDATE object_reservations SET reserved_at = reserved_at - make_interval(secs => $1)
		WHERE object_key IN (SELECT object_key FROM quota_holds WHERE object_key IS NOT NULL)`, (grace + time.Minute).Seconds())
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("age the multipart upload's object key reservation: %v, %d rows", err, tag.RowsAffected())
	}
	s.StartService("expiry", "SHIPFILE_EXPIRY_INTERVAL=1s", "SHIPFILE_EXPIRY_STALE_UPLOAD_AGE=1s", "SHIPFILE_ORPHAN_GRACE="+grace.String())
	expiryAt := time.Now()
	servicetest.WaitFor(t, 30*time.Second, "the multipart upload's hold to go", func() bool {
		return holds("true") == 0
	})
	record(t, "seconds from the expiry service's start to the multipart hold's end (its grace passed)", time.Since(expiryAt).Round(100*time.Millisecond).Seconds())
	servicetest.WaitFor(t, 30*time.Second, "the expiry service to abort the stale multipart uploads", func() bool {
		return len(s.IncompleteUploads()) == 0
	})

	reserved, used, _ := usage()
	record(t, "quota_holds rows at the end", holds("true"))
	record(t, "reserved_bytes / used_bytes at the end", itoa(reserved)+" / "+itoa(used))
	if reserved != 0 || used != 0 {
		t.Errorf("at the end reserved_bytes = %d, used_bytes = %d; want 0 and 0", reserved, used)
	}
	if keys := s.ObjectKeys(); len(keys) != 0 {
		t.Errorf("objects left behind: %v", keys)
	}

	// The whole quota is available again: a tus upload of exactly the quota is accepted
	// (and holds it), one byte more is refused.
	resp, err = tusDo(user, "POST", "/api/v1/packages/"+tusPkg+"/uploads", nil, "Upload-Length", itoa(quota+1),
		"Upload-Metadata", "filename "+base64.StdEncoding.EncodeToString([]byte("over.bin")))
	if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a tus upload of the quota and a byte: %v %v, want 413", resp, err)
	}
	resp, err = tusDo(user, "POST", "/api/v1/packages/"+tusPkg+"/uploads", nil, "Upload-Length", itoa(quota),
		"Upload-Metadata", "filename "+base64.StdEncoding.EncodeToString([]byte("whole.bin")))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("a tus upload of the whole quota after the windows passed: %v %v, want 201", resp, err)
	}
	record(t, "tus creation of the whole quota after the windows passed", resp.Status)
	if reserved, _, _ = usage(); reserved != quota {
		t.Errorf("reserved_bytes while the whole quota is held = %d, want %d", reserved, quota)
	}
	if resp, err = tusDo(user, "DELETE", resp.Header.Get("Location"), nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Errorf("tus termination: %v %v", resp, err)
	}
	if reserved, _, _ = usage(); reserved != 0 {
		t.Errorf("reserved_bytes after the termination = %d, want 0", reserved)
	}
}

// tusDo sends a tus request (Tus-Resumable 1.0.0, the client's token) to path, with
// header name and value pairs, and reads the whole answer.
func tusDo(c *rig.Client, method, path string, body io.Reader, headers ...string) (*http.Response, error) {
	if !strings.HasPrefix(path, "http") {
		path = c.Base + path
	}
	req, err := http.NewRequest(method, path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Tus-Resumable", "1.0.0")
	if body != nil {
		req.Header.Set("Content-Type", "application/offset+octet-stream")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}
