package events_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventstest"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

func TestSubjects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, got, want string
	}{
		{"event", events.Subject("package.created"), "shipfile.events.package.created"},
		{"mail", events.MailSubject(events.MailKindOutbound), "shipfile.mail.outbound"},
		{"event under stream", events.Subject(events.TypePackageExpired), "shipfile.events.package.expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestNewEventID(t *testing.T) {
	t.Parallel()
	a, b := events.NewEventID(), events.NewEventID()
	for _, s := range []string{a, b} {
		id, err := uuid.Parse(s)
		if err != nil {
			t.Fatalf("NewEventID() = %q: %v", s, err)
		}
		if id.Version() != 7 {
			t.Errorf("NewEventID() = %q: version %d, want 7", s, id.Version())
		}
	}
	if a == b {
		t.Errorf("two ids are equal: %q", a)
	}
	if a > b {
		t.Errorf("UUIDv7 ids do not sort by creation: %q after %q", a, b)
	}
}

func TestEventMessage(t *testing.T) {
	t.Parallel()
	expires := time.Date(2026, 11, 28, 16, 32, 5, 0, time.UTC)
	env := events.NewEnvelope(events.TypePackageCreated, time.Now())
	env.Data = &eventsv1.Envelope_PackageCreated{PackageCreated: &eventsv1.PackageCreated{
		Package:   &eventsv1.Package{PackageId: uuid.NewString(), Title: "Q3", RecipientEmail: "r@example.com", OwnerUserId: 7, Direction: "outbound"},
		TtlDays:   7,
		ExpiresAt: timestamppb.New(expires),
	}}
	m, err := events.EventMessage(env)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != env.GetEventId() || m.Subject != "shipfile.events.package.created" || m.Ephemeral {
		t.Errorf("message = {ID %q, Subject %q, Ephemeral %v}, want {%q, shipfile.events.package.created, false}", m.ID, m.Subject, m.Ephemeral, env.GetEventId())
	}
	back, err := events.UnmarshalEnvelope(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(back, env) {
		t.Errorf("round trip: got %v, want %v", back, env)
	}
	if back.GetVersion() != events.Version {
		t.Errorf("version = %d, want %d", back.GetVersion(), events.Version)
	}
}

func TestMailMessage(t *testing.T) {
	t.Parallel()
	job := &eventsv1.MailJob{
		JobId:          events.NewEventID(),
		Kind:           events.MailKindInbound,
		PackageId:      uuid.NewString(),
		RecipientEmail: "r@example.com",
		MagicLink:      "http://127.0.0.1:8080/p/secret",
	}
	m, err := events.MailMessage(job)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != job.GetJobId() || m.Subject != "shipfile.mail.inbound" || !m.Ephemeral {
		t.Errorf("message = {ID %q, Subject %q, Ephemeral %v}, want {%q, shipfile.mail.inbound, true}", m.ID, m.Subject, m.Ephemeral, job.GetJobId())
	}
	back, err := events.UnmarshalMailJob(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(back, job) {
		t.Errorf("round trip: got %v, want %v", back, job)
	}
}

func TestInvalidMessages(t *testing.T) {
	t.Parallel()
	withData := events.NewEnvelope(events.TypePackageRevoked, time.Now())
	withData.Data = &eventsv1.Envelope_PackageDeleted{PackageDeleted: &eventsv1.PackageDeleted{}}
	tests := []struct {
		name string
		err  func() error
	}{
		{"envelope without id", func() error {
			_, err := events.EventMessage(&eventsv1.Envelope{Type: events.TypePackageCreated})
			return err
		}},
		{"envelope without type", func() error {
			_, err := events.EventMessage(&eventsv1.Envelope{EventId: events.NewEventID()})
			return err
		}},
		{"envelope with wildcard type", func() error {
			_, err := events.EventMessage(events.NewEnvelope("package.>", time.Now()))
			return err
		}},
		{"envelope with empty token", func() error {
			_, err := events.EventMessage(events.NewEnvelope("package..created", time.Now()))
			return err
		}},
		{"type disagrees with data", func() error {
			_, err := events.EventMessage(withData)
			return err
		}},
		{"nil envelope", func() error {
			_, err := events.EventMessage(nil)
			return err
		}},
		{"mail job without id", func() error {
			_, err := events.MailMessage(&eventsv1.MailJob{Kind: events.MailKindOutbound})
			return err
		}},
		{"mail job without kind", func() error {
			_, err := events.MailMessage(&eventsv1.MailJob{JobId: events.NewEventID()})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.err(); !errors.Is(err, events.ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestTypeOfCoversEveryType(t *testing.T) {
	t.Parallel()
	// One case per field of Envelope.data, read off the descriptor, so a new event type
	// needs no edit here: its message, set with SetData, must give back its type.
	type tcase struct {
		typ  string
		data proto.Message
	}
	var tests []tcase
	fields := (&eventsv1.Envelope{}).ProtoReflect().Descriptor().Oneofs().ByName("data").Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		mt, err := protoregistry.GlobalTypes.FindMessageByName(fd.Message().FullName())
		if err != nil {
			t.Fatal(err)
		}
		typ, _ := proto.GetExtension(fd.Options(), eventsv1.E_EventType).(string)
		tests = append(tests, tcase{typ, mt.New().Interface()})
	}
	if len(tests) < 9 || tests[0].typ != events.TypePackageCreated || tests[7].typ != events.TypeWebhookTest {
		t.Fatalf("descriptor cases = %v, want package.created first and webhook.test eighth", tests)
	}
	var all []string
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			env := &eventsv1.Envelope{EventId: "x"}
			if err := events.SetData(env, tt.data); err != nil {
				t.Fatal(err)
			}
			if env.GetType() != tt.typ || events.TypeOf(env) != tt.typ || !events.Known(tt.typ) {
				t.Errorf("SetData(%T): type %q, TypeOf %q, want %q", tt.data, env.GetType(), events.TypeOf(env), tt.typ)
			}
			if got := events.Data(env); got != tt.data {
				t.Errorf("Data = %v, want the payload set", got)
			}
			if events.DataField(tt.typ) == "" {
				t.Errorf("DataField(%q) is empty", tt.typ)
			}
		})
		all = append(all, tt.typ)
	}
	if !slices.Equal(events.AllTypes, all) {
		t.Errorf("AllTypes = %v, want %v", events.AllTypes, all)
	}
	if want := slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == events.TypeWebhookTest }); !slices.Equal(events.Types, want) {
		t.Errorf("Types = %v, want every event but webhook.test %v", events.Types, want)
	}
	if events.Selectable(events.TypeWebhookTest) || !events.Selectable(events.TypePackageExpired) || events.Selectable("package.nope") {
		t.Error("Selectable: webhook.test is synthetic, package.expired selectable, unknown types not")
	}
	if got := events.DataField(events.TypePackageFileUploaded); got != "file_uploaded" {
		t.Errorf("DataField(package.file_uploaded) = %q", got)
	}
	if got := events.TypeOf(&eventsv1.Envelope{}); got != "" {
		t.Errorf("TypeOf(no data) = %q, want empty", got)
	}
	if events.TypeOf(nil) != "" || events.Data(&eventsv1.Envelope{}) != nil {
		t.Error("TypeOf(nil) or Data(no data) is not empty")
	}
	if err := events.SetData(&eventsv1.Envelope{}, &eventsv1.MailJob{}); !errors.Is(err, events.ErrInvalid) {
		t.Errorf("SetData(MailJob) = %v, want ErrInvalid", err)
	}
}

// testStream is cfg renamed for this test: a unique name and subject prefix, deleted
// when the test ends.
func testStream(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.StreamConfig, string) {
	t.Helper()
	prefix := eventstest.Prefix()
	cfg.Name = eventstest.StreamName(prefix)
	cfg.Subjects = []string{prefix + ".>"}
	eventstest.DeleteOnCleanup(t, js, cfg.Name)
	return cfg, prefix
}

func TestEnsureStreamIdempotent(t *testing.T) {
	t.Parallel()
	js := eventstest.Connect(t)
	ctx := t.Context()
	evCfg, _ := testStream(t, js, events.EventsStream())
	mailCfg, _ := testStream(t, js, events.MailStream())

	// Several services starting at once, then again.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- events.EnsureStream(ctx, js, evCfg, mailCfg) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent EnsureStream: %v", err)
		}
	}
	if err := events.EnsureStream(ctx, js, evCfg, mailCfg); err != nil {
		t.Fatalf("EnsureStream again: %v", err)
	}

	tests := []struct {
		name      string
		cfg       jetstream.StreamConfig
		retention jetstream.RetentionPolicy
		maxAge    time.Duration
	}{
		{"events", evCfg, jetstream.LimitsPolicy, events.DefaultEventsMaxAge},
		{"mail", mailCfg, jetstream.WorkQueuePolicy, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := js.Stream(ctx, tt.cfg.Name)
			if err != nil {
				t.Fatal(err)
			}
			got := s.CachedInfo().Config
			if got.Retention != tt.retention || got.Storage != jetstream.FileStorage ||
				got.Duplicates != events.DuplicateWindow || got.MaxAge != tt.maxAge ||
				len(got.Subjects) != 1 || got.Subjects[0] != tt.cfg.Subjects[0] {
				t.Errorf("config = retention %v, storage %v, duplicates %v, max age %v, subjects %v; want %v, file, %v, %v, %v",
					got.Retention, got.Storage, got.Duplicates, got.MaxAge, got.Subjects,
					tt.retention, events.DuplicateWindow, tt.maxAge, tt.cfg.Subjects)
			}
		})
	}
}

