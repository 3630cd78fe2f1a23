//go:build faults

package faults

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestKillGatewayMidUpload: SIGKILL the gateway while a file streams through it to
// MinIO. Once it is back: no file row, no object; the multipart upload it left is
// aborted by the expiry service's stale-upload sweep; a new upload works.
func TestKillGatewayMidUpload(t *testing.T) {
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	g := s.StartGateway("SHIPFILE_UPLOAD_PART_SIZE=" + itoa(5<<20))
	db := rig.DB(t, s.DBURL)

	pkg := s.API.MustCreatePackage(t, rig.PackageBody("killed mid-upload")).Id.String()
	type result struct {
		a   rig.Answer
		err error
	}
	done := make(chan result, 1)
	go func() {
		// 64 MiB at 8 MiB/s: eight seconds, of which the kill takes the middle.
		a, err := s.API.Upload(context.Background(), pkg, "big.bin", rig.Throttle(rig.Payload(64<<20, 1), 8<<20))
		done <- result{a, err}
	}()
	servicetest.WaitFor(t, 20*time.Second, "a multipart upload with a part stored", func() bool {
		return len(s.IncompleteUploads()) > 0
	})
	time.Sleep(time.Second)
	g.Kill()
	r := <-done
	record(t, "upload answer when the gateway was killed", describe(r.a, r.err))
	if r.err == nil && r.a.Status < 500 {
		t.Errorf("the upload through a killed gateway got %s", r.a)
	}

	g.Start()
	g.WaitReady(60 * time.Second)
	var files int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM files`).Scan(&files); err != nil {
		t.Fatal(err)
	}
	objects := s.ObjectKeys()
	stale := s.IncompleteUploads()
	record(t, "file rows after the restart", files)
	record(t, "objects after the restart", len(objects))
	record(t, "incomplete multipart uploads after the restart", len(stale))
	if files != 0 || len(objects) != 0 {
		t.Errorf("after the kill: %d file rows, objects %v; want none", files, objects)
	}
	p := s.API.Must(t, "GET", "/api/v1/packages/"+pkg, nil, http.StatusOK)
	if p.JSON["file_count"] != float64(0) {
		t.Errorf("package file_count = %v, want 0", p.JSON["file_count"])
	}

	// The expiry service aborts multipart uploads older than its stale age.
	s.StartService("expiry", "SHIPFILE_EXPIRY_INTERVAL=1s", "SHIPFILE_EXPIRY_STALE_UPLOAD_AGE=1s")
	servicetest.WaitFor(t, 30*time.Second, "the expiry service to abort the stale multipart upload", func() bool {
		return len(s.IncompleteUploads()) == 0
	})
	record(t, "incomplete multipart uploads after the expiry sweep", len(s.IncompleteUploads()))

	a, err := s.API.Upload(context.Background(), pkg, "after.bin", rig.Payload(1<<20, 2))
	if err != nil || a.Status != http.StatusCreated {
		t.Fatalf("upload after the restart: %v %v", a, err)
	}
	if keys := s.ObjectKeys(); len(keys) != 1 {
		t.Errorf("objects after a good upload: %v, want exactly its one", keys)
	}
}

// TestKillGatewayBetweenCommitAndPublish: clients create packages, upload files and
// finalize without pause while the gateway is SIGKILLed and restarted again and again;
// every other time NATS is frozen first, so committed changes are sure to be waiting
// in the outbox when the gateway dies. At the end every committed event is in
// SHIPFILE_EVENTS exactly once, and every mail job in SHIPFILE_MAIL exactly once.
func TestKillGatewayBetweenCommitAndPublish(t *testing.T) {
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL, LogOutbox: true})
	g := s.StartGateway("SHIPFILE_RATE_LIMIT=0")
	db := rig.DB(t, s.DBURL)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, failed, fivexx atomic.Int64
	for i := range 6 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, step := range packageLife(s.API, i) {
					a, err := step()
					switch {
					case err != nil:
						failed.Add(1) // the gateway is down or was killed mid-request
						time.Sleep(50 * time.Millisecond)
					case a.Status >= 500:
						fivexx.Add(1)
					case a.Status < 300:
						ok.Add(1)
					}
					if err != nil || a.Status >= 300 {
						break
					}
				}
			}
		})
	}

	kills := 0
	var pendingAtKill int64
	end := time.Now().Add(*load * 2)
	for time.Now().Before(end) {
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
		if kills%2 == 1 {
			ns.Freeze() // the relay cannot publish: committed rows wait in the outbox
			time.Sleep(300 * time.Millisecond)
		}
		g.Kill()
		ns.Thaw()
		kills++
		var pending int64
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		pendingAtKill += pending
		g.Start()
		g.WaitReady(60 * time.Second)
	}
	close(stop)
	wg.Wait()
	rig.WaitOutboxPublished(t, db, 60*time.Second)

	js := rig.JetStream(t, ns.URL)
	ev := rig.CompareExactlyOnce(rig.OutboxMsgIDs(t, db, events.SubjectPrefix), rig.StreamMsgIDs(t, js, events.StreamEvents))
	mail := rig.CompareExactlyOnce(rig.OutboxMsgIDs(t, db, events.MailSubjectPrefix), rig.StreamMsgIDs(t, js, events.StreamMail))
	record(t, "gateway SIGKILLs (every other one with NATS frozen)", kills)
	record(t, "committed rows not yet published at the kills (sum)", pendingAtKill)
	record(t, "API requests: 2xx / cut off by a kill / 5xx", triple(ok.Load(), failed.Load(), fivexx.Load()))
	record(t, "events committed / in SHIPFILE_EVENTS / lost / duplicated / foreign", exactly(ev))
	record(t, "mail jobs committed / in SHIPFILE_MAIL / lost / duplicated / foreign", exactly(mail))
	if pendingAtKill == 0 {
		t.Error("no kill caught a committed change before its publish: the scenario proved nothing")
	}
	if !ev.Ok() || !mail.Ok() {
		t.Errorf("events %+v, mail jobs %+v: want each committed one exactly once", ev, mail)
	}
	if fivexx.Load() > 0 {
		t.Errorf("%d requests answered 5xx", fivexx.Load())
	}
}

// packageLife returns the steps of one package's life, each a request: create, upload
// a small file, finalize.
func packageLife(api *rig.Client, client int) []func() (rig.Answer, error) {
	ctx := context.Background()
	var id string
	return []func() (rig.Answer, error){
		func() (rig.Answer, error) {
			a, err := api.Do(ctx, "POST", "/api/v1/packages", rig.NewPackage("life of client "+itoa(client)))
			id = a.Str("id")
			return a, err
		},
		func() (rig.Answer, error) {
			return api.Upload(ctx, id, "small.txt", rig.Payload(4<<10, uint64(client)))
		},
		func() (rig.Answer, error) { return api.Do(ctx, "POST", "/api/v1/packages/"+id+"/finalize", nil) },
	}
}
