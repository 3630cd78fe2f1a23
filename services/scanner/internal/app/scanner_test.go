package app_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipfile/shipfile/pkg/consumer"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
	"github.com/shipfile/shipfile/services/scanner/internal/app"
)

// fakeStore holds one file and records what was written, as the conditional UPDATE
// does: only a pending file takes a verdict.
type fakeStore struct {
	file     app.File
	gone     bool
	verdicts []app.Verdict
	effects  []app.Effects
}

func (s *fakeStore) File(context.Context, string) (app.File, error) {
	if s.gone {
		return app.File{}, app.ErrNotFound
	}
	return s.file, nil
}

func (s *fakeStore) Record(_ context.Context, _ app.File, v app.Verdict, fx app.Effects) (bool, error) {
	if s.file.Scan != app.ScanPending {
		return false, nil
	}
	s.file.Scan = v.Scan
	s.verdicts = append(s.verdicts, v)
	s.effects = append(s.effects, fx)
	return true, nil
}

func (s *fakeStore) CountFailure(context.Context, string) (int, error) {
	if s.file.Scan != app.ScanPending {
		return 0, nil
	}
	s.file.Attempts++
	return s.file.Attempts, nil
}

type fakeObjects struct {
	opened, quarantined int
}

func (o *fakeObjects) Open(context.Context, string) (io.ReadCloser, error) {
	o.opened++
	return io.NopCloser(strings.NewReader("bytes")), nil
}

func (o *fakeObjects) Quarantine(context.Context, string) error { o.quarantined++; return nil }

// fakeClamd answers with sig or err.
type fakeClamd struct {
	sig string
	err error
}

func (c fakeClamd) Scan(_ context.Context, r io.Reader) (string, error) {
	_, _ = io.Copy(io.Discard, r)
	return c.sig, c.err
}

