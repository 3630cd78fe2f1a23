package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/pgtest"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/store/identitydb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

func TestUserAndTokenCreate(t *testing.T) {
	url := pgtest.New(t, migrations.Version(), migrations.Up)
	t.Setenv("SHIPFILE_DATABASE_URL", url)
	ctx := context.Background()

	var out bytes.Buffer
	if err := run(ctx, []string{"user", "create", "--email", "root@example.com", "--name", "Root", "--role", "admin", "--password-stdin"}, strings.NewReader("long-enough-pw\n"), &out); err != nil {
		t.Fatalf("user create: %v", err)
	}
	if !strings.Contains(out.String(), "root@example.com") {
		t.Fatalf("user create printed %q", out.String())
	}

	out.Reset()
	if err := run(ctx, []string{"token", "create", "--email", "ROOT@example.com", "--name", "cli", "--expires-in", "720h"}, strings.NewReader(""), &out); err != nil {
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
	identity := identity.NewIdentity(identitydb.NewStore(sqldb.NewDB(pool)))
	u, _, err := identity.Authenticate(ctx, raw)
	if err != nil || u.Email != "root@example.com" || u.Role != app.RoleAdmin {
		t.Fatalf("token authenticates as %+v, %v", u, err)
	}
	// The password came from standard input, without its line ending.
	if _, err := identity.CheckPassword(ctx, "root@example.com", "long-enough-pw"); err != nil {
		t.Fatalf("the password read with --password-stdin does not sign in: %v", err)
	}

	// --password still works; a line ending of CRLF is dropped too.
	for i, c := range []struct {
		args  []string
		stdin string
	}{
		{[]string{"--password", "another-long-pw"}, ""},
		{[]string{"--password-stdin"}, "another-long-pw\r\nignored second line\n"},
	} {
		email := fmt.Sprintf("user%d@example.com", i)
		args := append([]string{"user", "create", "--email", email, "--name", "U"}, c.args...)
		if err := run(ctx, args, strings.NewReader(c.stdin), &bytes.Buffer{}); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if _, err := identity.CheckPassword(ctx, email, "another-long-pw"); err != nil {
			t.Fatalf("%v: the password does not sign in: %v", c.args, err)
		}
	}

	for name, args := range map[string][]string{
		"duplicate email": {"user", "create", "--email", "Root@Example.com", "--name", "Again", "--role", "admin"},
		"unknown role":    {"user", "create", "--email", "x@example.com", "--name", "X", "--role", "owner"},
		"short password":  {"user", "create", "--email", "x@example.com", "--name", "X", "--password", "short"},
		"unknown user":    {"token", "create", "--email", "nobody@example.com", "--name", "cli"},
		"negative expiry": {"token", "create", "--email", "root@example.com", "--name", "cli", "--expires-in", "-1h"},
		"unknown command": {"frobnicate", "now"},
		"empty stdin":     {"user", "create", "--email", "y@example.com", "--name", "Y", "--password-stdin"},
		"both passwords":  {"user", "create", "--email", "z@example.com", "--name", "Z", "--password-stdin", "--password", "long-enough-pw"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := run(ctx, args, strings.NewReader(""), &bytes.Buffer{}); err == nil {
				t.Fatal("want an error")
			}
		})
	}
	if err := run(ctx, []string{"user", "create", "--email", "w@example.com", "--name", "W", "--password-stdin"},
		strings.NewReader(strings.Repeat("p", 5000)), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("an endless stdin: %v, want a refusal", err)
	}
}
