package rig

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/pkg/servicetest"
	"github.com/shipfile/shipfile/pkg/storage"
)

// Stack is one shipfile installation for a scenario: a database, a bucket, a NATS
// server (or cluster), an admin user with an API token, and the services the scenario
// starts on them.
type Stack struct {
	t    testing.TB
	Bins Bins
	// DBURL is the scenario's database, migrated by the gateway at its start.
	DBURL string
	// NATSURL is SHIPFILE_NATS_URL (one URL or a comma-separated list).
	NATSURL string
	// S3 is the object store settings, with the scenario's own bucket.
	S3 storage.Config
	// Objects is a minio-go client on that bucket.
	Objects *storage.Store
	// Env is what every service of the stack gets: SHIPFILE_* settings.
	Env []string
	// Token is the admin's raw API token.
	Token string
	// Gateway is the running gateway, once StartGateway was called.
	Gateway *Proc
	// API calls the gateway as the admin.
	API *Client
}

// StackOptions say where a stack's dependencies are.
type StackOptions struct {
	// DBURL is the database to use; empty means a fresh one on the shared server
	// (SHIPFILE_TEST_DATABASE_URL), dropped at the end.
	DBURL string
	// NATSURL is required: a private server, so that the fixed stream and consumer
	// names of the services meet no other system's.
	NATSURL string
	// S3 overrides the object store endpoint and credentials (a private MinIO); the
	// zero value means SHIPFILE_S3_* or the defaults.
	S3 *storage.Config
	// Env is added to every service's environment.
	Env []string
	// LogOutbox keeps a record of every committed outbox row (LogOutbox), for scenarios
	// that check what reached the streams against what the database committed: the
	// relays delete a row once it is published.
	LogOutbox bool
}

// NewStack prepares a stack: database, bucket (emptied and removed at the end) and the
// admin's token (made with shipctl, which also applies the schema). No service runs yet.
func NewStack(t testing.TB, bins Bins, o StackOptions) *Stack {
	t.Helper()
	if o.NATSURL == "" {
		t.Fatal("NewStack: no NATS URL")
	}
	s := &Stack{t: t, Bins: bins, NATSURL: o.NATSURL, DBURL: o.DBURL}
	if s.DBURL == "" {
		// An empty database: shipctl and the gateway apply the migrations themselves.
		s.DBURL = pgtest.New(t, "empty", func(context.Context, string) error { return nil })
	}
	if o.S3 != nil {
		s.S3 = *o.S3
	} else if err := config.Load(&s.S3); err != nil {
		t.Fatal(err)
	}
	s.S3.Bucket = "bench-" + strings.ToLower(rand.Text()[:12])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := storage.Open(ctx, s.S3)
	if err != nil {
		t.Fatalf("MinIO at %s: %v", s.S3.Endpoint, err)
	}
	s.Objects = st
	t.Cleanup(func() { RemoveBucket(st) })
	s.Env = append([]string{
		"SHIPFILE_DATABASE_URL=" + s.DBURL,
		"SHIPFILE_NATS_URL=" + s.NATSURL,
		"SHIPFILE_S3_ENDPOINT=" + s.S3.Endpoint,
		"SHIPFILE_S3_ACCESS_KEY=" + s.S3.AccessKey,
		"SHIPFILE_S3_SECRET_KEY=" + s.S3.SecretKey,
		"SHIPFILE_S3_BUCKET=" + s.S3.Bucket,
		"SHIPFILE_WEBHOOK_ALLOW_PRIVATE=true",
		"SHIPFILE_LOG_LEVEL=warn",
		servicetest.SecretKeyEnv,
	}, o.Env...)

	s.shipctl("user", "create", "--email", "bench@example.com", "--name", "Bench", "--role", "admin")
	out := s.shipctl("token", "create", "--email", "bench@example.com", "--name", "bench")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	s.Token = lines[len(lines)-1]
	if o.LogOutbox {
		LogOutbox(t, s.DBURL)
	}
	return s
}

