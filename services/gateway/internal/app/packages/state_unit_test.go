package packages

// The package state table and the package service's rules, tested with no server: no
// PostgreSQL, NATS or MinIO (run them with `unshare -n go test ./internal/app/ -run
// Unit` to see that no network is needed). The service runs against fakeStore, a map
// behind the Store interface the app declares; the integration tests of
// transport/httpapi keep the real servers.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

var allStates = []State{StateDraft, StateActive, StateRevoked, StateExpired}

// fakeStore is the Store of the unit tests: packages and files in maps, the
// effects each change wrote kept in order. A change that fails writes nothing, as the
// real store's transaction rolls back. Methods the tests do not reach are the embedded
// nil interface's (they panic).
type fakeStore struct {
	Store
	unlockAttempts
	mu       sync.Mutex
	packages map[uuid.UUID]Package
	files    map[uuid.UUID][]File
	users    map[int64]User
	written  []Effects
	uses     map[string]int  // by link hash
	reserved map[string]bool // object keys reserved and not yet committed
}

// unlockAttempts is what the link service's store (links.Store) has beyond the
// package service's: the unit tests do not unlock.
type unlockAttempts interface {
	AddUnlockAttempt(ctx context.Context, packageID, recipientID uuid.UUID, window time.Duration) (int64, time.Time, []time.Time, error)
	DeleteUnlockAttempt(ctx context.Context, id int64) error
}

func newFakeStore() *fakeStore {
	return &fakeStore{packages: map[uuid.UUID]Package{}, files: map[uuid.UUID][]File{}, users: map[int64]User{},
		uses: map[string]int{}, reserved: map[string]bool{}}
}

func (s *fakeStore) CreatePackage(_ context.Context, p Package, fx Effects) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.packages[p.ID] = p
	s.written = append(s.written, fx)
	return nil
}

func (s *fakeStore) GetPackage(_ context.Context, id uuid.UUID) (Package, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.packages[id]
	if !ok {
		return Package{}, NotFound("package")
	}
	return p, nil
}

func (s *fakeStore) GetUser(_ context.Context, id int64) (User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[id]
	if !ok {
		return User{}, NotFound("user")
	}
	return u, nil
}

func (s *fakeStore) ListFiles(_ context.Context, id uuid.UUID, _ []byte) ([]File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.files[id]), nil
}

func (s *fakeStore) GetFile(_ context.Context, id, fileID uuid.UUID, _ []byte) (File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files[id] {
		if f.ID == fileID {
			return f, nil
		}
	}
	return File{}, NotFound("file")
}

// change runs fn on a copy of the package and keeps the copy and the effects only when
// fn succeeds.
func (s *fakeStore) change(id uuid.UUID, fn func(p *Package) (Effects, error)) (Package, error) {
	p, ok := s.packages[id]
	if !ok {
		return Package{}, NotFound("package")
	}
	fx, err := fn(&p)
	if err != nil {
		return Package{}, err
	}
	s.packages[id] = p
	s.written = append(s.written, fx)
	return p, nil
}

func (s *fakeStore) ChangePackage(_ context.Context, id uuid.UUID, fn func(p *Package) (Effects, error)) (Package, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.change(id, fn)
}

func (s *fakeStore) AddFile(_ context.Context, f File, fn func(p *Package) (Effects, error)) (Package, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.change(f.PackageID, fn)
	if err == nil {
		s.files[f.PackageID] = append(s.files[f.PackageID], f)
		delete(s.reserved, f.ObjectKey) // the file row ends the reservation
	}
	return p, err
}

