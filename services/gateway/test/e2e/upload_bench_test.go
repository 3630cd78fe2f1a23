package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/storage"
)

// BenchmarkUpload streams files through the gateway binary and reports the growth of
// the gateway's peak RSS during each upload (VmHWM after, minus VmRSS before, with the
// peak reset through /proc/<pid>/clear_refs) and the throughput. The baseline, measured
// in the same run, is minio-go's own PutObject of the same stream straight to MinIO
// with the same part size: gateway/direct throughput is the cost of the gateway.
//
//	make bench   or   cd services/gateway && go test -run '^$' -bench Upload -benchtime 1x ./test/e2e/
func BenchmarkUpload(b *testing.B) {
	e := newEnv(b, natsURLFromEnv())
	gw := startGateway(b, e.vars)
	results := map[string]float64{}
	for _, tc := range []struct {
		name   string
		size   int64
		direct bool
	}{
		{"direct-minio-256MiB", 256 << 20, true},
		{"gateway-256MiB", 256 << 20, false},
		{"gateway-2GiB", 2 << 30, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(tc.size)
			for i := range b.N {
				if tc.direct {
					directPut(b, e.bucket, tc.size, uint64(i))
					continue
				}
				growth := uploadThroughGateway(b, gw, e.token, tc.size, uint64(i))
				b.ReportMetric(float64(growth)/(1<<20), "MiB-peak-RSS-growth")
				results[tc.name+"-rss"] = float64(growth) / (1 << 20)
			}
			results[tc.name] = b.Elapsed().Seconds() / float64(b.N)
		})
	}
	if d, g := results["direct-minio-256MiB"], results["gateway-256MiB"]; d > 0 && g > 0 {
		b.Logf("throughput gateway/direct-minio at 256 MiB: %.2f", d/g)
	}
	if small, big := results["gateway-256MiB-rss"], results["gateway-2GiB-rss"]; big > 0 {
		b.Logf("peak RSS growth: %.1f MiB for 2 GiB, %.1f MiB for 256 MiB (ratio %.2f for 8x the bytes)", big, small, big/max(small, 1))
	}
}

func natsURLFromEnv() string {
	if u := os.Getenv("SHIPFILE_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// payload is size deterministic pseudo-random bytes (incompressible, cheap to make).
func payload(size int64, seed uint64) io.Reader {
	return io.LimitReader(rand.NewChaCha8([32]byte{byte(seed), 1, 2, 3}), size)
}

func uploadThroughGateway(b *testing.B, gw *gateway, token string, size int64, seed uint64) int64 {
	b.Helper()
	status, pkg := postJSON(b, gw.url("/api/v1/packages"), token, map[string]any{"title": "bench", "recipient_email": "r@example.com"})
	if status != http.StatusCreated {
		b.Fatalf("create: %d %v", status, pkg)
	}
	pid := gw.cmd.Process.Pid
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		b.Fatalf("reset peak RSS: %v", err)
	}
	before := procStatusKiB(b, pid, "VmRSS")

	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	h := sha256.New()
	go func() {
		part, err := mw.CreateFormFile("file", "big.bin")
		if err == nil {
			_, err = io.Copy(part, io.TeeReader(payload(size, seed), h))
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequest("POST", gw.url("/api/v1/packages/"+pkg["id"].(string)+"/files"), pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var f map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&f)
	if resp.StatusCode != http.StatusCreated {
		b.Fatalf("upload: %d %v", resp.StatusCode, f)
	}
	if want := hex.EncodeToString(h.Sum(nil)); f["sha256"] != want || f["size"] != float64(size) {
		b.Fatalf("stored sha256 %v size %v, want %s %d", f["sha256"], f["size"], want, size)
	}
	peak := procStatusKiB(b, pid, "VmHWM")
	return (peak - before) * 1024
}

func directPut(b *testing.B, bucket string, size int64, seed uint64) {
	b.Helper()
	var cfg storage.Config
	if err := config.Load(&cfg); err != nil {
		b.Fatal(err)
	}
	cfg.Bucket = bucket
	st, err := storage.Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	_, err = st.Client.PutObject(context.Background(), bucket, "direct/"+strconv.FormatUint(seed, 10), payload(size, seed), -1,
		minio.PutObjectOptions{PartSize: 16 << 20, NumThreads: 1})
	if err != nil {
		b.Fatal(err)
	}
}

// procStatusKiB reads a "Vm…: N kB" line of /proc/<pid>/status.
func procStatusKiB(b *testing.B, pid int, field string) int64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
