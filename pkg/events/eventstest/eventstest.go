// Package eventstest gives tests a connection to the real NATS JetStream server and
// streams of their own. The server comes from SHIPFILE_NATS_URL (default
// nats://127.0.0.1:4222); a test whose server is unreachable fails, it never skips.
// Each stream gets a unique name and subject prefix and is deleted when the test ends,
// so tests run in parallel with each other and with running services.
package eventstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultURL is used when SHIPFILE_NATS_URL is unset.
const DefaultURL = "nats://127.0.0.1:4222"

// URL is the NATS server tests connect to.
func URL() string {
	if u := os.Getenv("SHIPFILE_NATS_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Connect connects to NATS for the test, checks that JetStream answers, and closes the
// connection when the test ends.
func Connect(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(URL(), nats.Name("shipfile-test "+t.Name()), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("eventstest: NATS at %s is not reachable (start it with `make up` or `make test`): %v", URL(), err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("eventstest: jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("eventstest: JetStream is not enabled at %s: %v", URL(), err)
	}
	return js
}

// Prefix returns a subject prefix no other test uses: "test.<random>".
func Prefix() string { return "test." + randomHex(6) }

// Stream creates a stream from cfg for the test, with its name replaced by a unique one
// and its subjects by prefix + ".>" (prefix from Prefix), and deletes it when the test
// ends. It returns the stream and the prefix.
func Stream(t testing.TB, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, string) {
	t.Helper()
	prefix := Prefix()
	cfg.Name = StreamName(prefix)
	cfg.Subjects = []string{prefix + ".>"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatalf("eventstest: create stream %s: %v", cfg.Name, err)
	}
	DeleteOnCleanup(t, js, cfg.Name)
	return s, prefix
}

// StreamName turns a subject prefix from Prefix into a stream name.
func StreamName(prefix string) string {
	return "TEST_" + strings.ToUpper(strings.ReplaceAll(prefix, ".", "_"))
}

// DeleteOnCleanup deletes the named stream when the test ends (a stream that is already
// gone is fine).
func DeleteOnCleanup(t testing.TB, js jetstream.JetStream, name string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("eventstest: delete stream %s: %v", name, err)
		}
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
