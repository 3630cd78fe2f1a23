package servicetest_test

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// TestMinIOStopsAndStartsAgain checks the private MinIO helper: live after Start,
// refusing connections after Stop, live again on the same endpoint after Start.
func TestMinIOStopsAndStartsAgain(t *testing.T) {
	m := servicetest.StartMinIO(t)
	live := func() bool {
		resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + m.Endpoint + "/minio/health/cluster")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	if !live() {
		t.Fatal("not live after StartMinIO")
	}
	m.Stop()
	if c, err := net.DialTimeout("tcp", m.Endpoint, time.Second); err == nil {
		c.Close()
		t.Fatal("still accepting connections after Stop")
	}
	m.Stop() // a second Stop is harmless
	m.Start()
	if !live() {
		t.Fatal("not live after a restart")
	}
}
