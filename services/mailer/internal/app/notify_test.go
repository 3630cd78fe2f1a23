package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/pkg/msgerr"
)

func TestRenderNotification(t *testing.T) {
	base := Notification{ID: 7, PackageID: "0190f0c2-7a8b-7c3d-9e4f-112233445566", Title: "Q3\r\nreport",
		RecipientEmail: "bob@example.com", RecipientName: "Bob\nBuilder", OwnerEmail: "alice@example.com", OwnerName: "Alice"}
	link := "https://files.example.com/packages/" + base.PackageID

	d := base
	d.Kind = NotifyDownloaded
	e, err := RenderNotification(d, "https://files.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if e.Subject != "Bob Builder downloaded Q3 report" || e.To.Address != "alice@example.com" || e.To.Name != "Alice" {
		t.Fatalf("downloaded: %q to %v", e.Subject, e.To)
	}
	if !strings.Contains(e.Text, link) || !strings.Contains(e.HTML, `href="`+link+`"`) {
		t.Fatalf("no link to the package page:\n%s", e.Text)
	}

	u := base
	u.Kind, u.RecipientName = NotifyUploads, ""
	u.Files = []NotifiedFile{{Name: "a<b>.pdf", Size: 1536}, {Name: "c.txt", Size: 12}}
	e, err = RenderNotification(u, "https://files.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if e.Subject != "bob@example.com uploaded 2 files to Q3 report" {
		t.Fatalf("uploads subject %q", e.Subject)
	}
	for _, want := range []string{"- a<b>.pdf (1.5 KiB)", "- c.txt (12 B)"} {
		if !strings.Contains(e.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, e.Text)
		}
	}
	if strings.Contains(e.HTML, "a<b>") || !strings.Contains(e.HTML, "a&lt;b&gt;.pdf") {
		t.Error("the HTML part does not escape file names")
	}
	u.Files = u.Files[:1]
	if e, _ := RenderNotification(u, "https://x"); e.Subject != "bob@example.com uploaded 1 file to Q3 report" {
		t.Errorf("one file: %q", e.Subject)
	}
	inf := base
	inf.Kind, inf.Filename, inf.Signature = NotifyInfected, "inv<o>ice.pdf", "Eicar-Test-Signature.UNOFFICIAL"
	e, err = RenderNotification(inf, "https://files.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if e.Subject != "Malware found in Q3 report: inv<o>ice.pdf" {
		t.Errorf("infected subject %q", e.Subject)
	}
	if !strings.Contains(e.Text, "found Eicar-Test-Signature.UNOFFICIAL in the file inv<o>ice.pdf") ||
		!strings.Contains(e.HTML, "inv&lt;o&gt;ice.pdf") || !strings.Contains(e.Text, link) {
		t.Errorf("infected e-mail lacks the signature, the escaped name or the link:\n%s", e.Text)
	}
	bad := base
	bad.Kind, bad.OwnerEmail = NotifyDownloaded, "not an address"
	if _, err := RenderNotification(bad, "https://x"); !errors.Is(err, errUndeliverable) {
		t.Errorf("bad owner address: %v", err)
	}
}

// fakeNotifyStore records what the notifier asked of it.
type fakeNotifyStore struct {
	downloads []string
	uploads   []Upload
	quiet     time.Duration
	due       []Notification
	account   []Notification
	outcomes  []Outcome
}

func (f *fakeNotifyStore) SendDueAccount(_ context.Context, fn func(Notification) Outcome) (bool, error) {
	if len(f.account) == 0 {
		return false, nil
	}
	n := f.account[0]
	f.account = f.account[1:]
	f.outcomes = append(f.outcomes, fn(n))
	return true, nil
}

func (f *fakeNotifyStore) RecordDownload(_ context.Context, id, _ string) error {
	f.downloads = append(f.downloads, id)
	return nil
}

func (f *fakeNotifyStore) RecordUpload(_ context.Context, u Upload, quiet time.Duration) error {
	f.uploads, f.quiet = append(f.uploads, u), quiet
	return nil
}

func (f *fakeNotifyStore) CloseDueBursts(context.Context) error { return nil }

func (f *fakeNotifyStore) SendDue(_ context.Context, fn func(Notification) Outcome) (bool, error) {
	if len(f.due) == 0 {
		return false, nil
	}
	n := f.due[0]
	f.due = f.due[1:]
	f.outcomes = append(f.outcomes, fn(n))
	return true, nil
}

type fakeSender struct{ err error }

func (s fakeSender) Send(context.Context, Email) (string, error) { return "<id@x>", s.err }

