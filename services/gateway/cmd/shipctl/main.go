// Command shipctl administers shipfile from the shell: users, API tokens, the
// database schema and the audit chain's verification. It reads SHIPFILE_DATABASE_URL like the gateway.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/shipfile/shipfile/pkg/config"
	"github.com/shipfile/shipfile/pkg/database"
	"github.com/shipfile/shipfile/pkg/service"
	"github.com/shipfile/shipfile/services/gateway/internal/app"
	"github.com/shipfile/shipfile/services/gateway/internal/app/audit"
	"github.com/shipfile/shipfile/services/gateway/internal/app/identity"
	"github.com/shipfile/shipfile/services/gateway/internal/store/auditdb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/identitydb"
	"github.com/shipfile/shipfile/services/gateway/internal/store/sqldb"
	"github.com/shipfile/shipfile/services/gateway/migrations"
)

const usage = `Usage:
  shipctl user create --email E --name N [--role admin|regular] [--password-stdin]
  shipctl token create --email E --name N [--expires-in 720h]
  shipctl migrate
  shipctl audit verify [--from SEQ]   recompute the audit chain in the database
  shipctl audit verify --file F       verify an export (JSONL or CSV) offline

audit verify exits 1 naming the first entry deleted, changed or reordered.

A password is read from standard input with --password-stdin (its first line):
  shipctl user create --email E --name N --password-stdin < password.txt
--password P still works but shows the password to every user of the machine (ps) and
in the shell's history.

Environment:
  SHIPFILE_DATABASE_URL  PostgreSQL URL (default postgres://postgres@127.0.0.1:5432/shipfile?sslmode=disable)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "shipctl:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, in io.Reader, out io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		return flag.ErrHelp
	}
	var file string
	var from int64
	if len(args) >= 2 && args[0] == "audit" && args[1] == "verify" {
		var err error
		if file, from, err = auditFlags(args[2:]); err != nil {
			return err
		}
		if file != "" {
			return auditVerifyFile(file, out)
		}
	}
	var db database.Config
	if err := config.Load(&db); err != nil {
		return err
	}
	if err := migrations.Up(ctx, db.URL); err != nil {
		return err
	}
	if args[0] == "migrate" {
		fmt.Fprintln(out, "schema is up to date")
		return nil
	}
	if len(args) < 2 {
		return flag.ErrHelp
	}
	// shipctl needs PostgreSQL only.
	conns, err := service.Open(ctx, "shipctl", service.Connections{Database: &db})
	if err != nil {
		return err
	}
	defer conns.Close()
	identity := identity.NewIdentity(identitydb.NewStore(sqldb.NewDB(conns.Pool)))

	switch args[0] + " " + args[1] {
	case "user create":
		return userCreate(ctx, identity, args[2:], in, out)
	case "token create":
		return tokenCreate(ctx, identity, args[2:], out)
	case "audit verify":
		return auditVerify(ctx, audit.NewChain(auditdb.NewStore(sqldb.NewDB(conns.Pool))), from, out)
	default:
		return flag.ErrHelp
	}
}

func userCreate(ctx context.Context, identity *identity.Identity, args []string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("user create", flag.ContinueOnError)
	email := fs.String("email", "", "e-mail address (required)")
	name := fs.String("name", "", "display name (required)")
	role := fs.String("role", "regular", "admin or regular")
	passwordStdin := fs.Bool("password-stdin", false, "read the web UI password (at least 10 characters) from the first line of standard input")
	password := fs.String("password", "", "web UI password on the command line, where ps and the shell history show it: use --password-stdin")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *passwordStdin {
		if *password != "" {
			return errors.New("--password and --password-stdin exclude each other")
		}
		pw, err := readPassword(in)
		if err != nil {
			return err
		}
		*password = pw
	}
	u, err := identity.CreateUser(ctx, app.NewUser{Email: *email, Name: *name, Role: app.Role(*role), Password: *password})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "created user %d %s (%s)\n", u.ID, u.Email, u.Role)
	return nil
}

// maxPasswordInput bounds what --password-stdin reads.
const maxPasswordInput = 4096

// readPassword reads the first line of r (without its line ending) as a password; an
// empty one is an error, as --password-stdin asks for one.
func readPassword(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxPasswordInput+1))
	if err != nil {
		return "", fmt.Errorf("--password-stdin: %w", err)
	}
	if len(b) > maxPasswordInput {
		return "", fmt.Errorf("--password-stdin: the input is longer than %d bytes", maxPasswordInput)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", errors.New("--password-stdin: standard input has no password on its first line")
	}
	return line, nil
}

func tokenCreate(ctx context.Context, ids *identity.Identity, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("token create", flag.ContinueOnError)
	email := fs.String("email", "", "the user's e-mail address (required)")
	name := fs.String("name", "", "token name (required)")
	expiresIn := fs.Duration("expires-in", 0, "lifetime, e.g. 720h (default: no expiry)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := ids.UserByEmail(ctx, *email)
	if err != nil {
		return err
	}
	var expires *time.Time
	if *expiresIn != 0 {
		t := time.Now().Add(*expiresIn)
		expires = &t
	}
	t, raw, err := ids.CreateToken(ctx, u.ID, *name, expires, identity.System)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "created token %d %q (prefix %s) for %s\n", t.ID, t.Name, t.Prefix, u.Email)
	// The raw token alone on the last line, for scripts: T=$(shipctl token create ... | tail -n1)
	fmt.Fprintln(out, raw)
	return nil
}