// UserToken creates a regular user with email (shipctl) and returns an API token of
// theirs: a client of its own, for the limits that count per user.
func (s *Stack) UserToken(email string) string {
	s.t.Helper()
	s.shipctl("user", "create", "--email", email, "--name", email, "--role", "regular")
	out := s.shipctl("token", "create", "--email", email, "--name", "bench")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

func (s *Stack) shipctl(args ...string) string {
	s.t.Helper()
	cmd := exec.Command(s.Bins.Path["shipctl"], args...)
	cmd.Env = append(os.Environ(), s.Env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("shipctl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// StartGateway starts the gateway with the stack's settings plus env, waits until it is
// ready and points API at it. The magic links it mints point at itself.
//
// The hostile-client limits that a benchmark's one client would run into (link
// requests per IP, uploads in flight per token and per gateway, the minimum upload
// rate) are off unless env sets them: the benchmarks measure throughput, and the
// hostile-client scenarios set the limits they test.
func (s *Stack) StartGateway(env ...string) *Proc {
	s.t.Helper()
	off := []string{"SHIPFILE_LINK_RATE=0", "SHIPFILE_UPLOAD_MAX_CONCURRENT=0", "SHIPFILE_UPLOAD_MAX_PER_CLIENT=0", "SHIPFILE_UPLOAD_MIN_RATE=0"}
	g := NewService(s.t, s.Bins, "gateway", append(append(off, s.Env...), env...)...)
	g.Env = append(g.Env, "SHIPFILE_PUBLIC_URL=http://"+g.Addr)
	g.Start()
	g.WaitReady(60 * time.Second)
	s.Gateway = g
	s.API = NewClient("http://"+g.Addr, s.Token)
	return g
}

// StartService starts another service (webhooks, mailer, expiry) with the stack's
// settings plus env and waits until it is ready.
func (s *Stack) StartService(name string, env ...string) *Proc {
	s.t.Helper()
	return StartService(s.t, s.Bins, name, append(append([]string{}, s.Env...), env...)...)
}

// ObjectKeys lists the keys of every object in the stack's bucket.
func (s *Stack) ObjectKeys() []string {
	s.t.Helper()
	var keys []string
	for obj := range s.Objects.Client.ListObjects(context.Background(), s.Objects.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			s.t.Fatalf("list objects: %v", obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

// IncompleteUploads lists the keys of the multipart uploads in the bucket that were
// neither completed nor aborted.
func (s *Stack) IncompleteUploads() []string {
	s.t.Helper()
	var keys []string
	for u := range s.Objects.Client.ListIncompleteUploads(context.Background(), s.Objects.Bucket, "", true) {
		if u.Err != nil {
			s.t.Fatalf("list incomplete uploads: %v", u.Err)
		}
		keys = append(keys, u.Key)
	}
	return keys
}

// RemoveBucket deletes the store's bucket with every object and incomplete upload in it.
// Errors are ignored: it is a clean-up. MinIO deletes a bucket with its objects at once
// when asked to force it, and removes the files in the background, where the next
// group's wait for a quiet machine sees it; removing 100,000 objects one batch at a time
// took the expiry row 86 s past its budget on a slow machine, out of the dispatcher's time.
func RemoveBucket(st *storage.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if st.Client.RemoveBucketWithOptions(ctx, st.Bucket, minio.RemoveBucketOptions{ForceDelete: true}) == nil {
		return
	}
	objs := make(chan minio.ObjectInfo, 1000)
	go func() {
		defer close(objs)
		for obj := range st.Client.ListObjects(ctx, st.Bucket, minio.ListObjectsOptions{Recursive: true}) {
			if obj.Err != nil {
				return
			}
			objs <- obj
		}
	}()
	for range st.Client.RemoveObjects(ctx, st.Bucket, objs, minio.RemoveObjectsOptions{}) {
	}
	for u := range st.Client.ListIncompleteUploads(ctx, st.Bucket, "", true) {
		if u.Err == nil {
			_ = st.Client.RemoveIncompleteUpload(ctx, st.Bucket, u.Key)
		}
	}
	_ = st.Client.RemoveBucket(ctx, st.Bucket)
}