func TestEnsureStreamsConfigs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cfg      jetstream.StreamConfig
		stream   string
		subjects []string
	}{
		{"events", events.EventsStream(), "SHIPFILE_EVENTS", []string{"shipfile.events.>", "shipfile.webhook-due.>"}},
		{"mail", events.MailStream(), "SHIPFILE_MAIL", []string{"shipfile.mail.>"}},
		{"webhooks", events.WebhooksStream(), "SHIPFILE_WEBHOOKS", []string{"shipfile.webhooks.>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.Name != tt.stream || !slices.Equal(tt.cfg.Subjects, tt.subjects) {
				t.Errorf("stream %s on %v, want %s on %s", tt.cfg.Name, tt.cfg.Subjects, tt.stream, tt.subjects)
			}
		})
	}
}

func TestDuplicateMsgIDStoredOnce(t *testing.T) {
	t.Parallel()
	js := eventstest.Connect(t)
	ctx := t.Context()
	cfg, prefix := testStream(t, js, events.EventsStream())
	if err := events.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	id := events.NewEventID()
	subject := prefix + ".package.created"
	first, err := js.Publish(ctx, subject, []byte("one"), jetstream.WithMsgID(id))
	if err != nil {
		t.Fatal(err)
	}
	second, err := js.Publish(ctx, subject, []byte("two"), jetstream.WithMsgID(id))
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || !second.Duplicate || second.Sequence != first.Sequence {
		t.Errorf("acks: first %+v, second %+v; want the second a duplicate of the first", first, second)
	}
	s, err := js.Stream(ctx, cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("stream holds %d messages, want 1", info.State.Msgs)
	}
	msg, err := s.GetMsg(ctx, first.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Data) != "one" || msg.Header.Get(jetstream.MsgIDHeader) != id {
		t.Errorf("stored %q with id %q, want %q with %q", msg.Data, msg.Header.Get(jetstream.MsgIDHeader), "one", id)
	}
}

func TestWorkQueueRemovesAckedMessage(t *testing.T) {
	t.Parallel()
	js := eventstest.Connect(t)
	ctx := t.Context()
	cfg, prefix := testStream(t, js, events.MailStream())
	if err := events.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	job := &eventsv1.MailJob{JobId: events.NewEventID(), Kind: events.MailKindOutbound, MagicLink: "secret"}
	m, err := events.MailMessage(job)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, prefix+".outbound", m.Data, jetstream.WithMsgID(m.ID)); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	if n := msgs(t, s); n != 1 {
		t.Fatalf("before ack: %d messages, want 1", n)
	}
	c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "mailer", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for msg := range batch.Messages() {
		got = append(got, msg)
	}
	if err := batch.Error(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("fetched %d messages, want 1", len(got))
	}
	back, err := events.UnmarshalMailJob(got[0].Data())
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(back, job) {
		t.Errorf("job = %v, want %v", back, job)
	}
	if err := got[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for msgs(t, s) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after ack: %d messages, want 0", msgs(t, s))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func msgs(t *testing.T, s jetstream.Stream) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