// TakeLinkBytes takes costs[i] from the budget of fileIDs[i] (one link per package
// here, so the budget lives in the file) where it is not spent and holds that much.
func (s *fakeStore) TakeLinkBytes(_ context.Context, id uuid.UUID, _ []byte, fileIDs []uuid.UUID, costs []int64, counted bool) ([]uuid.UUID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	limit := s.packages[id].MaxDownloads
	var taken []uuid.UUID
	for i, f := range s.files[id] {
		k := slices.Index(fileIDs, f.ID)
		if k < 0 {
			continue
		}
		if left, ok := f.BudgetLeft(limit); ok && (left == 0 || costs[k] > left) {
			continue
		}
		s.files[id][i].LinkTaken += costs[k]
		if counted {
			s.files[id][i].DownloadCount++
		}
		taken = append(taken, f.ID)
	}
	return taken, nil
}

func (s *fakeStore) ReturnLinkBytes(_ context.Context, _ []byte, fileIDs []uuid.UUID, amounts []int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, files := range s.files {
		for i, f := range files {
			if k := slices.Index(fileIDs, f.ID); k >= 0 {
				s.files[id][i].LinkTaken = max(0, f.LinkTaken-amounts[k])
			}
		}
	}
	return nil
}

func (s *fakeStore) ReserveObjectKey(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserved[key] = true
	return nil
}

func (s *fakeStore) RemoveFile(_ context.Context, id, fileID uuid.UUID, fn func(p *Package, f File) (Effects, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.files[id], func(f File) bool { return f.ID == fileID })
	if i < 0 {
		return NotFound("file")
	}
	f := s.files[id][i]
	_, err := s.change(id, func(p *Package) (Effects, error) { return fn(p, f) })
	if err == nil {
		s.files[id] = slices.Delete(s.files[id], i, i+1)
	}
	return err
}

func (s *fakeStore) DeletePackage(_ context.Context, id uuid.UUID, fn func(p *Package) (Effects, error)) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.change(id, fn); err != nil {
		return nil, err
	}
	var keys []string
	for _, f := range s.files[id] {
		keys = append(keys, f.ObjectKey)
	}
	delete(s.packages, id)
	delete(s.files, id)
	return keys, nil
}

func (s *fakeStore) PackageByLink(_ context.Context, hash []byte) (Package, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.packages {
		for _, r := range p.Recipients {
			if r.LinkHash != nil && bytes.Equal(r.LinkHash, hash) {
				p.Link, p.LinkHash = &r, r.LinkHash
				return p, nil
			}
		}
	}
	return Package{}, NotFound("package")
}

func (s *fakeStore) RecordLinkUse(_ context.Context, hash []byte, fx Effects) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uses[string(hash)]++
	s.written = append(s.written, fx)
	return nil
}

func (s *fakeStore) WriteEffects(_ context.Context, fx Effects) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written = append(s.written, fx)
	return nil
}

func (s *fakeStore) ObjectsDeleted(context.Context, []string) error { return nil }

// effects returns and forgets what the changes wrote so far, as event types, mail job
// kinds and audit actions.
func (s *fakeStore) effects() (evs, mails, audit []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, fx := range s.written {
		for _, e := range fx.Events {
			evs = append(evs, e.GetType())
		}
		for _, m := range fx.Mail {
			mails = append(mails, m.GetKind())
		}
		for _, a := range fx.Audit {
			audit = append(audit, a.Action)
		}
	}
	s.written = nil
	return evs, mails, audit
}

// fakeObjects is the ObjectStore of the unit tests.
type fakeObjects struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func (o *fakeObjects) Put(_ context.Context, key string, r io.Reader, _ string) (int64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.objs[key] = b
	return int64(len(b)), nil
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func (o *fakeObjects) Open(_ context.Context, key string) (Object, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.objs[key]
	if !ok {
		return nil, NotFound("object")
	}
	return nopCloser{bytes.NewReader(b)}, nil
}

func (o *fakeObjects) Remove(_ context.Context, key string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.objs, key)
	return nil
}

