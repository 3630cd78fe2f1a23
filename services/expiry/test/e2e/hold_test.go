package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
	"github.com/shipfile/shipfile/services/expiry/internal/expirytest"
)

// TestLegalHoldThroughTheServices: the real gateway (SHIPFILE_S3_OBJECT_LOCK=true, its
// bucket made with object lock) and expiry service. An admin holds one of two
// finalized packages, each with a file and an image with its preview: the held one's
// objects, the preview's included, get S3's legal hold; both pass their expiry time, and
// expiry takes the other, leaving no version of its objects behind, while the held one
// stays active with its objects; its owner's and an admin's delete answer 409 "on legal
// hold"; a direct S3 delete of an object's version is refused. Once the hold is released
// the S3 hold is lifted and expiry takes the package and every version of its objects;
// the chain verifies.
func TestLegalHoldThroughTheServices(t *testing.T) {
	_, natsURL := servicetest.StartNATS(t)
	m := servicetest.StartMinIO(t)
	bucketName := "hold-" + strings.ToLower(rand.Text()[:12])
	ctx := context.Background()
	ocfg := storage.Config{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey, Bucket: bucketName, ObjectLock: true}
	bucket, err := storage.Open(ctx, ocfg)
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

	gwAddr, gwOps := servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	admin.Base, owner.Base = "http://"+gwAddr, "http://"+gwAddr
	servicetest.StartProcess(t, bins["gateway"], append(common, "SHIPFILE_HTTP_ADDR="+gwAddr, "SHIPFILE_OPS_ADDR="+gwOps, "SHIPFILE_PUBLIC_URL="+owner.Base))
	servicetest.WaitReady(t, gwOps)
	exAddr := servicetest.FreeAddr(t)
	servicetest.StartProcess(t, bins["expiry"], append(common, "SHIPFILE_EXPIRY_ADDR="+exAddr, "SHIPFILE_EXPIRY_INTERVAL=300ms"))
	servicetest.WaitReady(t, exAddr)

	// keys: the file's object, the image's and the image's preview.
	type sent struct {
		id, fileID, photoID string
		keys                []string
	}
	photo := pngImage(t)
	send := func(title string) sent {
		p := owner.Must("POST", "/api/v1/packages", map[string]any{"title": title, "recipient_email": "bob@example.com"}, http.StatusCreated)
		id := p["id"].(string)
		f := owner.Upload("/api/v1/packages/"+id+"/files", "evidence.pdf", []byte("%PDF-1.7 evidence"))
		ph := owner.Upload("/api/v1/packages/"+id+"/files", "scene.png", photo)
		owner.Must("POST", "/api/v1/packages/"+id+"/finalize", nil, http.StatusOK)
		return sent{id: id, fileID: f["id"].(string), photoID: ph["id"].(string)}
	}
	held, free := send("under investigation"), send("routine")
	db := connectDB(t, dbURL)
	for _, p := range []*sent{&held, &free} {
		var key, photoKey, previewKey string
		if err := db.QueryRow(ctx, `SELECT object_key FROM files WHERE id = $1`, p.fileID).Scan(&key); err != nil {
			t.Fatal(err)
		}
		servicetest.WaitFor(t, 20*time.Second, "the image's preview", func() bool {
			err := db.QueryRow(ctx, `SELECT object_key, coalesce(preview_key, '') FROM files WHERE id = $1`, p.photoID).Scan(&photoKey, &previewKey)
			if err != nil {
				t.Fatal(err)
			}
			return previewKey != ""
		})
		p.keys = []string{key, photoKey, previewKey}
	}
	legalHold := func(key string) minio.LegalHoldStatus {
		t.Helper()
		s, err := bucket.Client.GetObjectLegalHold(ctx, bucketName, key, minio.GetObjectLegalHoldOptions{})
		if err != nil || s == nil {
			t.Fatalf("S3 legal hold of %s: %v", key, err)
		}
		return *s
	}

	// noVersions fails unless every version of the objects at keys is gone.
	noVersions := func(what string, keys []string) {
		t.Helper()
		for _, k := range keys {
			if vs, err := bucket.Versions(ctx, k); err != nil || len(vs) != 0 {
				t.Fatalf("%s: %d versions of %s left (%v), want none", what, len(vs), k, err)
			}
		}
	}

	hold := admin.Must("POST", "/api/v1/admin/holds", map[string]any{"package_id": held.id, "reason": "case 7"}, http.StatusCreated)
	for _, k := range held.keys {
		if s := legalHold(k); s != minio.LegalHoldEnabled {
			t.Fatalf("the held package's object %s: S3 legal hold %s", k, s)
		}
	}

	// Both packages' time is up; expiry takes the free one, and passes over the held one.
	if _, err := db.Exec(ctx, `UPDATE packages SET expires_at = now() - interval '1 minute' WHERE id = ANY($1::uuid[])`,
		[]string{held.id, free.id}); err != nil {
		t.Fatal(err)
	}
	objects := func() []string { return expirytest.Objects(t, bucket) }
	anyOf := func(keys []string) bool {
		return slices.ContainsFunc(objects(), func(k string) bool { return slices.Contains(keys, k) })
	}
	servicetest.WaitFor(t, 20*time.Second, "the free package expired and its objects deleted", func() bool {
		return owner.Must("GET", "/api/v1/packages/"+free.id, nil, http.StatusOK)["state"] == "expired" && !anyOf(free.keys)
	})
	noVersions("the expired package", free.keys)
	if p := owner.Must("GET", "/api/v1/packages/"+held.id, nil, http.StatusOK); p["state"] != "active" || p["on_hold"] != true {
		t.Fatalf("the held package past its expiry time: state %v, on_hold %v; want active and held", p["state"], p["on_hold"])
	}
	for _, k := range held.keys {
		if !slices.Contains(objects(), k) {
			t.Fatalf("the held package's object %s is gone: %v", k, objects())
		}
	}
	for _, r := range []struct {
		who    servicetest.Client
		method string
		path   string
	}{
		{owner, "DELETE", "/api/v1/packages/" + held.id},
		{admin, "DELETE", "/api/v1/packages/" + held.id},
	} {
		if status, body := r.who.Call(r.method, r.path, nil); status != http.StatusConflict || body["detail"] != "on legal hold" {
			t.Fatalf("%s %s under the hold: %d %v, want 409 on legal hold", r.method, r.path, status, body)
		}
	}
	for _, k := range held.keys {
		info, err := bucket.Client.StatObject(ctx, bucketName, k, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := bucket.Client.RemoveObject(ctx, bucketName, k, minio.RemoveObjectOptions{VersionID: info.VersionID}); err == nil {
			t.Fatalf("a direct S3 delete of the held object %s's version went through", k)
		}
		if _, err := bucket.Client.StatObject(ctx, bucketName, k, minio.StatObjectOptions{VersionID: info.VersionID}); err != nil {
			t.Fatalf("the held object %s after the refused delete: %v", k, err)
		}
	}

	// Released: the S3 hold is lifted and expiry takes the package.
	admin.Must("POST", fmt.Sprintf("/api/v1/admin/holds/%s/release", hold["id"]), nil, http.StatusOK)
	for _, k := range held.keys {
		if s := legalHold(k); s != minio.LegalHoldDisabled {
			t.Fatalf("the released package's object %s: S3 legal hold %s", k, s)
		}
	}
	servicetest.WaitFor(t, 20*time.Second, "the released package expired and its objects deleted", func() bool {
		return owner.Must("GET", "/api/v1/packages/"+held.id, nil, http.StatusOK)["state"] == "expired" && !anyOf(held.keys)
	})
	noVersions("the released package after its expiry", held.keys)

	actions := map[string]bool{}
	for _, it := range admin.Must("GET", "/api/v1/admin/audit?package_id="+held.id, nil, http.StatusOK)["items"].([]any) {
		actions[it.(map[string]any)["action"].(string)] = true
	}
	for _, a := range []string{"hold.create", "hold.release", "package.expired"} {
		if !actions[a] {
			t.Errorf("no %s entry among the held package's audit entries %v", a, actions)
		}
	}
	if out := shipctl("audit", "verify"); !strings.Contains(out, "audit chain whole") {
		t.Fatalf("shipctl audit verify: %s", out)
	}
}

// pngImage is a small PNG image, enough for a preview.
func pngImage(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 6))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
