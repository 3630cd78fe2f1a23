// Package sender delivers the mailer's e-mails over SMTP.
package sender

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/smtp"
	"strconv"
)

// Config is the SMTP part of the mailer's configuration.
type Config struct {
	Host     string `env:"SHIPFILE_SMTP_HOST" default:"127.0.0.1" help:"SMTP server host"`
	Port     int    `env:"SHIPFILE_SMTP_PORT" default:"1025" help:"SMTP server port"`
	From     string `env:"SHIPFILE_SMTP_FROM" default:"shipfile@localhost" help:"sender address of the e-mails"`
	Username string `env:"SHIPFILE_SMTP_USERNAME" default:"" help:"SMTP user (optional)"`
	Password string `env:"SHIPFILE_SMTP_PASSWORD" default:"" secret:"true" help:"SMTP password (optional)"`
	TLS      string `env:"SHIPFILE_SMTP_TLS" default:"none" help:"none, starttls or tls"`
}

// Validate checks the settings that have a fixed set of values.
func (c Config) Validate() error {
	switch c.TLS {
	case "none", "starttls", "tls":
		return nil
	}
	return fmt.Errorf("SHIPFILE_SMTP_TLS: %q is not none, starttls or tls", c.TLS)
}

// Dial opens an SMTP session, upgrading to TLS and authenticating as configured.
func (c Config) Dial(ctx context.Context) (*smtp.Client, error) {
	addr := net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	var d net.Dialer
	var conn net.Conn
	var err error
	if c.TLS == "tls" {
		conn, err = (&tls.Dialer{NetDialer: &d, Config: &tls.Config{ServerName: c.Host}}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("smtp: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	client, err := smtp.NewClient(conn, c.Host)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("smtp: %w", err)
	}
	if c.TLS == "starttls" {
		if err := client.StartTLS(&tls.Config{ServerName: c.Host}); err != nil {
			client.Close()
			return nil, fmt.Errorf("smtp: starttls: %w", err)
		}
	}
	if c.Username != "" {
		if err := client.Auth(smtp.PlainAuth("", c.Username, c.Password, c.Host)); err != nil {
			client.Close()
			return nil, fmt.Errorf("smtp: auth: %w", err)
		}
	}
	return client, nil
}

// Check reports whether the SMTP server answers and accepts our session.
func (c Config) Check(ctx context.Context) error {
	client, err := c.Dial(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	if err := client.Noop(); err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	return client.Quit()
}