// LinkOps is the recipient's side of the package service (app/links, which imports
// this package): NewLinkOps is set by links_unit_test.go, an external test file.
type LinkOps interface {
	ViewLink(ctx context.Context, token string, client Client) (Package, []File, error)
	DownloadViaLink(ctx context.Context, token string, client Client, fileID uuid.UUID, plan func(File) (Span, error)) (File, Span, Object, Finish, error)
	ArchiveViaLink(ctx context.Context, token string, client Client) (Package, []File, func(File) (Object, error), ArchiveFinish, error)
	UploadViaLink(ctx context.Context, token string, client Client, up Upload) (File, error)
}

// NewLinkOps returns the link service on p and the fake store.
var NewLinkOps func(p *Packages, store any) LinkOps

// unitFixture is a package service on the fakes with a clock the test moves.
type unitFixture struct {
	svc     *Packages
	links   LinkOps
	store   *fakeStore
	objects *fakeObjects
	owner   User
	now     time.Time
}

func newUnitFixture(t *testing.T) *unitFixture {
	t.Helper()
	f := &unitFixture{
		store:   newFakeStore(),
		objects: &fakeObjects{objs: map[string][]byte{}},
		owner:   User{ID: 7, Email: "owner@example.com", Name: "Owner", Role: RoleRegular},
		now:     time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
	}
	f.store.users[f.owner.ID] = f.owner
	f.svc = NewPackages(f.store, f.objects, Limits{MaxFileSize: 1 << 20, MaxFiles: 3}, "https://files.example.com/")
	f.svc.now = func() time.Time { return f.now }
	f.links = NewLinkOps(f.svc, f.store)
	return f
}

// draft creates a draft of the direction with n owner files (outbound only), and
// forgets the effects of getting there.
func (f *unitFixture) draft(t *testing.T, dir Direction, n int) Package {
	t.Helper()
	title, email, d := "Report", "bob@example.com", string(dir)
	p, err := f.svc.Create(context.Background(), f.owner, Client{}, NewPackage{Title: &title, RecipientEmail: &email, Direction: &d})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := f.svc.UploadAsOwner(context.Background(), f.owner, Client{}, p.ID,
			Upload{Filename: fmt.Sprintf("f%d.txt", i), Body: strings.NewReader("hello")}); err != nil {
			t.Fatal(err)
		}
	}
	f.store.effects()
	return f.get(t, p.ID)
}