func TestNotifierEvents(t *testing.T) {
	store := &fakeNotifyStore{}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	n := NewNotifier(store, fakeSender{}, m, slog.New(slog.NewTextHandler(io.Discard, nil)), NotifierOptions{Quiet: 3 * time.Second})
	event := func(fill func(e *eventsv1.Envelope)) []byte {
		e := events.NewEnvelope(events.TypePackageDownloaded, time.Now())
		fill(e)
		b, err := events.MarshalEnvelope(e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pkg := func(dir string) *eventsv1.Package {
		return &eventsv1.Package{PackageId: "0190f0c2-7a8b-7c3d-9e4f-112233445566", Direction: dir, Title: "T", RecipientEmail: "r@x.org", OwnerUserId: 1}
	}
	download := event(func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_PackageDownloaded{PackageDownloaded: &eventsv1.PackageDownloaded{Package: pkg("outbound"), FileId: "f", Filename: "a"}}
	})
	inboundDownload := event(func(e *eventsv1.Envelope) {
		e.Data = &eventsv1.Envelope_PackageDownloaded{PackageDownloaded: &eventsv1.PackageDownloaded{Package: pkg("inbound"), FileId: "f", Filename: "a"}}
	})
	upload := event(func(e *eventsv1.Envelope) {
		e.Type = events.TypePackageFileUploaded
		e.OccurredAt = timestamppb.New(time.Unix(1700000000, 0))
		e.Data = &eventsv1.Envelope_FileUploaded{FileUploaded: &eventsv1.FileUploaded{Package: pkg("inbound"), FileId: "f1", Filename: "x.pdf", Size: 9, UploadedBy: "recipient"}}
	})
	ownerUpload := event(func(e *eventsv1.Envelope) {
		e.Type = events.TypePackageFileUploaded
		e.Data = &eventsv1.Envelope_FileUploaded{FileUploaded: &eventsv1.FileUploaded{Package: pkg("inbound"), FileId: "f2", Filename: "y", Size: 1, UploadedBy: "owner"}}
	})
	for _, c := range []struct {
		name   string
		data   []byte
		poison bool // else done (nil)
	}{
		{"outbound download", download, false},
		{"inbound download", inboundDownload, false},
		{"recipient upload", upload, false},
		{"owner upload", ownerUpload, false},
		{"garbage", []byte("not protobuf"), true},
	} {
		if err := n.HandleEvent(context.Background(), c.data, 1); (err != nil) != c.poison || (c.poison && !msgerr.IsPoison(err)) {
			t.Errorf("%s: %v, want poison %v", c.name, err, c.poison)
		}
	}
	if len(store.downloads) != 1 || len(store.uploads) != 1 || store.uploads[0].Filename != "x.pdf" || store.quiet != 3*time.Second ||
		!store.uploads[0].At.Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("recorded downloads %v, uploads %v", store.downloads, store.uploads)
	}

	// Sending: off → dropped; sent → audited; a transient failure → pending with the schedule's wait.
	store.due = []Notification{
		{ID: 1, Kind: NotifyDownloaded, NotifyOwner: false, OwnerEmail: "o@x.org"},
		{ID: 2, Kind: NotifyDownloaded, NotifyOwner: true, OwnerEmail: "o@x.org", Title: "T"},
	}
	n.Tick(context.Background(), context.Background())
	if store.outcomes[0].State != NotifyDropped || store.outcomes[1].State != StateSent || store.outcomes[1].AuditAction != ActionSent {
		t.Fatalf("outcomes %+v", store.outcomes)
	}
	n = NewNotifier(store, fakeSender{err: errors.New("connection refused")}, m, slog.New(slog.DiscardHandler), NotifierOptions{Schedule: []time.Duration{time.Minute}})
	store.due, store.outcomes = []Notification{{ID: 3, Kind: NotifyDownloaded, NotifyOwner: true, OwnerEmail: "o@x.org"}, {ID: 4, Attempts: 1, Kind: NotifyDownloaded, NotifyOwner: true, OwnerEmail: "o@x.org"}}, nil
	n.Tick(context.Background(), context.Background())
	if o := store.outcomes[0]; o.State != StatePending || o.RetryIn < 54*time.Second || o.RetryIn > 66*time.Second || !o.Attempted {
		t.Fatalf("transient failure: %+v", o)
	}
	if o := store.outcomes[1]; o.State != StateFailed || o.AuditAction != ActionFailed {
		t.Fatalf("out of retries: %+v", o)
	}
}
