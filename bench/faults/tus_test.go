//go:build faults

package faults

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestKillGatewayMidTusPatch: SIGKILL the gateway while a tus PATCH streams a file
// through it. Once it is back, HEAD says how far the upload got (at least what was
// saved before the kill), a PATCH from there completes it, and the file has the right sha256 with no
// multipart upload, part or tail object left behind.
func TestKillGatewayMidTusPatch(t *testing.T) {
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	const part = 5 << 20
	g := s.StartGateway("SHIPFILE_UPLOAD_PART_SIZE="+itoa(part), "SHIPFILE_UPLOAD_LOCK_LEASE=2s")
	db := rig.DB(t, s.DBURL)

	content, err := io.ReadAll(rig.Payload(64<<20, 7))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	pkg := s.API.MustCreatePackage(t, rig.PackageBody("tus killed mid-PATCH")).Id.String()

	tus := func(method, path string, body io.Reader, headers ...string) (*http.Response, error) {
		req, err := http.NewRequest(method, s.API.Base+path, body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+s.Token)
		req.Header.Set("Tus-Resumable", "1.0.0")
		if body != nil {
			req.Header.Set("Content-Type", "application/offset+octet-stream")
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := s.API.HTTP.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, nil
	}
	resp, err := tus("POST", "/api/v1/packages/"+pkg+"/uploads", nil, "Upload-Length", itoa(len(content)),
		"Upload-Metadata", "filename "+base64.StdEncoding.EncodeToString([]byte("big.bin")))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %v %v", resp, err)
	}
	url := resp.Header.Get("Location")
	// While the PATCH runs its progress is read from the database: a HEAD would ask the
	// PATCH to let go (the tus hand-over), so it would not be running when the gateway
	// is killed.
	saved := func() int {
		var n int64
		if err := db.QueryRow(context.Background(), `SELECT "offset" FROM tus_uploads WHERE id = $1`, url[strings.LastIndex(url, "/")+1:]).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	offset := func() (int, int) {
		resp, err := tus("HEAD", url, nil)
		if err != nil {
			return -1, 0
		}
		n, _ := strconv.Atoi(resp.Header.Get("Upload-Offset"))
		return n, resp.StatusCode
	}

	done := make(chan error, 1)
	go func() {
		// 64 MiB at 8 MiB/s: eight seconds, of which the kill takes the middle.
		_, err := tus("PATCH", url, rig.Throttle(bytes.NewReader(content), 8<<20), "Upload-Offset", "0")
		done <- err
	}()
	servicetest.WaitFor(t, 20*time.Second, "the upload to store three parts", func() bool {
		return saved() >= 3*part
	})
	before := saved()
	time.Sleep(700 * time.Millisecond)
	g.Kill()
	killedAt := time.Now()
	record(t, "PATCH answer when the gateway was killed", describe(rig.Answer{}, <-done))
	record(t, "offset saved before the kill (MiB)", before>>20)

	g.Start()
	g.WaitReady(60 * time.Second)
	var after int
	servicetest.WaitFor(t, 30*time.Second, "HEAD to answer after the restart", func() bool {
		n, status := offset()
		after = n
		return status == http.StatusOK
	})
	record(t, "offset after the restart (MiB)", after>>20)
	if after < before || after%part != 0 && after != len(content) {
		t.Errorf("offset after the restart = %d, before the kill %d", after, before)
	}
	// The killed PATCH's lease lapses by itself (SHIPFILE_UPLOAD_LOCK_LEASE): a killed
	// holder cannot be asked to let go. Until then a PATCH waits (SHIPFILE_UPLOAD_LOCK_WAIT),
	// then is told 423 and retries, as tus clients do.
	var status int
	servicetest.WaitFor(t, 30*time.Second, "the rest of the upload to be accepted", func() bool {
		resp, err := tus("PATCH", url, bytes.NewReader(content[after:]), "Upload-Offset", itoa(after))
		if err != nil {
			return false
		}
		status = resp.StatusCode
		if status == http.StatusNoContent && resp.Header.Get("Shipfile-File-Id") == "" {
			t.Fatalf("the completing PATCH has no Shipfile-File-Id")
		}
		return status == http.StatusNoContent
	})
	record(t, "seconds from the kill to the completed upload", time.Since(killedAt).Round(100*time.Millisecond).Seconds())

	var sha string
	if err := db.QueryRow(context.Background(), `SELECT sha256 FROM files WHERE package_id = $1`, pkg).Scan(&sha); err != nil {
		t.Fatal(err)
	}
	if sha != hex.EncodeToString(sum[:]) {
		t.Errorf("the file's sha256 = %s, want %x", sha, sum)
	}
	objects, stale := s.ObjectKeys(), s.IncompleteUploads()
	record(t, "objects after completion (the file)", len(objects))
	record(t, "incomplete multipart uploads after completion", len(stale))
	if len(objects) != 1 || len(stale) != 0 {
		t.Errorf("left behind: objects %v, incomplete uploads %v", objects, stale)
	}
}