func (f *unitFixture) get(t *testing.T, id uuid.UUID) Package {
	t.Helper()
	p, err := f.store.GetPackage(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// inState returns a package brought to state through the service, with its link token
// when it has one.
func (f *unitFixture) inState(t *testing.T, dir Direction, state State) (Package, string) {
	t.Helper()
	ctx := context.Background()
	p := f.draft(t, dir, 1)
	var link string
	if state != StateDraft {
		_, links, err := f.svc.Finalize(ctx, f.owner, Client{}, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		link = links[0].MagicLink
	}
	switch state {
	case StateRevoked:
		if _, err := f.svc.Revoke(ctx, f.owner, Client{}, p.ID); err != nil {
			t.Fatal(err)
		}
	case StateExpired:
		f.now = f.get(t, p.ID).ExpiresAt // overdue: counts as expired at once
	}
	f.store.effects()
	return f.get(t, p.ID), strings.TrimPrefix(link, "https://files.example.com/p/")
}

// TestUnitOperations runs each operation of the package service on a package in each
// state and checks the answer, the state after, and the effects written beside it: the
// events, mail jobs and audit entries. A refused operation writes nothing but the
// audit entry of an invalid link attempt.
func TestUnitOperations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type result struct {
		kind   Kind // KindInternal: no error
		state  State
		events []string
		mails  []string
		audit  []string
	}
	ok := KindInternal
	ops := []struct {
		name string
		dir  Direction
		run  func(f *unitFixture, p Package, link string) error
		want map[State]result
	}{
		{"owner upload", Outbound, func(f *unitFixture, p Package, _ string) error {
			_, err := f.svc.UploadAsOwner(ctx, f.owner, Client{}, p.ID, Upload{Filename: "more.txt", Body: strings.NewReader("x")})
			return err
		}, map[State]result{
			StateDraft:   {ok, StateDraft, []string{events.TypePackageFileUploaded}, nil, []string{"file.upload"}},
			StateActive:  {KindConflict, StateActive, nil, nil, nil},
			StateRevoked: {KindConflict, StateRevoked, nil, nil, nil},
			StateExpired: {KindConflict, StateActive, nil, nil, nil},
		}},
		{"remove file", Outbound, func(f *unitFixture, p Package, _ string) error {
			files, _ := f.store.ListFiles(ctx, p.ID, nil)
			return f.svc.RemoveFile(ctx, f.owner, Client{}, p.ID, files[0].ID)
		}, map[State]result{
			StateDraft:   {ok, StateDraft, nil, nil, []string{"file.remove"}},
			StateActive:  {KindConflict, StateActive, nil, nil, nil},
			StateRevoked: {KindConflict, StateRevoked, nil, nil, nil},
			StateExpired: {KindConflict, StateActive, nil, nil, nil},
		}},
		{"finalize", Outbound, func(f *unitFixture, p Package, _ string) error {
			_, _, err := f.svc.Finalize(ctx, f.owner, Client{}, p.ID)
			return err
		}, map[State]result{
			StateDraft:   {ok, StateActive, []string{events.TypePackageFinalized}, []string{"outbound"}, []string{"package.finalize"}},
			StateActive:  {KindConflict, StateActive, nil, nil, nil},
			StateRevoked: {KindConflict, StateRevoked, nil, nil, nil},
			StateExpired: {KindConflict, StateActive, nil, nil, nil},
		}},
		{"revoke", Outbound, func(f *unitFixture, p Package, _ string) error {
			_, err := f.svc.Revoke(ctx, f.owner, Client{}, p.ID)
			return err
		}, map[State]result{
			StateDraft:   {KindConflict, StateDraft, nil, nil, nil},
			StateActive:  {ok, StateRevoked, []string{events.TypePackageRevoked}, nil, []string{"package.revoke"}},
			StateRevoked: {KindConflict, StateRevoked, nil, nil, nil},
			StateExpired: {KindConflict, StateActive, nil, nil, nil},
		}},
		{"delete", Outbound, func(f *unitFixture, p Package, _ string) error {
			return f.svc.Delete(ctx, f.owner, Client{}, p.ID)
		}, map[State]result{
			StateDraft:   {ok, "", []string{events.TypePackageDeleted}, nil, []string{"package.delete"}},
			StateActive:  {ok, "", []string{events.TypePackageDeleted}, nil, []string{"package.delete"}},
			StateRevoked: {ok, "", []string{events.TypePackageDeleted}, nil, []string{"package.delete"}},
			StateExpired: {ok, "", []string{events.TypePackageDeleted}, nil, []string{"package.delete"}},
		}},
		{"owner download", Outbound, func(f *unitFixture, p Package, _ string) error {
			files, _ := f.store.ListFiles(ctx, p.ID, nil)
			_, obj, err := f.svc.OpenFile(ctx, f.owner, p.ID, files[0].ID)
			if obj != nil {
				obj.Close()
			}
			return err
		}, map[State]result{
			StateDraft:   {ok, StateDraft, nil, nil, nil},
			StateActive:  {ok, StateActive, nil, nil, nil},
			StateRevoked: {ok, StateRevoked, nil, nil, nil},
			StateExpired: {KindConflict, StateActive, nil, nil, nil},
		}},
		{"view link", Outbound, func(f *unitFixture, _ Package, link string) error {
			_, _, err := f.links.ViewLink(ctx, link, Client{})
			return err
		}, map[State]result{
			StateDraft:   {KindGone, StateDraft, nil, nil, []string{"link.invalid"}},
			StateActive:  {ok, StateActive, nil, nil, []string{"link.view"}},
			StateRevoked: {KindGone, StateRevoked, nil, nil, []string{"link.invalid"}},
			StateExpired: {KindGone, StateActive, nil, nil, []string{"link.invalid"}},
		}},
		{"download through the link", Outbound, func(f *unitFixture, p Package, link string) error {
			files, _ := f.store.ListFiles(ctx, p.ID, nil)
			_, _, obj, finish, err := f.links.DownloadViaLink(ctx, link, Client{}, files[0].ID, func(f File) (Span, error) { return WholeFile(f), nil })
			if obj != nil {
				obj.Close()
				finish(Sent{Whole: true})
			}
			return err
		}, map[State]result{
			StateDraft:   {KindGone, StateDraft, nil, nil, []string{"link.invalid"}},
			StateActive:  {ok, StateActive, []string{events.TypePackageDownloaded}, nil, []string{"file.download"}},
			StateRevoked: {KindGone, StateRevoked, nil, nil, []string{"link.invalid"}},
			StateExpired: {KindGone, StateActive, nil, nil, []string{"link.invalid"}},
		}},
		{"archive through the link", Outbound, func(f *unitFixture, _ Package, link string) error {
			_, _, _, finish, err := f.links.ArchiveViaLink(ctx, link, Client{})
			if finish != nil {
				finish(nil)
			}
			return err
		}, map[State]result{
			StateDraft:   {KindGone, StateDraft, nil, nil, []string{"link.invalid"}},
			StateActive:  {ok, StateActive, []string{events.TypePackageDownloaded}, nil, []string{"archive.download"}},
			StateRevoked: {KindGone, StateRevoked, nil, nil, []string{"link.invalid"}},
			StateExpired: {KindGone, StateActive, nil, nil, []string{"link.invalid"}},
		}},
		{"recipient upload", Inbound, func(f *unitFixture, _ Package, link string) error {
			_, err := f.links.UploadViaLink(ctx, link, Client{}, Upload{Filename: "signed.pdf", Body: strings.NewReader("%PDF")})
			return err
		}, map[State]result{
			StateDraft:   {KindGone, StateDraft, nil, nil, []string{"link.invalid"}},
			StateActive:  {ok, StateActive, []string{events.TypePackageFileUploaded}, nil, []string{"file.upload"}},
			StateRevoked: {KindGone, StateRevoked, nil, nil, []string{"link.invalid"}},
			StateExpired: {KindGone, StateActive, nil, nil, []string{"link.invalid"}},
		}},
		{"recipient upload to an outbound package", Outbound, func(f *unitFixture, _ Package, link string) error {
			_, err := f.links.UploadViaLink(ctx, link, Client{}, Upload{Filename: "x.txt", Body: strings.NewReader("x")})
			return err
		}, map[State]result{
			StateActive: {KindConflict, StateActive, nil, nil, nil},
		}},
	}
	for _, op := range ops {
		for _, state := range allStates {
			want, ok := op.want[state]
			if !ok {
				continue
			}
			t.Run(op.name+"/"+string(state), func(t *testing.T) {
				t.Parallel()
				f := newUnitFixture(t)
				p, link := f.inState(t, op.dir, state)
				if link == "" {
					link = strings.Repeat("A", 43) // a well-formed token no package has
				}
				err := op.run(f, p, link)
				if KindOf(err) != want.kind && !(err == nil && want.kind == KindInternal) {
					t.Fatalf("err = %v (kind %d), want kind %d", err, KindOf(err), want.kind)
				}
				if want.kind == KindConflict && !strings.Contains(err.Error(), "state") && !strings.Contains(err.Error(), "uploads") {
					t.Errorf("conflict %q names no state", err)
				}
				got, gerr := f.store.GetPackage(ctx, p.ID)
				switch {
				case want.state == "" && !errors.Is(gerr, ErrNotFound):
					t.Errorf("package still there after delete: %v", gerr)
				case want.state != "" && got.State != want.state:
					t.Errorf("state after = %s, want %s", got.State, want.state)
				}
				if len(f.store.reserved) != 0 {
					t.Errorf("object keys still reserved: %v (a committed file ends its reservation; a refused upload makes none)", f.store.reserved)
				}
				evs, mails, audit := f.store.effects()
				if !slices.Equal(evs, want.events) || !slices.Equal(mails, want.mails) || !slices.Equal(audit, want.audit) {
					t.Errorf("effects: events %v, mail %v, audit %v; want %v, %v, %v", evs, mails, audit, want.events, want.mails, want.audit)
				}
			})
		}
	}
}

// TestUnitFinalize checks the finalize rules beyond the state: an outbound draft needs
// a file (an inbound one does not); the link, the new expires_at (finalized + ttl) and
// what the event and the mail job carry.
func TestUnitFinalize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("outbound without files", func(t *testing.T) {
		t.Parallel()
		f := newUnitFixture(t)
		p := f.draft(t, Outbound, 0)
		if _, _, err := f.svc.Finalize(ctx, f.owner, Client{}, p.ID); KindOf(err) != KindConflict {
			t.Fatalf("finalize an empty outbound draft = %v, want a conflict", err)
		}
		if evs, mails, audit := f.store.effects(); len(evs)+len(mails)+len(audit) != 0 {
			t.Errorf("a refused finalize wrote %v %v %v", evs, mails, audit)
		}
	})
	t.Run("inbound without files", func(t *testing.T) {
		t.Parallel()
		f := newUnitFixture(t)
		p := f.draft(t, Inbound, 0)
		f.now = f.now.Add(time.Hour)
		got, links, err := f.svc.Finalize(ctx, f.owner, Client{}, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		link := links[0].MagicLink
		if !strings.HasPrefix(link, "https://files.example.com/p/") || len(strings.TrimPrefix(link, "https://files.example.com/p/")) != 43 {
			t.Errorf("link = %q", link)
		}
		if want := f.now.Add(7 * 24 * time.Hour); !got.ExpiresAt.Equal(want) || got.FinalizedAt == nil || !got.FinalizedAt.Equal(f.now) {
			t.Errorf("expires_at %s, finalized_at %v; want %s, %s", got.ExpiresAt, got.FinalizedAt, want, f.now)
		}
		fx := f.store.written[len(f.store.written)-1]
		ev := fx.Events[0].GetPackageFinalized()
		job := fx.Mail[0]
		if ev.GetPackage().GetPackageId() != p.ID.String() || !ev.GetExpiresAt().AsTime().Equal(got.ExpiresAt) ||
			job.GetMagicLink() != link || job.GetKind() != "inbound" || job.GetOwnerEmail() != f.owner.Email {
			t.Errorf("event %v, mail job kind %q owner %q", ev, job.GetKind(), job.GetOwnerEmail())
		}
		if events.TypeOf(fx.Events[0]) != fx.Events[0].GetType() {
			t.Errorf("event type %q, data of %q", fx.Events[0].GetType(), events.TypeOf(fx.Events[0]))
		}
	})
}

// TestUnitEventsAreValid: every event the service builds has an id, a type that matches
// its data (events.TypeOf) and marshals for the outbox.
func TestUnitEventsAreValid(t *testing.T) {
	t.Parallel()
	p := Package{ID: uuid.New(), Title: "T", RecipientEmail: "r@example.com", OwnerUserID: 1, Direction: Inbound, TTLDays: 3,
		ExpiresAt: time.Now()}
	f := File{ID: uuid.New(), Filename: "a.txt", Size: 3, UploadedBy: ByRecipient}
	for _, e := range []*eventsv1.Envelope{
		packageCreated(p), packageFinalized(p), fileUploaded(p, f), packageDownloaded(p, f.ID.String(), f.Filename),
		packageRevoked(p, 1), packageDeleted(p, 1),
	} {
		if _, err := events.EventMessage(e); err != nil || events.TypeOf(e) != e.GetType() {
			t.Errorf("%s: %v, data of %q", e.GetType(), err, events.TypeOf(e))
		}
	}
}
