package servicetest

import (
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestStartNATSAnswersAsItself: a started server answers under its own name, and a
// server of that port's earlier owner (here: another private server) never passes for a
// new one.
func TestStartNATSAnswersAsItself(t *testing.T) {
	_, url := StartNATS(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	name := nc.ConnectedServerName()
	nc.Close()
	if !strings.HasPrefix(name, "shipfile-test-") {
		t.Fatalf("server name %q, want one of StartNATS's own", name)
	}
	if !answersAs(url, name) || answersAs(url, "shipfile-test-someone-else") {
		t.Fatalf("answersAs(%s) does not tell %q from another name", url, name)
	}

	// A server whose port is taken exits, and startNATS says so instead of returning
	// the URL of whatever holds the port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	cmd := exec.Command(NATSServerBin(t), "-a", host, "-p", port, "-js", "-sd", t.TempDir())
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("nats-server on a taken port did not exit with an error: %s", out)
	}
	if answersAs("nats://"+ln.Addr().String(), name) {
		t.Fatal("a plain listener passed for the server")
	}
}

// TestFreeAddrNeverRepeats: addresses handed out in a row are all different, though
// the kernel may offer a port just released again.
func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 500 {
		a := FreeAddr(t)
		if seen[a] {
			t.Fatalf("FreeAddr returned %s twice", a)
		}
		seen[a] = true
	}
}
