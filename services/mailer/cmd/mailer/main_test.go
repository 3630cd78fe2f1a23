package main

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

// sink is a real SMTP server that accepts and drops every message.
type sink struct{}

func (sink) NewSession(*smtp.Conn) (smtp.Session, error) { return session{}, nil }

type session struct{}

func (session) Reset()                               {}
func (session) Logout() error                        { return nil }
func (session) Mail(string, *smtp.MailOptions) error { return nil }
func (session) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (session) Data(r io.Reader) error               { _, err := io.Copy(io.Discard, r); return err }

func TestLifecycle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := smtp.NewServer(sink{})
	srv.Domain = "localhost"
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })

	addr := servicetest.FreeAddr(t)
	t.Setenv("SHIPFILE_MAILER_ADDR", addr)
	t.Setenv("SHIPFILE_SMTP_HOST", "127.0.0.1")
	t.Setenv("SHIPFILE_SMTP_PORT", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	servicetest.Lifecycle(t, run, addr)
}

func TestUsageListsEveryVariable(t *testing.T) {
	var buf bytes.Buffer
	config.Usage(&buf, "mailer", &Config{})
	for _, v := range []string{"SHIPFILE_MAILER_ADDR", "SHIPFILE_NATS_URL", "SHIPFILE_SMTP_HOST", "SHIPFILE_SMTP_PORT",
		"SHIPFILE_SMTP_FROM", "SHIPFILE_SMTP_USERNAME", "SHIPFILE_SMTP_PASSWORD", "SHIPFILE_SMTP_TLS"} {
		if !strings.Contains(buf.String(), v) {
			t.Errorf("--help lacks %s", v)
		}
	}
}

func TestRejectsUnknownTLSMode(t *testing.T) {
	t.Setenv("SHIPFILE_SMTP_TLS", "sometimes")
	if err := run(t.Context(), nil, nil); err == nil || !strings.Contains(err.Error(), "SHIPFILE_SMTP_TLS") {
		t.Fatalf("run = %v, want a SHIPFILE_SMTP_TLS error", err)
	}
}
