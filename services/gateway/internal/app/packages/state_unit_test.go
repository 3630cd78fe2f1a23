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
	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

var allStates = []app.State{app.StateDraft, app.StateActive, app.StateRevoked, app.StateExpired}

// fakeStore is the Store of the unit tests: packages and files in maps, the
// effects each change wrote kept in order. A change that fails writes nothing, as the
// real store's transaction rolls back. Methods the tests do not reach are the embedded
// nil interface's (they panic).
type fakeStore struct {
	Store
	unlockAttempts
	mu       sync.Mutex
	packages map[uuid.UUID]app.Package
	files    map[uuid.UUID][]app.File
	users    map[int64]app.User
	written  []app.Effects
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
	return &fakeStore{packages: map[uuid.UUID]app.Package{}, files: map[uuid.UUID][]app.File{}, users: map[int64]app.User{},
		uses: map[string]int{}, reserved: map[string]bool{}}
}

func (s *fakeStore) CreatePackage(_ context.Context, p app.Package, fx app.Effects) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.packages[p.ID] = p
	s.written = append(s.written, fx)
	return nil
}

func (s *fakeStore) GetPackage(_ context.Context, id uuid.UUID) (app.Package, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.packages[id]
	if !ok {
		return app.Package{}, app.NotFound("package")
	}
	return p, nil
}

func (s *fakeStore) GetUser(_ context.Context, id int64) (app.User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[id]
	if !ok {
		return app.User{}, app.NotFound("user")
	}
	return u, nil
}

func (s *fakeStore) ListFiles(_ context.Context, id uuid.UUID, _ []byte) ([]app.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.files[id]), nil
}

func (s *fakeStore) GetFile(_ context.Context, id, fileID uuid.UUID, _ []byte) (app.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files[id] {
		if f.ID == fileID {
			return f, nil
		}
	}
	return app.File{}, app.NotFound("file")
}

// change runs fn on a copy of the package and keeps the copy and the effects only when
// fn succeeds.
func (s *fakeStore) change(id uuid.UUID, fn func(p *app.Package) (app.Effects, error)) (app.Package, error) {
	p, ok := s.packages[id]
	if !ok {
		return app.Package{}, app.NotFound("package")
	}
	fx, err := fn(&p)
	if err != nil {
		return app.Package{}, err
	}
	s.packages[id] = p
	s.written = append(s.written, fx)
	return p, nil
}

func (s *fakeStore) ChangePackage(_ context.Context, id uuid.UUID, fn func(p *app.Package) (app.Effects, error)) (app.Package, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.change(id, fn)
}

