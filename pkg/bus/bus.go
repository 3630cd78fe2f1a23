// Package bus connects to NATS and its JetStream API.
package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config is the NATS part of a service's configuration.
type Config struct {
	URL string `env:"SHIPFILE_NATS_URL" default:"nats://127.0.0.1:4222" help:"NATS server URL (JetStream enabled)"`
}

// Conn is a NATS connection with its JetStream context.
type Conn struct {
	NC *nats.Conn
	JS jetstream.JetStream
}

// Connect dials NATS, naming the connection after the service, and checks that
// JetStream is enabled on the server.
func Connect(ctx context.Context, url, name string) (*Conn, error) {
	nc, err := nats.Connect(url,
		nats.Name(name),
		nats.Timeout(5*time.Second),
		nats.MaxReconnects(-1),
	)
	if err != nil {
		return nil, fmt.Errorf("nats: connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	c := &Conn{NC: nc, JS: js}
	if err := c.Check(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// Check reports whether the connection is up and JetStream answers.
func (c *Conn) Check(ctx context.Context) error {
	if !c.NC.IsConnected() {
		return errors.New("nats: not connected")
	}
	if _, err := c.JS.AccountInfo(ctx); err != nil {
		return fmt.Errorf("nats: jetstream: %w", err)
	}
	return nil
}

// Close drains the connection, letting in-flight messages finish.
func (c *Conn) Close() {
	if err := c.NC.Drain(); err != nil {
		c.NC.Close()
	}
}
