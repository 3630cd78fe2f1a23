package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
)

// TestLegalHoldCoversNewUploads: with SHIPFILE_S3_OBJECT_LOCK=true, an object written
// after a hold was placed gets S3's legal hold when the hold covers its package: a file
// uploaded (multipart and tus) to a held draft and the preview of an image uploaded
// there, and a file uploaded to a package a held user creates afterwards. A package nobody holds gets none, and releasing the holds
// lifts them from the new objects too.
func TestLegalHoldCoversNewUploads(t *testing.T) {
	_, natsURL := servicetest.StartNATS(t)
	m := servicetest.StartMinIO(t)
	bucketName := "holdnew-" + strings.ToLower(rand.Text()[:12])
	ctx := context.Background()
	bucket, err := storage.Open(ctx, storage.Config{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey, Bucket: bucketName, ObjectLock: true})
	if err != nil {
		t.Fatal(err)
	}
	dbURL := pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	common := append(s3Env(m, bucketName), "SHIPFILE_S3_OBJECT_LOCK=true", "SHIPFILE_DATABASE_URL="+dbURL, "SHIPFILE_NATS_URL="+natsURL,
		"SHIPFILE_LOG_LEVEL=warn", servicetest.SecretKeyEnv)
	shipctl := func(args ...string) string { return servicetest.RunCommand(t, bins["shipctl"], common, args...) }
	tokenOf := func(email, role string) string {
		shipctl("user", "create", "--email", email, "--name", email, "--role", role)
		lines := strings.Split(strings.TrimSpace(shipctl("token", "create", "--email", email, "--name", "e2e")), "\n")
		return lines[len(lines)-1]
	}
	admin := servicetest.Client{T: t, Token: tokenOf("admin@example.com", "admin")}
	owner := servicetest.Client{T: t, Token: tokenOf("owner@example.com", "regular")}
	suspect := servicetest.Client{T: t, Token: tokenOf("suspect@example.com", "regular")}
	gwAddr, gwOps := servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	admin.Base, owner.Base, suspect.Base = "http://"+gwAddr, "http://"+gwAddr, "http://"+gwAddr
	servicetest.StartProcess(t, bins["gateway"], append(common, "SHIPFILE_HTTP_ADDR="+gwAddr, "SHIPFILE_OPS_ADDR="+gwOps, "SHIPFILE_PUBLIC_URL="+owner.Base))
	servicetest.WaitReady(t, gwOps)
	db := connectDB(t, dbURL)

	draft := func(c servicetest.Client, title string) string {
		return c.Must("POST", "/api/v1/packages", map[string]any{"title": title, "recipient_email": "bob@example.com"}, http.StatusCreated)["id"].(string)
	}
	keyOf := func(fileID string) string {
		t.Helper()
		var key string
		if err := db.QueryRow(ctx, `SELECT object_key FROM files WHERE id = $1`, fileID).Scan(&key); err != nil {
			t.Fatal(err)
		}
		return key
	}
	multipart := func(c servicetest.Client, pkg, name string) string {
		return keyOf(c.Upload("/api/v1/packages/"+pkg+"/files", name, []byte("%PDF-1.7 "+name))["id"].(string))
	}
	// tus uploads content in one PATCH and returns the object key of the file it made.
	tus := func(c servicetest.Client, pkg, name string) string {
		t.Helper()
		content := []byte("%PDF-1.7 " + name)
		do := func(method, url string, body []byte, headers ...string) *http.Response {
			t.Helper()
			req, err := http.NewRequest(method, url, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Tus-Resumable", "1.0.0")
			req.Header.Set("Authorization", "Bearer "+c.Token)
			for i := 0; i+1 < len(headers); i += 2 {
				req.Header.Set(headers[i], headers[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp
		}
		created := do("POST", c.Base+"/api/v1/packages/"+pkg+"/uploads", nil, "Upload-Length", strconv.Itoa(len(content)),
			"Upload-Metadata", "filename "+base64.StdEncoding.EncodeToString([]byte(name)))
		if created.StatusCode != http.StatusCreated {
			t.Fatalf("tus creation: %d", created.StatusCode)
		}
		loc := created.Header.Get("Location")
		if !strings.HasPrefix(loc, "http") {
			loc = c.Base + loc
		}
		if r := do("PATCH", loc, content, "Upload-Offset", "0", "Content-Type", "application/offset+octet-stream"); r.StatusCode != http.StatusNoContent {
			t.Fatalf("tus PATCH: %d", r.StatusCode)
		}
		var key string
		if err := db.QueryRow(ctx, `SELECT object_key FROM files WHERE package_id = $1 AND filename = $2`, pkg, name).Scan(&key); err != nil {
			t.Fatalf("the tus upload's file: %v", err)
		}
		return key
	}
	legalHold := func(key string) minio.LegalHoldStatus {
		t.Helper()
		s, err := bucket.Client.GetObjectLegalHold(ctx, bucketName, key, minio.GetObjectLegalHoldOptions{})
		if err != nil || s == nil {
			t.Fatalf("S3 legal hold of %s: %v", key, err)
		}
		return *s
	}
	want := func(what string, keys []string, status minio.LegalHoldStatus) {
		t.Helper()
		for _, k := range keys {
			if s := legalHold(k); s != status {
				t.Errorf("%s (%s): S3 legal hold %s, want %s", what, k, s, status)
			}
		}
	}

	// A draft held, then uploaded to.
	heldPkg := draft(owner, "held draft")
	pkgHold := admin.Must("POST", "/api/v1/admin/holds", map[string]any{"package_id": heldPkg, "reason": "case 8"}, http.StatusCreated)
	heldKeys := []string{multipart(owner, heldPkg, "after-hold.pdf"), tus(owner, heldPkg, "after-hold-tus.pdf")}
	// An image uploaded to the held draft: its preview, made while the hold lasts, is
	// held as well.
	photoID := owner.Upload("/api/v1/packages/"+heldPkg+"/files", "after-hold.png", pngImage(t))["id"].(string)
	var photoKey, previewKey string
	servicetest.WaitFor(t, 20*time.Second, "the held image's preview", func() bool {
		err := db.QueryRow(ctx, `SELECT object_key, coalesce(preview_key, '') FROM files WHERE id = $1`, photoID).Scan(&photoKey, &previewKey)
		if err != nil {
			t.Fatal(err)
		}
		return previewKey != ""
	})
	heldKeys = append(heldKeys, photoKey, previewKey)
	// A user held, who then creates a package and uploads to it.
	var suspectID int64
	if err := db.QueryRow(ctx, `SELECT id FROM users WHERE email = 'suspect@example.com'`).Scan(&suspectID); err != nil {
		t.Fatal(err)
	}
	userHold := admin.Must("POST", "/api/v1/admin/holds", map[string]any{"user_id": suspectID, "reason": "case 9"}, http.StatusCreated)
	newPkg := draft(suspect, "created while held")
	if p := suspect.Must("GET", "/api/v1/packages/"+newPkg, nil, http.StatusOK); p["on_hold"] != true {
		t.Fatalf("a package created by a held user: on_hold %v", p["on_hold"])
	}
	userKeys := []string{multipart(suspect, newPkg, "new.pdf"), tus(suspect, newPkg, "new-tus.pdf")}
	// Nobody holds this one.
	freePkg := draft(owner, "free draft")
	freeKeys := []string{multipart(owner, freePkg, "free.pdf"), tus(owner, freePkg, "free-tus.pdf")}

	want("a file uploaded to a held package", heldKeys, minio.LegalHoldEnabled)
	want("a file uploaded to a new package of a held user", userKeys, minio.LegalHoldEnabled)
	for _, k := range freeKeys {
		if s, err := bucket.Client.GetObjectLegalHold(ctx, bucketName, k, minio.GetObjectLegalHoldOptions{}); err == nil && s != nil && *s == minio.LegalHoldEnabled {
			t.Errorf("a file of a package nobody holds (%s): S3 legal hold on", k)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// A direct S3 delete of a held new object's version is refused.
	info, err := bucket.Client.StatObject(ctx, bucketName, userKeys[1], minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.Client.RemoveObject(ctx, bucketName, userKeys[1], minio.RemoveObjectOptions{VersionID: info.VersionID}); err == nil {
		t.Fatal("a direct S3 delete of a held new object's version went through")
	}

	for _, h := range []map[string]any{pkgHold, userHold} {
		admin.Must("POST", fmt.Sprintf("/api/v1/admin/holds/%s/release", h["id"]), nil, http.StatusOK)
	}
	want("a held package's new file after the release", heldKeys, minio.LegalHoldDisabled)
	want("a held user's new file after the release", userKeys, minio.LegalHoldDisabled)
}