func (s *fakeStore) AddFile(_ context.Context, f app.File, fn func(p *app.Package) (app.Effects, error)) (app.Package, error) {
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

func (s *fakeStore) RemoveFile(_ context.Context, id, fileID uuid.UUID, fn func(p *app.Package, f app.File) (app.Effects, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.files[id], func(f app.File) bool { return f.ID == fileID })
	if i < 0 {
		return app.NotFound("file")
	}
	f := s.files[id][i]
	_, err := s.change(id, func(p *app.Package) (app.Effects, error) { return fn(p, f) })
	if err == nil {
		s.files[id] = slices.Delete(s.files[id], i, i+1)
	}
	return err
}

func (s *fakeStore) DeletePackage(_ context.Context, id uuid.UUID, fn func(p *app.Package) (app.Effects, error)) ([]string, error) {
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

func (s *fakeStore) PackageByLink(_ context.Context, hash []byte) (app.Package, error) {
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
	return app.Package{}, app.NotFound("package")
}

func (s *fakeStore) RecordLinkUse(_ context.Context, hash []byte, fx app.Effects) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uses[string(hash)]++
	s.written = append(s.written, fx)
	return nil
}

func (s *fakeStore) WriteEffects(_ context.Context, fx app.Effects) error {
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

func (o *fakeObjects) Open(_ context.Context, key string) (app.Object, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.objs[key]
	if !ok {
		return nil, app.NotFound("object")
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
	ViewLink(ctx context.Context, token string, client app.Client) (app.Package, []app.File, error)
	DownloadViaLink(ctx context.Context, token string, client app.Client, fileID uuid.UUID, plan func(app.File) (app.Span, error)) (app.File, app.Span, app.Object, app.Finish, error)
	ArchiveViaLink(ctx context.Context, token string, client app.Client) (app.Package, []app.File, func(app.File) (app.Object, error), app.ArchiveFinish, error)
	UploadViaLink(ctx context.Context, token string, client app.Client, up app.Upload) (app.File, error)
}

// NewLinkOps returns the link service on p and the fake store.
var NewLinkOps func(p *Packages, store any) LinkOps

// unitFixture is a package service on the fakes with a clock the test moves.
type unitFixture struct {
	svc     *Packages
	links   LinkOps
	store   *fakeStore
	objects *fakeObjects
	owner   app.User
	now     time.Time
}

func newUnitFixture(t *testing.T) *unitFixture {
	t.Helper()
	f := &unitFixture{
		store:   newFakeStore(),
		objects: &fakeObjects{objs: map[string][]byte{}},
		owner:   app.User{ID: 7, Email: "owner@example.com", Name: "Owner", Role: app.RoleRegular},
		now:     time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
	}
	f.store.users[f.owner.ID] = f.owner
	f.svc = NewPackages(f.store, f.objects, app.Limits{MaxFileSize: 1 << 20, MaxFiles: 3}, "https://files.example.com/")
	f.svc.now = func() time.Time { return f.now }
	f.links = NewLinkOps(f.svc, f.store)
	return f
}

// draft creates a draft of the direction with n owner files (outbound only), and
// forgets the effects of getting there.
func (f *unitFixture) draft(t *testing.T, dir app.Direction, n int) app.Package {
	t.Helper()
	title, email, d := "Report", "bob@example.com", string(dir)
	p, err := f.svc.Create(context.Background(), f.owner, app.Client{}, NewPackage{Title: &title, RecipientEmail: &email, Direction: &d})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := f.svc.UploadAsOwner(context.Background(), f.owner, app.Client{}, p.ID,
			app.Upload{Filename: fmt.Sprintf("f%d.txt", i), Body: strings.NewReader("hello")}); err != nil {
			t.Fatal(err)
		}
	}
	f.store.effects()
	return f.get(t, p.ID)
}

func (f *unitFixture) get(t *testing.T, id uuid.UUID) app.Package {
	t.Helper()
	p, err := f.store.GetPackage(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// inState returns a package brought to state through the service, with its link token
// when it has one.
func (f *unitFixture) inState(t *testing.T, dir app.Direction, state app.State) (app.Package, string) {
	t.Helper()
	ctx := context.Background()
	p := f.draft(t, dir, 1)
	var link string
	if state != app.StateDraft {
		_, links, err := f.svc.Finalize(ctx, f.owner, app.Client{}, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		link = links[0].MagicLink
	}
	switch state {
	case app.StateRevoked:
		if _, err := f.svc.Revoke(ctx, f.owner, app.Client{}, p.ID); err != nil {
			t.Fatal(err)
		}
	case app.StateExpired:
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
		kind   app.Kind // KindInternal: no error
		state  app.State
		events []string
		mails  []string
		audit  []string
	}
	ok := app.KindInternal
	ops := []struct {
		name string
		dir  app.Direction
		run  func(f *unitFixture, p app.Package, link string) error
		want map[app.State]result
	}{
		{"owner upload", app.Outbound, func(f *unitFixture, p app.Package, _ string) error {
			_, err := f.svc.UploadAsOwner(ctx, f.owner, app.Client{}, p.ID, app.Upload{Filename: "more.txt", Body: strings.NewReader("x")})
			return err
		}, map[app.State]result{
			app.StateDraft:   {ok, app.StateDraft, []string{events.TypePackageFileUploaded}, nil, []string{"file.upload"}},
			app.StateActive:  {app.KindConflict, app.StateActive, nil, nil, nil},
			app.StateRevoked: {app.KindConflict, app.StateRevoked, nil, nil, nil},
			app.StateExpired: {app.KindConflict, app.StateActive, nil, nil, nil},
		}},
		{"remove file", app.Outbound, func(f *unitFixture, p app.Package, _ string) error {
			files, _ := f.store.ListFiles(ctx, p.ID, nil)
			return f.svc.RemoveFile(ctx, f.owner, app.Client{}, p.ID, files[0].ID)
		}, map[app.State]result{
			app.StateDraft:   {ok, app.StateDraft, nil, nil, []string{"file.remove"}},
			app.StateActive:  {app.KindConflict, app.StateActive, nil, nil, nil},
			app.StateRevoked: {app.KindConflict, app.StateRevoked, nil, nil, nil},
			app.StateExpired: {app.KindConflict, app.StateActive, nil, nil, nil},
		}},
		{"finalize", app.Outbound, func(f *unitFixture, p app.Package, _ string) error {
			_, _, err := f.svc.Finalize(ctx, f.owner, app.Client{}, p.ID)
			return err
		}, map[app.State]result{
			app.StateDraft:   {ok, app.StateActive, []string{events.TypePackageFinalized}, []string{"outbound"}, []string{"package.finalize"}},
			app.StateActive:  {app.KindConflict, app.StateActive, nil, nil, nil},
			app.StateRevoked: {app.KindConflict, app.StateRevoked, nil, nil, nil},
			app.StateExpired: {app.KindConflict, app.StateActive, nil, nil, nil},
		}},
		{"revoke", app.Outbound, func(f *unitFixture, p app.Package, _ string) error {
			_, err := f.svc.Revoke(ctx, f.owner, app.Client{}, p.ID)
			return err
		}, map[app.State]result{
			app.StateDraft:   {app.KindConflict, app.StateDraft, nil, nil, nil},
			app.StateActive:  {ok, app.StateRevoked, []string{events.TypePackageRevoked}, nil, []string{"package.revoke"}},
			app.StateRevoked: {app.KindConflict, app.StateRevoked, nil, nil, nil},
			app.StateExpired: {app.KindConflict, app.StateActive, nil, nil, nil},
		}},
		{"delete", app.Outbound, func(f *unitFixture, p app.Package, _ string) error {
			return f.svc.Delete(ctx, f.owner, app.Client{}, p.ID)
		}, map[app.State]result{
			app.StateDraft:   {ok, "", []string{events.TypePackageDeleted}, nil, []string{"package.delete"}},
			app.StateActive:  {ok, "", []string{events.TypePackageDeleted}, nil, []string{"package.delete"}},
			app.StateRevoked: {ok, "", []string{events.TypePackageDeleted}, nil, []string{"package.delete"}},
			app.StateExpired: {ok, "", []string{events.TypePackageDeleted}, nil, []string{"package.delete"}},
		}},
		{"owner download", app.Outbound, func(f *unitFixture, p app.Package, _ string) error {
			files, _ := f.store.ListFiles(ctx, p.ID, nil)
			_, obj, err := f.svc.OpenFile(ctx, f.owner, p.ID, files[0].ID)
			if obj != nil {
				obj.Close()
			}
			return err
		}, map[app.State]result{
			app.StateDraft:   {ok, app.StateDraft, nil, nil, nil},
			app.StateActive:  {ok, app.StateActive, nil, nil, nil},
			app.StateRevoked: {ok, app.StateRevoked, nil, nil, nil},
			app.StateExpired: {app.KindConflict, app.StateActive, nil, nil, nil},
		}},
		{"view link", app.Outbound, func(f *unitFixture, _ app.Package, link string) error {
			_, _, err := f.links.ViewLink(ctx, link, app.Client{})
			return err
		}, map[app.State]result{
			app.StateDraft:   {app.KindGone, app.StateDraft, nil, nil, []string{"link.invalid"}},
			app.StateActive:  {ok, app.StateActive, nil, nil, []string{"link.view"}},
			app.StateRevoked: {app.KindGone, app.StateRevoked, nil, nil, []string{"link.invalid"}},
			app.StateExpired: {app.KindGone, app.StateActive, nil, nil, []string{"link.invalid"}},
		}},
		{"download through the link", app.Outbound, func(f *unitFixture, p app.Package, link string) error {
			files, _ := f.store.ListFiles(ctx, p.ID, nil)
			_, _, obj, finish, err := f.links.DownloadViaLink(ctx, link, app.Client{}, files[0].ID, func(f app.File) (app.Span, error) { return app.WholeFile(f), nil })
			if obj != nil {
				obj.Close()
				finish(app.Sent{Whole: true})
			}
			return err
		}, map[app.State]result{
			app.StateDraft:   {app.KindGone, app.StateDraft, nil, nil, []string{"link.invalid"}},
			app.StateActive:  {ok, app.StateActive, []string{events.TypePackageDownloaded}, nil, []string{"file.download"}},
			app.StateRevoked: {app.KindGone, app.StateRevoked, nil, nil, []string{"link.invalid"}},
			app.StateExpired: {app.KindGone, app.StateActive, nil, nil, []string{"link.invalid"}},
		}},
		{"archive through the link", app.Outbound, func(f *unitFixture, _ app.Package, link string) error {
			_, _, _, finish, err := f.links.ArchiveViaLink(ctx, link, app.Client{})
			if finish != nil {
				finish(nil)
			}
			return err
		}, map[app.State]result{
			app.StateDraft:   {app.KindGone, app.StateDraft, nil, nil, []string{"link.invalid"}},
			app.StateActive:  {ok, app.StateActive, []string{events.TypePackageDownloaded}, nil, []string{"archive.download"}},
			app.StateRevoked: {app.KindGone, app.StateRevoked, nil, nil, []string{"link.invalid"}},
			app.StateExpired: {app.KindGone, app.StateActive, nil, nil, []string{"link.invalid"}},
		}},
		{"recipient upload", app.Inbound, func(f *unitFixture, _ app.Package, link string) error {
			_, err := f.links.UploadViaLink(ctx, link, app.Client{}, app.Upload{Filename: "signed.pdf", Body: strings.NewReader("%PDF")})
			return err
		}, map[app.State]result{
			app.StateDraft:   {app.KindGone, app.StateDraft, nil, nil, []string{"link.invalid"}},
			app.StateActive:  {ok, app.StateActive, []string{events.TypePackageFileUploaded}, nil, []string{"file.upload"}},
			app.StateRevoked: {app.KindGone, app.StateRevoked, nil, nil, []string{"link.invalid"}},
			app.StateExpired: {app.KindGone, app.StateActive, nil, nil, []string{"link.invalid"}},
		}},
		{"recipient upload to an outbound package", app.Outbound, func(f *unitFixture, _ app.Package, link string) error {
			_, err := f.links.UploadViaLink(ctx, link, app.Client{}, app.Upload{Filename: "x.txt", Body: strings.NewReader("x")})
			return err
		}, map[app.State]result{
			app.StateActive: {app.KindConflict, app.StateActive, nil, nil, nil},
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
				if app.KindOf(err) != want.kind && !(err == nil && want.kind == app.KindInternal) {
					t.Fatalf("err = %v (kind %d), want kind %d", err, app.KindOf(err), want.kind)
				}
				if want.kind == app.KindConflict && !strings.Contains(err.Error(), "state") && !strings.Contains(err.Error(), "uploads") {
					t.Errorf("conflict %q names no state", err)
				}
				got, gerr := f.store.GetPackage(ctx, p.ID)
				switch {
				case want.state == "" && !errors.Is(gerr, app.ErrNotFound):
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
		p := f.draft(t, app.Outbound, 0)
		if _, _, err := f.svc.Finalize(ctx, f.owner, app.Client{}, p.ID); app.KindOf(err) != app.KindConflict {
			t.Fatalf("finalize an empty outbound draft = %v, want a conflict", err)
		}
		if evs, mails, audit := f.store.effects(); len(evs)+len(mails)+len(audit) != 0 {
			t.Errorf("a refused finalize wrote %v %v %v", evs, mails, audit)
		}
	})
	t.Run("inbound without files", func(t *testing.T) {
		t.Parallel()
		f := newUnitFixture(t)
		p := f.draft(t, app.Inbound, 0)
		f.now = f.now.Add(time.Hour)
		got, links, err := f.svc.Finalize(ctx, f.owner, app.Client{}, p.ID)
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
	p := app.Package{ID: uuid.New(), Title: "T", RecipientEmail: "r@example.com", OwnerUserID: 1, Direction: app.Inbound, TTLDays: 3,
		ExpiresAt: time.Now()}
	f := app.File{ID: uuid.New(), Filename: "a.txt", Size: 3, UploadedBy: app.ByRecipient}
	for _, e := range []*eventsv1.Envelope{
		packageCreated(p), packageFinalized(p), fileUploaded(p, f), packageDownloaded(p, f.ID.String(), f.Filename),
		packageRevoked(p, 1), packageDeleted(p, 1),
	} {
		if _, err := events.EventMessage(e); err != nil || events.TypeOf(e) != e.GetType() {
			t.Errorf("%s: %v, data of %q", e.GetType(), err, events.TypeOf(e))
		}
	}
}
