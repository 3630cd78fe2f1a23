package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shipfile/shipfile/bench/internal/rig"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/events"
	"github.com/shipfile/shipfile/pkg/events/eventsv1"
)

// scanWorkers is SHIPFILE_SCAN_WORKERS of the scanner, and the baseline's concurrency.
const scanWorkers = 4

// scanChunk is SHIPFILE_SCAN_CHUNK_SIZE's default, and the baseline's chunk.
const scanChunk = 256 << 10

// scanRow: -scan-files files of -scan-size each (1 GiB in all by default) are scanned
// with the clamd of make test (SHIPFILE_TEST_CLAMD_ADDR): by the baseline (before and
// after the scanner, averaged), which
// streams each from a local file to clamd with INSTREAM (scanWorkers at once, the
// scanner's chunk size), and by one scanner process, which gets a package.file_uploaded
// per file and streams each object from MinIO. Both in MB/s of file bytes; the scanner's
// peak RSS says its memory stays two chunks per scan whatever the file size. Each pass has
// its own bytes (clamd caches the verdicts of what it has seen).
func scanRow(ctx context.Context, t testing.TB, c config, bins rig.Bins, rep *Report) {
	clamd := os.Getenv("SHIPFILE_TEST_CLAMD_ADDR")
	what := fmt.Sprintf("scanner: %d files × %s to clamd", c.scanFiles, rig.MiB(float64(c.scanSize)))
	if clamd == "" {
		rep.Add(Row{What: what, Verdict: "not run (no clamd: make bench starts it, SHIPFILE_TEST_CLAMD_ADDR)"})
		return
	}
	total := float64(c.scanFiles) * float64(c.scanSize)

	// Baseline: local files straight to clamd; run before and after the scanner (each
	// time with bytes of its own), and averaged, so a change of the machine's load
	// during the row weighs on both sides alike.
	dir := t.TempDir()
	// clamd caches the verdict of content it has seen (by hash) as long as it runs: every
	// run and pass scans bytes of its own, or a second run would measure the cache.
	seed := uint64(time.Now().UnixNano()>>12) % (1 << 22)
	baselinePass := func(seed uint64) float64 {
		paths := make([]string, c.scanFiles)
		for i := range paths {
			paths[i] = filepath.Join(dir, fmt.Sprintf("f%d", i))
			f, err := os.Create(paths[i])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, rig.Payload(c.scanSize, seed+uint64(i))); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		if err := instreamFiles(ctx, clamd, paths); err != nil {
			t.Fatalf("baseline: %v", err)
		}
		took := time.Since(start)
		for _, p := range paths {
			_ = os.Remove(p)
		}
		return took.Seconds()
	}
	before := baselinePass(seed + 1<<22)

	// The scanner: rows and objects as uploads leave them, then one event per file.
	ns := rig.StartNATS(t)
	s := rig.NewStack(t, bins, rig.StackOptions{NATSURL: ns.URL})
	pool, err := database.Open(ctx, s.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pkg := uuid.NewString()
	if _, err := pool.Exec(ctx, `INSERT INTO packages (id, owner_user_id, title, recipient_email, direction, state, ttl_days, expires_at)
		VALUES ($1, (SELECT min(id) FROM users), 'scan', 'r@example.com', 'inbound', 'active', 7, now() + interval '7 days')`, pkg); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, c.scanFiles)
	for i := range ids {
		ids[i] = uuid.NewString()
		key := "packages/" + pkg + "/" + ids[i]
		if _, err := s.Objects.Client.PutObject(ctx, s.Objects.Bucket, key, rig.Payload(c.scanSize, seed+uint64(i)), c.scanSize,
			minio.PutObjectOptions{PartSize: 16 << 20}); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO files (id, package_id, filename, size, content_type, sha256, object_key, uploaded_by)
			VALUES ($1, $2, $3, $4, 'application/octet-stream', repeat('0', 64), $5, 'recipient')`,
			ids[i], pkg, fmt.Sprintf("f%d.bin", i), c.scanSize, key); err != nil {
			t.Fatal(err)
		}
	}
	scanner := s.StartService("scanner", "SHIPFILE_CLAMD_ADDR="+clamd, fmt.Sprintf("SHIPFILE_SCAN_WORKERS=%d", scanWorkers),
		fmt.Sprintf("SHIPFILE_SCAN_MAX_SIZE=%d", c.scanSize+1))
	nc, err := nats.Connect(ns.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i, id := range ids {
		e := events.NewEnvelope(events.TypePackageFileUploaded, time.Now())
		e.Data = &eventsv1.Envelope_FileUploaded{FileUploaded: &eventsv1.FileUploaded{
			Package: &eventsv1.Package{PackageId: pkg, Title: "scan", RecipientEmail: "r@example.com", Direction: "inbound"},
			FileId:  id, Filename: fmt.Sprintf("f%d.bin", i), Size: c.scanSize, UploadedBy: "recipient",
		}}
		b, err := events.MarshalEnvelope(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, events.Subject(e.GetType()), b, jetstream.WithMsgID(e.GetEventId())); err != nil {
			t.Fatal(err)
		}
	}
	var took time.Duration
	for ctx.Err() == nil {
		var pending, clean int
		if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE scan = 'pending'), count(*) FILTER (WHERE scan = 'clean') FROM files`).Scan(&pending, &clean); err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			took = time.Since(start)
			if clean != c.scanFiles {
				t.Fatalf("%d of %d files clean after the scan", clean, c.scanFiles)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if took == 0 {
		rep.Add(Row{What: what, Verdict: "not run (the row's budget ended before the scan did)"})
		return
	}
	measured := total / took.Seconds()
	hwm, _ := rig.ProcStatusKiB(scanner.Pid(), "VmHWM")
	after := baselinePass(seed + 2<<22)
	baseline := total / ((before + after) / 2)
	rep.Rawf("scanner: %d files × %s in %.1f s (scanner, %d workers, %s chunks; peak RSS %s) vs %.1f s before and %.1f s after it (clamd INSTREAM from local files, %d at once)",
		c.scanFiles, rig.MiB(float64(c.scanSize)), took.Seconds(), scanWorkers, rig.MiB(scanChunk), rig.MiB(float64(hwm)*1024),
		before, after, scanWorkers)
	ratio := measured / baseline
	rep.Add(Row{
		What:     what,
		Measured: rig.MBps(measured) + fmt.Sprintf(" (peak RSS %s)", rig.MiB(float64(hwm)*1024)),
		Baseline: rig.MBps(baseline) + " (clamd INSTREAM fed from local files)",
		Ratio:    fmt.Sprintf("%.2f×", ratio),
		Target:   "≥ 0.9×",
		Verdict:  verdict(ratio >= 0.9, "%.2f× of the baseline", ratio),
	})
}

// instreamFiles scans paths with clamd at addr, scanWorkers at once, each streamed
// with INSTREAM in scanChunk chunks; every verdict must be clean.
func instreamFiles(ctx context.Context, addr string, paths []string) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, scanWorkers)
	for w := range scanWorkers {
		wg.Go(func() {
			buf := make([]byte, 4+scanChunk)
			for {
				i := int(next.Add(1)) - 1
				if i >= len(paths) || ctx.Err() != nil {
					return
				}
				if err := instreamFile(addr, paths[i], buf); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func instreamFile(addr, path string, buf []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("zINSTREAM\x00")); err != nil {
		return err
	}
	for {
		n, rerr := io.ReadFull(f, buf[4:])
		if n > 0 {
			binary.BigEndian.PutUint32(buf[:4], uint32(n))
			if _, err := conn.Write(buf[:4+n]); err != nil {
				return err
			}
		}
		if rerr != nil {
			break
		}
	}
	if _, err := conn.Write([]byte{0, 0, 0, 0}); err != nil {
		return err
	}
	reply, err := io.ReadAll(io.LimitReader(conn, 4096))
	if err != nil && len(reply) == 0 {
		return err
	}
	if r := strings.TrimRight(string(reply), "\x00\n"); r != "stream: OK" {
		return fmt.Errorf("clamd: %q", r)
	}
	return nil
}
