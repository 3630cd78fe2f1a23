package rig

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/shipfile/shipfile/pkg/servicetest"
)

// Postgres is a private, throwaway PostgreSQL cluster (initdb into a temporary
// directory, on a free port) that a scenario may stop and start: never the shared
// server. As root, its files belong to the postgres user and its commands run as that
// user, since PostgreSQL refuses to run as root.
type Postgres struct {
	t      testing.TB
	Port   string
	bindir string
	dir    string
	asUser string
}

// StartPostgres creates and starts a private cluster, removed when the test ends. The
// binaries come from SHIPFILE_DEV_PG_BINDIR, the newest /usr/lib/postgresql/*/bin, or
// PATH.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	p := &Postgres{t: t, bindir: pgBindir(t)}
	_, p.Port, _ = net.SplitHostPort(servicetest.FreeAddr(t))
	dir, err := os.MkdirTemp("", "shipfile-pg-")
	if err != nil {
		t.Fatal(err)
	}
	p.dir = dir
	t.Cleanup(func() {
		p.run("pg_ctl", "-D", p.data(), "-m", "immediate", "-w", "stop")
		_ = os.RemoveAll(dir)
	})
	if os.Getuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs a postgres user to run PostgreSQL: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		p.asUser = "postgres"
	}
	if out, err := p.command("initdb", "-D", p.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	p.Start()
	return p
}

func pgBindir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("SHIPFILE_DEV_PG_BINDIR"); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p)
	}
	t.Fatal("no PostgreSQL server binaries (initdb, pg_ctl): install them or set SHIPFILE_DEV_PG_BINDIR")
	return ""
}

func pgMajor(bindir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bindir)))
	return n
}

func (p *Postgres) data() string { return filepath.Join(p.dir, "data") }

func (p *Postgres) command(name string, args ...string) *exec.Cmd {
	bin := filepath.Join(p.bindir, name)
	if p.asUser != "" {
		return exec.Command("runuser", append([]string{"-u", p.asUser, "--", bin}, args...)...)
	}
	return exec.Command(bin, args...)
}

func (p *Postgres) run(name string, args ...string) {
	_ = p.command(name, args...).Run()
}

// Start starts the cluster and waits until it accepts connections.
func (p *Postgres) Start() {
	p.t.Helper()
	opts := fmt.Sprintf("-p %s -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=200 "+
		"-c fsync=off -c synchronous_commit=off -c full_page_writes=off", p.Port)
	out, err := p.command("pg_ctl", "-D", p.data(), "-l", filepath.Join(p.dir, "postgres.log"), "-w", "-t", "60", "-o", opts, "start").CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "postgres.log"))
		p.t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
}

// Stop shuts the cluster down: mode "fast" (disconnect clients, clean shutdown) or
// "immediate" (as a crash).
func (p *Postgres) Stop(mode string) {
	p.t.Helper()
	if out, err := p.command("pg_ctl", "-D", p.data(), "-m", mode, "-w", "-t", "60", "stop").CombinedOutput(); err != nil {
		p.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

// AdminURL is the URL of the cluster's postgres database.
func (p *Postgres) AdminURL() string { return p.URL("postgres") }

// URL is the URL of database db.
func (p *Postgres) URL(db string) string {
	return "postgres://postgres@127.0.0.1:" + p.Port + "/" + db + "?sslmode=disable"
}
