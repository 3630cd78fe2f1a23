package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/store"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

func TestUserAndTokenCreate(t *testing.T) {
	url := pgtest.New(t, migrations.Version(), migrations.Up)
	t.Setenv("SHIPFILE_DATABASE_URL", url)
	ctx := context.Background()

	var out bytes.Buffer
	if err := run(ctx, []string{"user", "create", "--email", "root@example.com", "--name", "Root", "--role", "admin", "--password", "long-enough-pw"}, &out); err != nil {
		t.Fatalf("user create: %v", err)
	}
	if !strings.Contains(out.String(), "root@example.com") {
		t.Fatalf("user create printed %q", out.String())
	}

	out.Reset()
	if err := run(ctx, []string{"token", "create", "--email", "ROOT@example.com", "--name", "cli", "--expires-in", "720h"}, &out); err != nil {
		t.Fatalf("token create: %v", err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	raw := lines[len(lines)-1]
	if !regexp.MustCompile(`^sf_[A-Za-z0-9_-]{43}$`).MatchString(raw) {
		t.Fatalf("last line %q is not a raw token", raw)
	}

	pool, err := database.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	u, _, err := app.NewIdentity(store.NewPostgres(pool), nil).Authenticate(ctx, raw)
	if err != nil || u.Email != "root@example.com" || u.Role != app.RoleAdmin {
		t.Fatalf("token authenticates as %+v, %v", u, err)
	}

	for name, args := range map[string][]string{
		"duplicate email": {"user", "create", "--email", "Root@Example.com", "--name", "Again", "--role", "admin"},
		"unknown role":    {"user", "create", "--email", "x@example.com", "--name", "X", "--role", "owner"},
		"short password":  {"user", "create", "--email", "x@example.com", "--name", "X", "--password", "short"},
		"unknown user":    {"token", "create", "--email", "nobody@example.com", "--name", "cli"},
		"negative expiry": {"token", "create", "--email", "root@example.com", "--name", "cli", "--expires-in", "-1h"},
		"unknown command": {"frobnicate", "now"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := run(ctx, args, &bytes.Buffer{}); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}
