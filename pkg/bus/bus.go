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
//
// URL may list several servers of one cluster, comma separated
// ("nats://nats-0:4222,nats://nats-1:4222,nats://nats-2:4222"): the client connects to
// any that answers and fails over to the others (the servers also advertise their
// peers). It is masked in logs because a URL may carry user:password.
type Config struct {
	URL string `env:"SHIPFILE_NATS_URL" default:"nats://127.0.0.1:4222" secret:"true" help:"NATS server URL, or a comma-separated list of the servers of one cluster (JetStream enabled)"`
	// StreamReplicas is how many copies of each stream JetStream keeps: 1 on a single
	// server, 3 on a three-node cluster (the most NATS allows is 5).
	StreamReplicas int `env:"SHIPFILE_STREAM_REPLICAS" default:"1" help:"replicas of the JetStream streams this service creates or updates (1 to 5; 3 on a three-node cluster)"`
}

// MaxStreamReplicas is the most replicas NATS JetStream keeps of a stream.
const MaxStreamReplicas = 5

// Validate reports a StreamReplicas outside 1 to MaxStreamReplicas.
func (c Config) Validate() error {
	if c.StreamReplicas < 1 || c.StreamReplicas > MaxStreamReplicas {
		return fmt.Errorf("SHIPFILE_STREAM_REPLICAS must be between 1 and %d, got %d", MaxStreamReplicas, c.StreamReplicas)
	}
	return nil
}

// Conn is a NATS connection with its JetStream context.
type Conn struct {
	NC *nats.Conn
	JS jetstream.JetStream
}

// Connect dials NATS, naming the connection after the service, and checks that
// JetStream is enabled on the server. url is one server URL or a comma-separated list
// of them (spaces around the commas are ignored); the first connection tries each
// listed server until one answers, and the connection later reconnects to any of them.
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
