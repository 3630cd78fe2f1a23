package httpapi_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventstest"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/outbox"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// TestEventsInStream runs a package's whole life with the outbox relay publishing to
// the real SHIPFILE_EVENTS stream, then reads the stream back: every change is there,
// once, in order, with its payload; the magic link never is.
func TestEventsInStream(t *testing.T) {
	t.Parallel()
	// The store wakes the relay after each commit; polling alone would take a minute,
	// longer than the test waits.
	var relay atomic.Pointer[outbox.Relay]
	a := newTestAPI(t, defaultConfig(), outboxWake(func() {
		if r := relay.Load(); r != nil {
			r.Wake()
		}
	}))
	owner, token := a.user("owner@example.com", app.RoleRegular)
	js := eventstest.Connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := events.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Second)
	// The test's store writes mail jobs as they are (the service seals them and its relay
	// opens them); a relay without Open would leave them in the outbox.
	plain := func(p []byte) ([]byte, error) { return p, nil }
	relay.Store(outbox.NewRelay(a.pool, js, outbox.Options{PollInterval: time.Minute, Open: plain}))
	go relay.Load().Run(ctx) //nolint:errcheck

	p := a.createPackage(token, map[string]any{"title": "Life", "recipient_email": "r@example.com", "ttl_days": 2})
	id := p["id"].(string)
	base := "/api/v1/packages/" + id
	f1 := a.upload(base+"/files", token, "one.txt", []byte("one")).json(t)
	a.upload(base+"/files", token, "two.txt", []byte("two"))
	fin := a.do("POST", base+"/finalize", token, nil).json(t)
	link := linkToken(t, fin["magic_link"])
	fileURL := "/api/v1/links/" + link + "/files/" + f1["id"].(string)
	a.do("GET", fileURL, "", nil)                          // counted
	a.do("GET", fileURL, "", nil, "Range", "bytes=1-2")    // resumes: not counted
	a.do("HEAD", fileURL, "", nil)                         // probes: not counted
	a.do("GET", "/api/v1/links/"+link+"/archive", "", nil) // counted, no file id
	a.do("POST", base+"/revoke", token, nil)
	a.do("DELETE", base, token, nil)

	want := []string{
		events.TypePackageCreated, events.TypePackageFileUploaded, events.TypePackageFileUploaded,
		events.TypePackageFinalized, events.TypePackageDownloaded, events.TypePackageDownloaded,
		events.TypePackageRevoked, events.TypePackageDeleted,
	}
	cons, err := js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.SubjectPrefix + ">"},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   &start,
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []*eventsv1.Envelope
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			if strings.Contains(string(msg.Data()), link) {
				t.Fatal("the magic link is in SHIPFILE_EVENTS")
			}
			env, err := events.UnmarshalEnvelope(msg.Data())
			if err != nil {
				t.Fatal(err)
			}
			if pkgOf(env).GetPackageId() != id {
				continue // another test's package
			}
			if msg.Headers().Get("Nats-Msg-Id") != env.GetEventId() || msg.Subject() != events.Subject(env.GetType()) {
				t.Fatalf("message %s on %s, Nats-Msg-Id %q", env.GetEventId(), msg.Subject(), msg.Headers().Get("Nats-Msg-Id"))
			}
			got = append(got, env)
		}
		if len(got) < len(want) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	var types []string
	for _, e := range got {
		types = append(types, e.GetType())
	}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Fatalf("events = %v\nwant     %v", types, want)
	}

	created := got[0].GetPackageCreated()
	if created.GetTtlDays() != 2 || created.GetPackage().GetOwnerUserId() != owner.ID || created.GetPackage().GetTitle() != "Life" ||
		created.GetPackage().GetRecipientEmail() != "r@example.com" || created.GetPackage().GetDirection() != "outbound" {
		t.Errorf("created = %v", created)
	}
	if up := got[1].GetFileUploaded(); up.GetFilename() != "one.txt" || up.GetSize() != 3 || up.GetUploadedBy() != "owner" || up.GetFileId() != f1["id"] {
		t.Errorf("file_uploaded = %v", up)
	}
	finalized := got[3].GetPackageFinalized()
	if finalized.GetFileCount() != 2 || finalized.GetExpiresAt().AsTime().Format(time.RFC3339Nano) != fin["expires_at"] {
		t.Errorf("finalized = %v, package expires_at %v", finalized, fin["expires_at"])
	}
	if d := got[4].GetPackageDownloaded(); d.GetFileId() != f1["id"] || d.GetFilename() != "one.txt" {
		t.Errorf("download = %v", d)
	}
	if d := got[5].GetPackageDownloaded(); d.GetFileId() != "" || d.GetFilename() != "Life.zip" {
		t.Errorf("zip download = %v", d)
	}
	if r := got[6].GetPackageRevoked(); r.GetActorUserId() != owner.ID {
		t.Errorf("revoked = %v", r)
	}
	if d := got[7].GetPackageDeleted(); d.GetActorUserId() != owner.ID {
		t.Errorf("deleted = %v", d)
	}
	for i := 1; i < len(got); i++ {
		if got[i].GetEventId() <= got[i-1].GetEventId() {
			t.Errorf("event ids are not increasing UUIDv7s: %s then %s", got[i-1].GetEventId(), got[i].GetEventId())
		}
	}

	// The mail job went to its own queue, and its row, link and all, left the outbox.
	var left int
	err = a.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE subject LIKE 'shipfile.mail.%'`).Scan(&left)
	if err != nil || left != 0 {
		t.Fatalf("mail job rows left in the outbox: %d (%v), want none once published", left, err)
	}
}

// pkgOf returns the package part of any event.
func pkgOf(e *eventsv1.Envelope) *eventsv1.Package {
	switch d := e.GetData().(type) {
	case *eventsv1.Envelope_PackageCreated:
		return d.PackageCreated.GetPackage()
	case *eventsv1.Envelope_PackageFinalized:
		return d.PackageFinalized.GetPackage()
	case *eventsv1.Envelope_FileUploaded:
		return d.FileUploaded.GetPackage()
	case *eventsv1.Envelope_PackageDownloaded:
		return d.PackageDownloaded.GetPackage()
	case *eventsv1.Envelope_PackageRevoked:
		return d.PackageRevoked.GetPackage()
	case *eventsv1.Envelope_PackageDeleted:
		return d.PackageDeleted.GetPackage()
	case *eventsv1.Envelope_PackageExpired:
		return d.PackageExpired.GetPackage()
	}
	return nil
}