func uploaded(t *testing.T) []byte {
	t.Helper()
	e := events.NewEnvelope(events.TypePackageFileUploaded, time.Now())
	e.Data = &eventsv1.Envelope_FileUploaded{FileUploaded: &eventsv1.FileUploaded{
		Package: &eventsv1.Package{PackageId: "p1"}, FileId: "f1", Filename: "a.pdf", Size: 5, UploadedBy: "recipient",
	}}
	b, err := events.MarshalEnvelope(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newScanner(t *testing.T, st *fakeStore, obj *fakeObjects, cd app.Clamd) *app.Scanner {
	t.Helper()
	m, err := app.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return app.New(st, obj, cd, m, slog.New(slog.DiscardHandler), app.Options{MaxSize: 100, MaxAttempts: 3, RetryMax: 2 * time.Second})
}

// The effects of an unscannable verdict: clamd's answer as the signature, an audit
// entry saying why, and nothing of an infected file's (no event, no e-mail).
func TestUnscannableEffects(t *testing.T) {
	st := &fakeStore{file: pending()}
	s := newScanner(t, st, &fakeObjects{}, fakeClamd{sig: "Heuristics.Encrypted.Zip"})
	if err := s.Handle(context.Background(), uploaded(t), 1); err != nil {
		t.Fatalf("Handle = %v, want done", err)
	}
	if len(st.verdicts) != 1 || st.verdicts[0].Scan != app.ScanUnscannable || st.verdicts[0].Signature != "Heuristics.Encrypted.Zip" {
		t.Fatalf("verdicts %+v", st.verdicts)
	}
	fx := st.effects[0]
	if fx.Event != nil || fx.NotifyOwner || fx.AuditAction != app.AuditActionUnscannable || !strings.Contains(fx.AuditDetail, "Heuristics.Encrypted.Zip") {
		t.Errorf("effects %+v", fx)
	}
}

func pending() app.File {
	return app.File{ID: "f1", PackageID: "p1", Filename: "a.pdf", Size: 5, ObjectKey: "k", Scan: app.ScanPending,
		Package: events.PackageHead{ID: "p1", Title: "T", RecipientEmail: "bob@example.com", OwnerUserID: 7, Direction: "inbound"}}
}

func TestHandle(t *testing.T) {
	unavailable := fmtErr(app.ErrClamdUnavailable)
	tests := []struct {
		name        string
		file        app.File
		gone        bool
		clamd       fakeClamd
		deliveries  int // the message handled this many times
		action      consumer.Action
		verdicts    []string
		opened      int
		quarantined int
	}{
		{name: "clean", file: pending(), deliveries: 1, action: consumer.Ack, verdicts: []string{"clean"}, opened: 1},
		{name: "infected, once over a redelivery", file: pending(), clamd: fakeClamd{sig: "Eicar-Test-Signature"}, deliveries: 2,
			action: consumer.Ack, verdicts: []string{"infected"}, opened: 1, quarantined: 2},
		{name: "gone", gone: true, file: pending(), deliveries: 1, action: consumer.Ack},
		{name: "already clean", file: func() app.File { f := pending(); f.Scan = app.ScanClean; return f }(), deliveries: 1, action: consumer.Ack},
		// An end-to-end encrypted file is recorded skipped by the gateway at once: the
		// scanner reads nothing of it and records nothing.
		{name: "encrypted: recorded skipped, never read", file: func() app.File { f := pending(); f.Scan = app.ScanSkipped; return f }(),
			deliveries: 1, action: consumer.Ack},
		{name: "too big: unscannable unread", file: func() app.File { f := pending(); f.Size = 101; return f }(), deliveries: 1,
			action: consumer.Ack, verdicts: []string{"unscannable"}},
		// What clamd could not judge is held, not malware: the object stays.
		{name: "over clamd's limits: unscannable, object kept", file: pending(), clamd: fakeClamd{sig: "Heuristics.Limits.Exceeded.MaxScanSize"},
			deliveries: 2, action: consumer.Ack, verdicts: []string{"unscannable"}, opened: 1},
		{name: "encrypted archive: unscannable", file: pending(), clamd: fakeClamd{sig: "Heuristics.Encrypted.Zip"},
			deliveries: 1, action: consumer.Ack, verdicts: []string{"unscannable"}, opened: 1},
		{name: "no verdict in time: unscannable at once", file: pending(), clamd: fakeClamd{err: &app.UnscannableError{Reason: "no verdict within 2m0s"}},
			deliveries: 1, action: consumer.Ack, verdicts: []string{"unscannable"}, opened: 1},
		{name: "clamd down: retried, never counted", file: pending(), clamd: fakeClamd{err: unavailable}, deliveries: 10,
			action: consumer.Nak, opened: 10},
		{name: "clamd error: error after the attempts", file: pending(), clamd: fakeClamd{err: &app.ScanFailedError{Reply: "boom"}}, deliveries: 3,
			action: consumer.Ack, verdicts: []string{"error"}, opened: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &fakeStore{file: tt.file, gone: tt.gone}
			obj := &fakeObjects{}
			s := newScanner(t, st, obj, tt.clamd)
			var d consumer.Decision
			for i := range tt.deliveries {
				d = consumer.Decide(s.Handle(context.Background(), uploaded(t), uint64(i+1)))
			}
			if d.Action != tt.action {
				t.Errorf("last decision %v (%s), want %v", d.Action, d.Reason, tt.action)
			}
			if d.Action == consumer.Nak && (d.Delay <= 0 || d.Delay > 2*time.Second) {
				t.Errorf("retry after %s, want (0, RetryMax]", d.Delay)
			}
			var got []string
			for _, v := range st.verdicts {
				got = append(got, v.Scan)
			}
			if strings.Join(got, ",") != strings.Join(tt.verdicts, ",") {
				t.Errorf("verdicts %v, want %v", got, tt.verdicts)
			}
			if obj.opened != tt.opened || obj.quarantined != tt.quarantined {
				t.Errorf("objects opened %d, quarantined %d; want %d, %d", obj.opened, obj.quarantined, tt.opened, tt.quarantined)
			}
		})
	}
}

func fmtErr(err error) error { return errors.Join(err, errors.New("dial tcp: connection refused")) }

// The effects of an infected verdict: the event with the package head and the
// signature, the audit entry naming it, the owner's e-mail.
func TestInfectedEffects(t *testing.T) {
	st := &fakeStore{file: pending()}
	s := newScanner(t, st, &fakeObjects{}, fakeClamd{sig: "Eicar-Test-Signature.UNOFFICIAL"})
	if err := s.Handle(context.Background(), uploaded(t), 1); err != nil {
		t.Fatalf("Handle = %v, want done", err)
	}
	if len(st.effects) != 1 {
		t.Fatalf("%d effects", len(st.effects))
	}
	fx := st.effects[0]
	fi := fx.Event.GetFileInfected()
	if fx.Event.GetType() != events.TypePackageFileInfected || fi.GetFileId() != "f1" || fi.GetFilename() != "a.pdf" ||
		fi.GetSignature() != "Eicar-Test-Signature.UNOFFICIAL" || fi.GetPackage().GetOwnerUserId() != 7 || fi.GetPackage().GetTitle() != "T" {
		t.Errorf("event %v", fx.Event)
	}
	if fx.AuditAction != app.AuditActionInfected || !strings.Contains(fx.AuditDetail, "Eicar-Test-Signature") || !fx.NotifyOwner {
		t.Errorf("effects %+v", fx)
	}
	if _, err := events.MarshalEnvelope(fx.Event); err != nil {
		t.Errorf("the event does not marshal: %v", err)
	}
	if !bytes.Contains([]byte(fx.AuditDetail), []byte("a.pdf")) {
		t.Errorf("audit detail %q lacks the file name", fx.AuditDetail)
	}
}

// blockingClamd scans until release is closed.
type blockingClamd struct{ started, release chan struct{} }

func (c blockingClamd) Scan(context.Context, io.Reader) (string, error) {
	c.started <- struct{}{}
	<-c.release
	return "", nil
}

// With its package's file in the one slot, the next file of the package is handed back
// for a moment (a Nak with a short delay, not a failure), and nothing of it is read.
func TestHandleDefersAPackageAtItsShare(t *testing.T) {
	m, err := app.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	cd := blockingClamd{started: make(chan struct{}), release: make(chan struct{})}
	st, obj := &fakeStore{file: pending()}, &fakeObjects{}
	s := app.New(st, obj, cd, m, slog.New(slog.DiscardHandler), app.Options{MaxSize: 100, Workers: 1})
	done := make(chan error, 1)
	go func() { done <- s.Handle(context.Background(), uploaded(t), 1) }()
	<-cd.started
	d := consumer.Decide(s.Handle(context.Background(), uploaded(t), 3))
	if d.Action != consumer.Nak || d.Delay <= 0 || d.Delay > 5*time.Second || d.Reason != "" {
		t.Errorf("second file of the package: %+v, want a Nak after a short delay", d)
	}
	close(cd.release)
	if err := <-done; err != nil {
		t.Fatalf("first file: %v", err)
	}
	if obj.opened != 1 {
		t.Errorf("objects opened %d, want 1 (the deferred file is not read)", obj.opened)
	}
}
