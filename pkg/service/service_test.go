package service_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shipfile/shipfile/pkg/service"
	"github.com/shipfile/shipfile/pkg/servicetest"
)

type testConfig struct {
	Name string `env:"SHIPFILE_SERVICE_TEST_NAME" default:"x" help:"a name"`
}

func (c *testConfig) Validate() error {
	if c.Name == "bad" {
		return errors.New("SHIPFILE_SERVICE_TEST_NAME must not be bad")
	}
	return nil
}

// TestLoadValidates: Load parses and then validates a Validator.
func TestLoadValidates(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	var ok testConfig
	if err := service.Load("test", nil, log, &ok); err != nil || ok.Name != "x" {
		t.Fatalf("Load = %v, %+v", err, ok)
	}
	t.Setenv("SHIPFILE_SERVICE_TEST_NAME", "bad")
	var bad testConfig
	if err := service.Load("test", nil, log, &bad); err == nil || !strings.Contains(err.Error(), "must not be bad") {
		t.Fatalf("Load = %v, want the validation error", err)
	}
}

// TestServeStopsTogether: work failing stops the ops server and Serve returns its
// error; a cancelled context stops both and Serve returns nil.
func TestServeStopsTogether(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	h := http.NotFoundHandler()
	t.Run("work fails", func(t *testing.T) {
		boom := errors.New("boom")
		done := make(chan error, 1)
		go func() {
			done <- service.Serve(context.Background(), log, servicetest.FreeAddr(t), h, time.Second, func(context.Context) error {
				time.Sleep(50 * time.Millisecond)
				return boom
			})
		}()
		select {
		case err := <-done:
			if !errors.Is(err, boom) {
				t.Fatalf("Serve = %v, want boom", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return after its work failed")
		}
	})
	t.Run("stopped", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		addr := servicetest.FreeAddr(t)
		done := make(chan error, 1)
		go func() {
			done <- service.Serve(ctx, log, addr, h, time.Second, func(ctx context.Context) error { <-ctx.Done(); return nil })
		}()
		servicetest.WaitFor(t, 10*time.Second, "the ops server to listen", func() bool {
			resp, err := http.Get("http://" + addr + "/")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil
		})
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Serve = %v after a stop, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return after the stop")
		}
	})
}
