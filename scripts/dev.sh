#!/usr/bin/env bash
# dev.sh runs shipfile on this machine, without Docker.
#
#   scripts/dev.sh infra   PostgreSQL, NATS JetStream and MinIO reachable; settings in .run/env
#                          (with a SHIPFILE_SECRET_KEY made on the first run and kept)
#   scripts/dev.sh up      infra + SMTP catcher (maildev) + a test OpenID provider + clamd + make build + the five services
#   scripts/dev.sh down    stop what dev.sh started (pid files under .run/pids), nothing else;
#                          the database (users, packages, settings) stays for the next `up`
#   scripts/dev.sh reset [--yes]  drop that development database (asks first; --yes does not)
#   scripts/dev.sh test    infra + SMTP catcher + clamd, make test-race, then stop what this run started
#   scripts/dev.sh clamd   infra + clamd reachable (SHIPFILE_TEST_CLAMD_ADDR written to .run/env)
#   scripts/dev.sh status  what dev.sh started and whether it still runs
#   scripts/dev.sh exec CMD...  run CMD with .run/env overlaid by the caller's SHIPFILE_* variables
#   scripts/dev.sh bench CMD... exec, on a PostgreSQL configured like production (see below)
#
# A component already listening on its default port is reused (PostgreSQL on 5432, NATS on
# 4222 when it has JetStream and is recent enough, MinIO on 9000, an SMTP catcher on 1025);
# otherwise dev.sh starts its own and records it in .run/pids/<name>.pid, logging to
# .run/logs/<name>.log. clamd (ClamAV's daemon, for the scanner) is Debian's clamav-daemon,
# installed with apt-get when missing (as chromium is for the browser tests); dev.sh runs it
# with its own clamd.conf and a signature database made for the tests from the EICAR test
# file with sigtool (the signature mirror is out of reach here: freshclam is never run),
# and waits until it answers PING. Tools it needs are installed, pinned, into a cache outside the repo:
# ${SHIPFILE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shipfile}/bin (Go module proxy) and
# deploy/maildev/node_modules (npm ci). The caller's SHIPFILE_* variables always win over
# .run/env.
#
# Knobs (environment):
#   SHIPFILE_NATS_MIN_VERSION      oldest NATS server reused on the default port (2.10.0: a consumer with several filter subjects)
#   SHIPFILE_DEV_PG_PORT           PostgreSQL port to reuse (5432)
#   SHIPFILE_DEV_PG_FALLBACK_PORT  port of dev.sh's own throwaway cluster (5433)
#   SHIPFILE_DEV_BENCH_PG_PORT     port of the bench's own production-like cluster (5434)
#   SHIPFILE_DEV_NATS_PORT         NATS port to reuse (4222)
#   SHIPFILE_DEV_NATS_FALLBACK_PORT port of dev.sh's own nats-server (4223)
#   SHIPFILE_DEV_MINIO_PORT        MinIO S3 port, reused or started (9000)
#   SHIPFILE_DEV_MINIO_CONSOLE_PORT MinIO console port (9001)
#   SHIPFILE_DEV_SMTP_PORT         maildev SMTP port, reused or started (1025)
#   SHIPFILE_DEV_MAIL_WEB_PORT     maildev web port (1080)
#   SHIPFILE_DEV_OIDC_PORT         port of the test OpenID provider `up` starts (9400); not started
#                                  when the caller sets SHIPFILE_OIDC_ISSUER
#   SHIPFILE_DEV_CLAMD_PORT        clamd TCP port on 127.0.0.1, reused (when it answers PING) or started (3310)
#   SHIPFILE_DEV_TIMEOUT           seconds to wait for anything to come up (90)
#   SHIPFILE_DEV_TRACING           on (default): `up` starts Jaeger (built from the Go module proxy into
#                                  the cache, beside `make build`) and its services export traces to
#                                  it, every trace sampled; off: no Jaeger, no tracing
#   SHIPFILE_DEV_JAEGER_OTLP_PORT  Jaeger's OTLP/HTTP receiver (4318; OTLP/gRPC on 4317)
#   SHIPFILE_DEV_JAEGER_UI_PORT    Jaeger's UI and query API (16686)
#   SHIPFILE_DEV_JAEGER_UI_ASSETS  a directory with a jaeger-ui build, served as the UI (the module's
#                                  source has none: without it the UI address shows a placeholder page
#                                  and only the query API, /api/traces?service=…, is there)
#   SHIPFILE_HTTP_ADDR, SHIPFILE_OPS_ADDR (the gateway's /readyz, /metrics), SHIPFILE_MAILER_ADDR, SHIPFILE_EXPIRY_ADDR, SHIPFILE_WEBHOOKS_ADDR,
#   SHIPFILE_SCANNER_ADDR          where the services listen (127.0.0.1:8080 … :8083, scanner :8085)
# shellcheck disable=SC2016 # the `bash -c '…'` probes expand their own $0 and $1.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN=$ROOT/.run
PIDS=$RUN/pids
LOGS=$RUN/logs
ENV_FILE=$RUN/env
CACHE=${SHIPFILE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shipfile}
CACHE_BIN=$CACHE/bin
MAILDEV_DIR=$ROOT/deploy/maildev

# Pinned tools, installed with `go install module@version` into $CACHE_BIN.
NATS_MODULE=github.com/nats-io/nats-server/v2
NATS_VERSION=v2.12.3
MINIO_MODULE=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
# Jaeger's all-in-one (collector receiving OTLP, in-memory storage, query API and UI). Its
# go.mod has a replace directive, which `go install module@version` refuses: it is built
# in the module's own directory of the module cache instead (jaeger_bin).
JAEGER_MODULE=github.com/jaegertracing/jaeger
JAEGER_VERSION=v1.76.0
JAEGER_BIN=jaeger-all-in-one

NATS_MIN_VERSION=${SHIPFILE_NATS_MIN_VERSION:-2.10.0}
PG_PORT=${SHIPFILE_DEV_PG_PORT:-5432}
PG_FALLBACK_PORT=${SHIPFILE_DEV_PG_FALLBACK_PORT:-5433}
BENCH_PG_PORT=${SHIPFILE_DEV_BENCH_PG_PORT:-5434}
NATS_PORT=${SHIPFILE_DEV_NATS_PORT:-4222}
NATS_FALLBACK_PORT=${SHIPFILE_DEV_NATS_FALLBACK_PORT:-4223}
MINIO_PORT=${SHIPFILE_DEV_MINIO_PORT:-9000}
MINIO_CONSOLE_PORT=${SHIPFILE_DEV_MINIO_CONSOLE_PORT:-9001}
SMTP_PORT=${SHIPFILE_DEV_SMTP_PORT:-1025}
MAIL_WEB_PORT=${SHIPFILE_DEV_MAIL_WEB_PORT:-1080}
OIDC_PORT=${SHIPFILE_DEV_OIDC_PORT:-9400}
# The test OpenID provider (deploy/oidc-provider, its own module: zitadel/oidc's provider)
# and the client it registers for `up`'s gateway.
OIDC_DIR=$ROOT/deploy/oidc-provider
OIDC_CLIENT_ID=shipfile
OIDC_CLIENT_SECRET=shipfile-dev-secret
OIDC_ADMIN_GROUPS=shipfile-admins
CLAMD_PORT=${SHIPFILE_DEV_CLAMD_PORT:-3310}
TRACING=${SHIPFILE_DEV_TRACING:-on}
JAEGER_OTLP_PORT=${SHIPFILE_DEV_JAEGER_OTLP_PORT:-4318}
JAEGER_UI_PORT=${SHIPFILE_DEV_JAEGER_UI_PORT:-16686}
TIMEOUT=${SHIPFILE_DEV_TIMEOUT:-90}
STOP_TIMEOUT=20
MINIO_USER=minioadmin
MINIO_PASSWORD=minioadmin

SERVICES=(gateway mailer expiry webhooks scanner)
# Stop order for `down`: services, then what they depend on.
STOP_ORDER=(gateway mailer expiry webhooks scanner jaeger oidc maildev clamd minio nats pg pgbench)

# The caller's own SHIPFILE_* variables, re-applied over .run/env wherever it is loaded.
declare -A CALLER=()
for _v in $(compgen -e); do
	if [[ $_v == SHIPFILE_* ]]; then CALLER[$_v]=${!_v}; fi
done
unset _v

# Components this invocation started (what `test` stops on exit).
STARTED=()
# Resolved settings, written to .run/env.
PG_URL_PORT="" NATS_URL="" S3_ENDPOINT="" SMTP_ADDR="" MAIL_WEB_URL="" OIDC_ISSUER="" CLAMD_ADDR=""
# Jaeger's OTLP endpoint once `up` runs it (the services' OTEL_EXPORTER_OTLP_ENDPOINT), and
# the pid of its build in the background.
JAEGER_OTLP="" JAEGER_BUILD_PID="" JAEGER_PENDING=""

log() { printf '==> %s\n' "$*" >&2; }
warn() { printf 'dev.sh: %s\n' "$*" >&2; }
die() {
	printf 'dev.sh: error: %s\n' "$*" >&2
	exit 1
}
caller_set() { [[ -v CALLER[$1] ]]; }
have() { command -v "$1" >/dev/null 2>&1; }

# ---------------------------------------------------------------------------------------
# probes

# port_open HOST PORT: something accepts TCP connections there.
port_open() { timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null; }

# http_status URL: prints the HTTP status code (000 when nothing answers).
http_status() {
	local url=$1 code
	if have curl; then
		code=$(curl -s -o /dev/null -m 3 -w '%{http_code}' "$url" 2>/dev/null) || true
		printf '%s\n' "${code:-000}"
		return
	fi
	local rest=${url#http://} hostport path host port
	hostport=${rest%%/*}
	path=/${rest#*/}
	[[ $rest == */* ]] || path=/
	host=${hostport%:*}
	port=${hostport##*:}
	code=$(timeout 3 bash -c '
		exec 3<>"/dev/tcp/$0/$1" || exit 1
		printf "GET %s HTTP/1.0\r\nHost: %s:%s\r\nConnection: close\r\n\r\n" "$2" "$0" "$1" >&3
		IFS=" " read -r _ status _ <&3 && printf "%s\n" "$status"' "$host" "$port" "$path" 2>/dev/null) || true
	printf '%s\n' "${code:-000}"
}

# nats_info HOST PORT: the INFO line a NATS server sends first on connect.
nats_info() {
	timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" && IFS= read -r line <&3 && printf "%s\n" "$line"' "$1" "$2" 2>/dev/null || true
}

# nats_usable HOST PORT: a NATS server with JetStream, version >= NATS_MIN_VERSION.
# Prints why not on stderr.
nats_usable() {
	local info version
	info=$(nats_info "$1" "$2")
	[[ $info == INFO\ * ]] || return 1
	version=$(sed -n 's/.*"version":"\([^"]*\)".*/\1/p' <<<"$info")
	if [[ $info != *'"jetstream":true'* ]]; then
		warn "NATS $version on $1:$2 has no JetStream; not using it"
		return 1
	fi
	if ! version_ge "$version" "$NATS_MIN_VERSION"; then
		warn "NATS $version on $1:$2 is older than $NATS_MIN_VERSION (SHIPFILE_NATS_MIN_VERSION); not using it"
		return 1
	fi
}

# version_ge A B: version A >= version B.
version_ge() {
	local a=${1#v} b=${2#v}
	[[ $(printf '%s\n%s\n' "$a" "$b" | sort -V | head -n 1) == "$b" ]]
}

pg_ready() {
	if have pg_isready; then
		pg_isready -q -h 127.0.0.1 -p "$1" -t 2 >/dev/null 2>&1
	else
		psql -h 127.0.0.1 -p "$1" -U postgres -d postgres -tAc 'SELECT 1' >/dev/null 2>&1
	fi
}

smtp_answers() {
	local banner
	banner=$(timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" && IFS= read -r l <&3 && printf "%s\n" "$l"' "$1" 2>/dev/null) || true
	[[ $banner == 220* ]]
}

# probe_addr ADDR: the address to probe for a listen address (0.0.0.0:80 → 127.0.0.1:80).
probe_addr() {
	local addr=$1 host port
	host=${addr%:*}
	port=${addr##*:}
	case $host in "" | 0.0.0.0 | "[::]" | "::") host=127.0.0.1 ;; esac
	printf '%s:%s\n' "$host" "$port"
}

# wait_for DESC NAME CMD...: polls CMD until it succeeds, for TIMEOUT seconds. NAME is the
# component (for its log and pid file); when its process dies the wait ends early.
wait_for() {
	local desc=$1 name=$2
	shift 2
	local deadline=$((SECONDS + TIMEOUT)) pid
	pid=$(pid_of "$name")
	while ! "$@"; do
		if [[ -n $pid ]] && ! alive "$pid"; then
			warn "$name exited while waiting for $desc"
			show_log "$name"
			return 1
		fi
		if ((SECONDS >= deadline)); then
			warn "timed out after ${TIMEOUT}s waiting for $desc"
			show_log "$name"
			return 1
		fi
		sleep 0.5
	done
}

show_log() {
	local f=$LOGS/$1.log
	[[ -f $f ]] || f=$(pid_field "$1" log)
	if [[ -n $f && -f $f ]]; then
		printf -- '--- last lines of %s ---\n' "$f" >&2
		tail -n 40 "$f" >&2
		printf -- '---\n' >&2
	fi
}

# ---------------------------------------------------------------------------------------
# pid files: line 1 the pid, then key=value lines (cmd= a string its command line contains,
# plus whatever else the component needs to be found again, e.g. port=).

pidfile() { printf '%s/%s.pid\n' "$PIDS" "$1"; }

pid_field() {
	local f
	f=$(pidfile "$1")
	[[ -f $f ]] && sed -n "s/^$2=//p" "$f" | head -n 1
	return 0
}

# alive PID: the process runs (a zombie, or one that vanishes meanwhile, does not).
alive() {
	local state
	kill -0 "$1" 2>/dev/null || return 1
	have ps || return 0
	state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ -n $state && $state != Z* ]]
}

cmdline_of() {
	if [[ -r /proc/$1/cmdline ]]; then
		tr '\0' ' ' <"/proc/$1/cmdline"
	else
		ps -o args= -p "$1" 2>/dev/null || true
	fi
}

# pid_of NAME: the pid of our still-running NAME, or nothing (a stale pid file is removed).
pid_of() {
	local f pid token
	f=$(pidfile "$1")
	[[ -f $f ]] || return 0
	pid=$(head -n 1 "$f")
	token=$(pid_field "$1" cmd)
	if [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" && [[ -z $token || $(cmdline_of "$pid") == *"$token"* ]]; then
		printf '%s\n' "$pid"
	else
		rm -f "$f"
	fi
}

write_pidfile() {
	local name=$1 pid=$2
	shift 2
	{
		printf '%s\n' "$pid"
		printf '%s\n' "$@"
	} >"$(pidfile "$name")"
}

# start_bg NAME TOKEN CMD...: runs CMD in the background, logging to .run/logs/NAME.log.
start_bg() {
	local name=$1 token=$2
	shift 2
	local logf=$LOGS/$name.log
	printf '\n=== %s: %s\n' "$(date -u +%FT%TZ)" "$*" >>"$logf"
	# fd 9 is the setup lock; the process must not keep holding it.
	nohup "$@" >>"$logf" 2>&1 </dev/null 9>&- &
	write_pidfile "$name" "$!" "cmd=$token" "log=$logf"
	STARTED+=("$name")
}

# ---------------------------------------------------------------------------------------
# installs

# go_tool NAME MODULE VERSION: path of the pinned binary in the cache, installed when absent
# or built from another version.
go_tool() {
	local name=$1 module=$2 version=$3 bin=$CACHE_BIN/$1 have_version=""
	if [[ -x $bin ]]; then
		have_version=$(go version -m "$bin" 2>/dev/null | awk '$1 == "mod" { print $3; exit }') || true
		if [[ $have_version == "$version" ]]; then
			printf '%s\n' "$bin"
			return
		fi
	fi
	have go || die "$name is not in $CACHE_BIN and Go is not installed to build it"
	log "installing $module@$version into $CACHE_BIN (takes a few minutes the first time)"
	mkdir -p "$CACHE_BIN"
	# Outside any module, so the repo's go.work does not take part.
	(cd "$CACHE" && GOWORK=off GOBIN=$CACHE_BIN go install "$module@$version") >&2 ||
		die "go install $module@$version failed"
	printf '%s\n' "$bin"
}

# jaeger_bin: path of the pinned Jaeger all-in-one in the cache, built when absent or of
# another version (the version is kept beside it: a binary built as its module's main
# module records none). The build takes minutes the first time (docs/DEVELOPMENT.md).
jaeger_bin() {
	local bin=$CACHE_BIN/$JAEGER_BIN dir start
	if [[ -x $bin && $(cat "$bin.version" 2>/dev/null) == "$JAEGER_VERSION" ]]; then
		printf '%s\n' "$bin"
		return
	fi
	have go || die "$JAEGER_BIN is not in $CACHE_BIN and Go is not installed to build it"
	start=$SECONDS
	log "building Jaeger all-in-one ($JAEGER_MODULE@$JAEGER_VERSION) into $CACHE_BIN"
	mkdir -p "$CACHE_BIN"
	dir=$(cd "$CACHE" && GOWORK=off GOFLAGS= go mod download -json "$JAEGER_MODULE@$JAEGER_VERSION" |
		awk -F'"' '$2 == "Dir" { print $4 }') || true
	[[ -n $dir && -d $dir ]] || die "go mod download $JAEGER_MODULE@$JAEGER_VERSION failed"
	(cd "$dir" && GOWORK=off GOFLAGS=-mod=readonly go build -trimpath -ldflags='-s -w' -o "$bin.tmp" ./cmd/all-in-one) >&2 ||
		die "go build $JAEGER_MODULE/cmd/all-in-one@$JAEGER_VERSION failed"
	mv "$bin.tmp" "$bin"
	printf '%s\n' "$JAEGER_VERSION" >"$bin.version"
	log "Jaeger all-in-one built in $((SECONDS - start))s"
	printf '%s\n' "$bin"
}

# build_jaeger_bg [start]: with tracing on, builds Jaeger in the background (beside
# `make build`) unless the cache has it; with "start", the same background job then starts
# it (ensure_jaeger), so that `up` need not wait for a first build. wait_jaeger_build waits
# for the job.
build_jaeger_bg() {
	[[ $TRACING == off ]] && return
	if [[ -x $CACHE_BIN/$JAEGER_BIN && $(cat "$CACHE_BIN/$JAEGER_BIN.version" 2>/dev/null) == "$JAEGER_VERSION" ]]; then
		return
	fi
	log "building Jaeger all-in-one $JAEGER_VERSION in the background (log: $LOGS/jaeger-build.log)"
	# fd 9 is the setup lock; the job must not keep holding it.
	if [[ ${1:-} == start ]]; then
		{ jaeger_bin >/dev/null && ensure_jaeger; } >"$LOGS/jaeger-build.log" 2>&1 9>&- &
	else
		jaeger_bin >"$LOGS/jaeger-build.log" 2>&1 9>&- &
	fi
	JAEGER_BUILD_PID=$!
}

jaeger_building() { [[ -n $JAEGER_BUILD_PID ]] && kill -0 "$JAEGER_BUILD_PID" 2>/dev/null; }

wait_jaeger_build() {
	[[ -n $JAEGER_BUILD_PID ]] || return 0
	wait "$JAEGER_BUILD_PID" || die "building Jaeger failed; see $LOGS/jaeger-build.log"
	JAEGER_BUILD_PID=""
	grep -h '^==> Jaeger all-in-one built' "$LOGS/jaeger-build.log" >&2 || true
}

jaeger_up() { [[ $(http_status "http://127.0.0.1:$JAEGER_UI_PORT/api/services") == 200 ]]; }

# ensure_jaeger: with tracing on, Jaeger on JAEGER_UI_PORT (reused when one answers there),
# receiving OTLP on JAEGER_OTLP_PORT, its spans in memory.
ensure_jaeger() {
	local pid bin
	[[ $TRACING == off ]] && return
	pid=$(pid_of jaeger)
	if [[ -n $pid ]]; then
		log "Jaeger: ours, already running (UI http://127.0.0.1:$JAEGER_UI_PORT)"
	elif jaeger_up; then
		log "Jaeger: reusing http://127.0.0.1:$JAEGER_UI_PORT"
	else
		if port_open 127.0.0.1 "$JAEGER_OTLP_PORT"; then
			die "127.0.0.1:$JAEGER_OTLP_PORT is taken by a process dev.sh did not start (set SHIPFILE_DEV_JAEGER_OTLP_PORT, or SHIPFILE_DEV_TRACING=off)"
		fi
		bin=$(jaeger_bin)
		log "Jaeger: starting (UI http://127.0.0.1:$JAEGER_UI_PORT, OTLP/HTTP 127.0.0.1:$JAEGER_OTLP_PORT)"
		# Jaeger traces itself over OTLP/gRPC (to its own receiver): nothing sampled.
		SPAN_STORAGE_TYPE=memory OTEL_TRACES_SAMPLER=always_off start_bg jaeger "$JAEGER_BIN" "$bin" \
			--collector.otlp.http.host-port="127.0.0.1:$JAEGER_OTLP_PORT" \
			--collector.otlp.grpc.host-port="127.0.0.1:$((JAEGER_OTLP_PORT - 1))" \
			--query.http-server.host-port="127.0.0.1:$JAEGER_UI_PORT" \
			--query.grpc-server.host-port=127.0.0.1:16685 \
			--collector.http-server.host-port=127.0.0.1:14268 \
			--collector.grpc-server.host-port=127.0.0.1:14250 \
			--admin.http.host-port=127.0.0.1:14269 \
			${SHIPFILE_DEV_JAEGER_UI_ASSETS:+--query.static-files="$SHIPFILE_DEV_JAEGER_UI_ASSETS"}
	fi
	wait_for "Jaeger on 127.0.0.1:$JAEGER_UI_PORT" jaeger jaeger_up || die "Jaeger did not start; see $LOGS/jaeger.log"
	JAEGER_OTLP=http://127.0.0.1:$JAEGER_OTLP_PORT
}

jaeger_line() {
	if [[ -n $JAEGER_PENDING ]]; then
		printf 'http://127.0.0.1:%s  (Jaeger, once its first build is done: %s)\n' "$JAEGER_UI_PORT" "$LOGS/jaeger-build.log"
	elif [[ -n $JAEGER_OTLP ]]; then
		printf 'http://127.0.0.1:%s  (Jaeger; the services export to %s, every trace sampled;\n' "$JAEGER_UI_PORT" "$JAEGER_OTLP"
		printf '                 query API http://127.0.0.1:%s/api/traces?service=shipfile-gateway)\n' "$JAEGER_UI_PORT"
	else
		printf 'off (SHIPFILE_DEV_TRACING=off)\n'
	fi
}

maildev_bin() {
	local bin=$MAILDEV_DIR/node_modules/maildev/bin/maildev
	if [[ ! -f $bin ]]; then
		have npm || die "npm is needed to install maildev (deploy/maildev/package.json)"
		log "installing maildev with npm ci in deploy/maildev"
		(cd "$MAILDEV_DIR" && npm ci --no-audit --no-fund) >&2 || die "npm ci in deploy/maildev failed"
		[[ -f $bin ]] || die "npm ci did not produce $bin"
	fi
	printf '%s\n' "$bin"
}

# ---------------------------------------------------------------------------------------
# PostgreSQL

# As root, initdb and postgres refuse to run; they run as the postgres user instead.
as_pg() {
	if [[ $(id -u) == 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

pg_bindir() {
	local d
	if [[ -n ${SHIPFILE_DEV_PG_BINDIR:-} ]]; then
		printf '%s\n' "$SHIPFILE_DEV_PG_BINDIR"
		return
	fi
	for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V -r) /usr/local/opt/postgresql*/bin /opt/homebrew/bin; do
		if [[ -x $d/initdb && -x $d/pg_ctl ]]; then
			printf '%s\n' "$d"
			return
		fi
	done
	if have initdb && have pg_ctl; then
		dirname "$(command -v initdb)"
		return
	fi
	die "no PostgreSQL answers on 127.0.0.1:$PG_PORT and initdb/pg_ctl are not installed (set SHIPFILE_DEV_PG_BINDIR)"
}

# pg_base: where our throwaway cluster lives: .run normally; as root, a directory the
# postgres user can reach when it cannot reach .run.
pg_base() {
	if [[ $(id -u) != 0 ]] || runuser -u postgres -- test -x "$RUN" 2>/dev/null; then
		printf '%s\n' "$RUN"
	else
		printf '%s/shipfile-pg-%s\n' "${TMPDIR:-/tmp}" "$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)"
	fi
}

ensure_pg() {
	local pid port
	pid=$(pid_of pg)
	if [[ -n $pid ]]; then
		port=$(pid_field pg port)
		pg_ready "$port" || die "our PostgreSQL (pid $pid) runs but does not answer on 127.0.0.1:$port"
		log "PostgreSQL: ours, already running on 127.0.0.1:$port"
	elif pg_ready "$PG_PORT"; then
		port=$PG_PORT
		log "PostgreSQL: reusing 127.0.0.1:$port"
	else
		port=$PG_FALLBACK_PORT
		start_pg "$port"
	fi
	ensure_database "$port" shipfile
	PG_URL_PORT=$port
}

# start_pg PORT [NAME [SETTINGS]]: initdb (once) and start the cluster NAME (pg: the
# throwaway one tuned for tests; pgbench: the bench's, see ensure_bench_pg) with the
# server settings SETTINGS (-c options; default: the test tuning below).
start_pg() {
	local port=$1 name=${2:-pg} bindir base data sock logf
	# Tests only: durability off (nothing here must survive a crash).
	local settings=${3:-"-c fsync=off -c synchronous_commit=off -c full_page_writes=off"}
	bindir=$(pg_bindir)
	base=$(pg_base)
	data=$base/$name
	sock=$base/${name}sock
	logf=$LOGS/$name.log
	if pg_ready "$port" || port_open 127.0.0.1 "$port"; then
		die "127.0.0.1:$port (for $name: SHIPFILE_DEV_PG_FALLBACK_PORT or SHIPFILE_DEV_BENCH_PG_PORT) is taken by a server this dev.sh did not start"
	fi
	mkdir -p "$base" "$sock"
	# Unix socket paths are limited to ~107 bytes; use TCP only when ours would be longer.
	((${#sock} < 90)) || sock=""
	if [[ ! -f $data/PG_VERSION ]]; then
		rm -rf "$data"
	fi
	mkdir -p "$data"
	chmod 700 "$data"
	if [[ $(id -u) == 0 ]]; then
		[[ $base == "$RUN" ]] || logf=$base/pg.log
		touch "$logf"
		chown postgres "$logf"
		[[ -z $sock ]] || chown postgres "$sock"
		chown -R postgres "$data"
	fi
	if [[ ! -f $data/PG_VERSION ]]; then
		log "PostgreSQL: creating a throwaway cluster in $data"
		as_pg "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C >>"$logf" 2>&1 ||
			{ show_log pg; die "initdb failed (log: $logf)"; }
	fi
	log "PostgreSQL: starting on 127.0.0.1:$port"
	if ! as_pg "$bindir/pg_ctl" -D "$data" -l "$logf" -w -t "$TIMEOUT" \
		-o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories='$sock' -c max_connections=300 $settings" \
		start >/dev/null 9>&-; then
		tail -n 40 "$logf" >&2
		die "PostgreSQL did not start (log: $logf)"
	fi
	write_pidfile "$name" "$(head -n 1 "$data/postmaster.pid")" "cmd=postgres" "port=$port" "data=$data" "bindir=$bindir" "log=$logf"
	STARTED+=("$name")
	wait_for "PostgreSQL on 127.0.0.1:$port" pg pg_ready "$port" || die "PostgreSQL did not become ready"
}

# pg_setting PORT NAME: the server's setting NAME (empty when it does not answer).
pg_setting() {
	psql -h 127.0.0.1 -p "$1" -U postgres -d postgres -tAc "SHOW $2" 2>/dev/null || true
}

# ensure_bench_pg: the bench measures on a PostgreSQL configured like production. The
# server of `infra` is used when it is (autovacuum on, durable commits); one tuned for CI
# (autovacuum off: tables never analyzed; or fsync/synchronous_commit off) is not, and
# the bench gets its own throwaway cluster on BENCH_PG_PORT instead, with PostgreSQL's
# defaults (autovacuum, fsync, synchronous_commit on) and a production-sized
# shared_buffers, kept between runs (`dev.sh down` stops it). Sets BENCH_PG_PORT and
# BENCH_PG_ORIGIN (what the report says).
ensure_bench_pg() {
	local av fs sc pid
	av=$(pg_setting "$PG_URL_PORT" autovacuum)
	fs=$(pg_setting "$PG_URL_PORT" fsync)
	sc=$(pg_setting "$PG_URL_PORT" synchronous_commit)
	if [[ $av == on && $fs == on && $sc != off ]]; then
		BENCH_PG_PORT=$PG_URL_PORT
		BENCH_PG_ORIGIN="the PostgreSQL of dev.sh infra on port $PG_URL_PORT (production-like: autovacuum=$av fsync=$fs synchronous_commit=$sc)"
		return
	fi
	pid=$(pid_of pgbench)
	if [[ -n $pid ]]; then
		BENCH_PG_PORT=$(pid_field pgbench port)
		pg_ready "$BENCH_PG_PORT" || die "the bench's PostgreSQL (pid $pid) runs but does not answer on 127.0.0.1:$BENCH_PG_PORT"
		log "PostgreSQL for the bench: ours, already running on 127.0.0.1:$BENCH_PG_PORT"
	elif pg_ready "$BENCH_PG_PORT" && [[ $(pg_setting "$BENCH_PG_PORT" autovacuum) == on && $(pg_setting "$BENCH_PG_PORT" fsync) == on ]]; then
		# Another checkout's bench cluster: every row makes its own database, so share it.
		log "PostgreSQL for the bench: reusing the production-like server on 127.0.0.1:$BENCH_PG_PORT"
	else
		log "PostgreSQL on $PG_URL_PORT is tuned for CI (autovacuum=$av fsync=$fs synchronous_commit=$sc): the bench gets its own cluster"
		start_pg "$BENCH_PG_PORT" pgbench "-c shared_buffers=512MB -c max_wal_size=4GB"
	fi
	BENCH_PG_ORIGIN="the bench's own cluster on port $BENCH_PG_PORT started by dev.sh (autovacuum=$(pg_setting "$BENCH_PG_PORT" autovacuum) fsync=$(pg_setting "$BENCH_PG_PORT" fsync) synchronous_commit=$(pg_setting "$BENCH_PG_PORT" synchronous_commit)), because the one on port $PG_URL_PORT is tuned for CI (autovacuum=$av fsync=$fs synchronous_commit=$sc)"
}

ensure_database() {
	local port=$1 db=$2 psql_args
	psql_args=(-h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -tA)
	if [[ $(psql "${psql_args[@]}" -c "SELECT 1 FROM pg_database WHERE datname = '$db'" 2>&1) == 1 ]]; then
		return
	fi
	log "PostgreSQL: creating database $db"
	if ! psql "${psql_args[@]}" -c "CREATE DATABASE $db" >/dev/null; then
		# Another dev.sh may have created it meanwhile.
		[[ $(psql "${psql_args[@]}" -c "SELECT 1 FROM pg_database WHERE datname = '$db'") == 1 ]] ||
			die "cannot create database $db on 127.0.0.1:$port as user postgres"
	fi
}

# ---------------------------------------------------------------------------------------
# NATS, MinIO, maildev

ensure_nats() {
	local pid port bin
	pid=$(pid_of nats)
	if [[ -n $pid ]]; then
		port=$(pid_field nats port)
		log "NATS: ours, already running on 127.0.0.1:$port"
	elif nats_usable 127.0.0.1 "$NATS_PORT"; then
		port=$NATS_PORT
		log "NATS: reusing 127.0.0.1:$port"
	elif nats_usable 127.0.0.1 "$NATS_FALLBACK_PORT" 2>/dev/null; then
		# Another checkout's dev.sh started it (its `make down` stops it).
		port=$NATS_FALLBACK_PORT
		log "NATS: reusing 127.0.0.1:$port (SHIPFILE_DEV_NATS_FALLBACK_PORT), started by another checkout"
	else
		port=$NATS_FALLBACK_PORT
		if port_open 127.0.0.1 "$port"; then
			die "127.0.0.1:$port (SHIPFILE_DEV_NATS_FALLBACK_PORT) is taken by a server dev.sh did not start"
		fi
		bin=$(go_tool nats-server "$NATS_MODULE" "$NATS_VERSION")
		mkdir -p "$RUN/nats"
		log "NATS: starting nats-server $NATS_VERSION with JetStream on 127.0.0.1:$port"
		start_bg nats nats-server "$bin" -a 127.0.0.1 -p "$port" -js -sd "$RUN/nats"
		printf 'port=%s\n' "$port" >>"$(pidfile nats)"
	fi
	wait_for "NATS JetStream on 127.0.0.1:$port" nats nats_usable 127.0.0.1 "$port" || die "NATS is not usable"
	NATS_URL=nats://127.0.0.1:$port
}

minio_live() { [[ $(http_status "http://127.0.0.1:$MINIO_PORT/minio/health/live") == 200 ]]; }

ensure_minio() {
	local pid bin
	pid=$(pid_of minio)
	if [[ -n $pid ]]; then
		log "MinIO: ours, already running on 127.0.0.1:$MINIO_PORT"
	elif minio_live; then
		log "MinIO: reusing 127.0.0.1:$MINIO_PORT"
	else
		if port_open 127.0.0.1 "$MINIO_PORT"; then
			die "127.0.0.1:$MINIO_PORT is taken by something that is not a live MinIO (set SHIPFILE_DEV_MINIO_PORT)"
		fi
		bin=$(go_tool minio "$MINIO_MODULE" "$MINIO_VERSION")
		mkdir -p "$RUN/minio"
		log "MinIO: starting on 127.0.0.1:$MINIO_PORT (console 127.0.0.1:$MINIO_CONSOLE_PORT)"
		MINIO_ROOT_USER=$MINIO_USER MINIO_ROOT_PASSWORD=$MINIO_PASSWORD MINIO_UPDATE=off \
			start_bg minio minio "$bin" server "$RUN/minio" \
			--address "127.0.0.1:$MINIO_PORT" --console-address "127.0.0.1:$MINIO_CONSOLE_PORT"
	fi
	wait_for "MinIO on 127.0.0.1:$MINIO_PORT" minio minio_live || die "MinIO did not become live"
	S3_ENDPOINT=127.0.0.1:$MINIO_PORT
}

mail_web_up() { [[ $(http_status "http://127.0.0.1:$MAIL_WEB_PORT/") == 200 ]]; }
maildev_ready() { smtp_answers "$SMTP_PORT" && mail_web_up; }

# ensure_mail: an SMTP catcher on SMTP_PORT, unless the caller points the services at
# their own SMTP server.
ensure_mail() {
	local pid bin
	if caller_set SHIPFILE_SMTP_HOST || caller_set SHIPFILE_SMTP_PORT; then
		log "SMTP: using the caller's ${SHIPFILE_SMTP_HOST:-127.0.0.1}:${SHIPFILE_SMTP_PORT:-1025}; no catcher started"
		return
	fi
	pid=$(pid_of maildev)
	if [[ -n $pid ]]; then
		log "SMTP: our maildev, already running (SMTP 127.0.0.1:$SMTP_PORT, web 127.0.0.1:$MAIL_WEB_PORT)"
	elif smtp_answers "$SMTP_PORT"; then
		log "SMTP: reusing the SMTP server on 127.0.0.1:$SMTP_PORT"
		SMTP_ADDR=127.0.0.1:$SMTP_PORT
		if mail_web_up; then MAIL_WEB_URL=http://127.0.0.1:$MAIL_WEB_PORT; fi
		return
	else
		if port_open 127.0.0.1 "$SMTP_PORT" || port_open 127.0.0.1 "$MAIL_WEB_PORT"; then
			die "127.0.0.1:$SMTP_PORT or :$MAIL_WEB_PORT is taken by something that is not an SMTP catcher"
		fi
		have node || die "node is needed to run maildev"
		bin=$(maildev_bin)
		mkdir -p "$RUN/maildev"
		log "SMTP: starting maildev (SMTP 127.0.0.1:$SMTP_PORT, web 127.0.0.1:$MAIL_WEB_PORT)"
		start_bg maildev maildev node "$bin" --ip 127.0.0.1 --smtp "$SMTP_PORT" --web "$MAIL_WEB_PORT" \
			--mail-directory "$RUN/maildev"
	fi
	wait_for "maildev on 127.0.0.1:$SMTP_PORT" maildev maildev_ready || die "maildev did not start"
	SMTP_ADDR=127.0.0.1:$SMTP_PORT
	MAIL_WEB_URL=http://127.0.0.1:$MAIL_WEB_PORT
}

# ---------------------------------------------------------------------------------------
# the test OpenID provider

# oidc_provider_bin: deploy/oidc-provider built into the cache (GOWORK=off: its own
# module, outside go.work; its dependencies come through the Go module proxy once),
# again whenever its sources change.
oidc_provider_bin() {
	local bin=$CACHE_BIN/shipfile-oidc-provider sum have=""
	sum=$(cat "$OIDC_DIR"/go.mod "$OIDC_DIR"/go.sum "$OIDC_DIR"/*.go | cksum | cut -d' ' -f1)
	[[ -f $bin.sum ]] && have=$(cat "$bin.sum")
	if [[ ! -x $bin || $have != "$sum" ]]; then
		have go || die "Go is needed to build deploy/oidc-provider"
		log "building the test OpenID provider (deploy/oidc-provider) into $CACHE_BIN"
		mkdir -p "$CACHE_BIN"
		(cd "$OIDC_DIR" && GOWORK=off go build -o "$bin.tmp" .) >&2 || die "go build deploy/oidc-provider failed"
		mv "$bin.tmp" "$bin"
		printf '%s\n' "$sum" >"$bin.sum"
	fi
	printf '%s\n' "$bin"
}

oidc_up() { [[ $(http_status "http://127.0.0.1:$OIDC_PORT/.well-known/openid-configuration") == 200 ]]; }

# ensure_oidc: the test OpenID provider on OIDC_PORT, unless the caller points the
# gateway at their own provider.
ensure_oidc() {
	local pid bin
	if caller_set SHIPFILE_OIDC_ISSUER; then
		log "OpenID provider: using the caller's ${SHIPFILE_OIDC_ISSUER}; no test provider started"
		return
	fi
	pid=$(pid_of oidc)
	if [[ -n $pid ]]; then
		log "OpenID provider: ours, already running on http://127.0.0.1:$OIDC_PORT"
	else
		if port_open 127.0.0.1 "$OIDC_PORT"; then
			die "127.0.0.1:$OIDC_PORT is taken by a process dev.sh did not start (set SHIPFILE_DEV_OIDC_PORT)"
		fi
		bin=$(oidc_provider_bin)
		log "OpenID provider: starting the test provider on http://127.0.0.1:$OIDC_PORT"
		# Its admin API (users, key rotation) takes the bearer token of
		# .run/oidc-admin-token, made here and readable by its owner only.
		(umask 077 && head -c 24 /dev/urandom | base64 | tr -d '\n/+=' >"$RUN/oidc-admin-token")
		OIDC_PROVIDER_ADMIN_TOKEN=$(cat "$RUN/oidc-admin-token") start_bg oidc shipfile-oidc-provider "$bin" \
			-addr "127.0.0.1:$OIDC_PORT" -client-id "$OIDC_CLIENT_ID" -client-secret "$OIDC_CLIENT_SECRET"
	fi
	wait_for "the OpenID provider on 127.0.0.1:$OIDC_PORT" oidc oidc_up || die "the test OpenID provider did not start"
	OIDC_ISSUER=http://127.0.0.1:$OIDC_PORT
}

# clamd

# clamd_answers PORT: clamd on 127.0.0.1:PORT answers PING with PONG (the z-command form,
# NUL-terminated, as the scanner speaks it).
clamd_answers() {
	local reply
	reply=$(timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" && printf "zPING\0" >&3 && IFS= read -r -d "" l <&3; printf "%s\n" "$l"' "$1" 2>/dev/null) || true
	[[ $reply == PONG ]]
}

# clamd_bin prints the path of clamd (Debian puts it in /usr/sbin, not always on PATH).
clamd_bin() {
	if have clamd; then
		command -v clamd
	elif [[ -x /usr/sbin/clamd ]]; then
		printf '%s\n' /usr/sbin/clamd
	fi
}

# ensure_clamav_installed installs Debian's clamav-daemon (clamd) and clamav (sigtool)
# when clamd or sigtool is missing.
ensure_clamav_installed() {
	[[ -n $(clamd_bin) ]] && have sigtool && return 0
	local sudo=""
	[[ $(id -u) == 0 ]] || sudo="sudo"
	log "installing clamav-daemon and clamav (apt-get) for the scanner"
	{ $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clamav-daemon clamav >/dev/null; } ||
		die "could not install clamav-daemon (apt-get install clamav-daemon clamav); the scanner needs clamd"
}

# clamd_db DIR: writes the test signature database into DIR: the EICAR test file's
# signature as a body signature (.ndb, at any offset), made with sigtool --hex-dump. The
# EICAR string is assembled here, never stored in the repository as a file.
clamd_db() {
	local dir=$1 hex
	mkdir -p "$dir"
	hex=$(printf '%s%s' 'X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR' '-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*' | sigtool --hex-dump) ||
		die "sigtool --hex-dump failed"
	[[ -n $hex ]] || die "sigtool --hex-dump printed nothing"
	printf 'Eicar-Test-Signature:0:*:%s\n' "$hex" >"$dir/shipfile-test.ndb.tmp"
	mv "$dir/shipfile-test.ndb.tmp" "$dir/shipfile-test.ndb"
}

# clamd_conf DIR: prints the clamd.conf of ours, with its database and pid file in DIR.
# Limits a little over the scanner's default SHIPFILE_SCAN_MAX_SIZE (1 GiB): a bigger
# file is 'unscannable' for the scanner before it reaches clamd. The Alert* options make
# clamd name what it could not judge (over a limit, encrypted, a broken executable)
# instead of answering OK: the scanner records it 'unscannable' (docs/SCANNING.md, "Malware
# scanning").
clamd_conf() {
	local dir=$1
	printf '# Written by scripts/dev.sh: clamd for make up / make test, with the test database.\n'
	printf 'Foreground yes\nDatabaseDirectory %s\nTCPSocket %s\nTCPAddr 127.0.0.1\n' "$dir/db" "$CLAMD_PORT"
	printf 'PidFile %s\nLogTime yes\nSelfCheck 3600\nMaxThreads 8\n' "$dir/clamd.pid"
	printf 'StreamMaxLength 1100M\nMaxScanSize 1100M\nMaxFileSize 1100M\n'
	printf 'AlertExceedsMax yes\nAlertEncrypted yes\nAlertEncryptedArchive yes\nAlertEncryptedDoc yes\nAlertBrokenExecutables yes\n'
}

# ensure_clamd: clamd answering on 127.0.0.1:CLAMD_PORT, ours (own config and test
# database under .run/clamd) or one that already answers there. Ours, started with
# another configuration than clamd_conf's, is started again with it.
ensure_clamd() {
	local pid dir bin
	dir=$RUN/clamd
	pid=$(pid_of clamd)
	if [[ -n $pid && $(cat "$dir/clamd.conf" 2>/dev/null) != "$(clamd_conf "$dir")" ]]; then
		log "clamd: ours runs with an older configuration; starting it again"
		stop_one clamd
		pid=""
	fi
	if [[ -n $pid ]]; then
		log "clamd: ours, already running on 127.0.0.1:$CLAMD_PORT"
	elif clamd_answers "$CLAMD_PORT"; then
		log "clamd: reusing 127.0.0.1:$CLAMD_PORT"
	else
		if port_open 127.0.0.1 "$CLAMD_PORT"; then
			die "127.0.0.1:$CLAMD_PORT is taken by something that is not clamd (set SHIPFILE_DEV_CLAMD_PORT)"
		fi
		ensure_clamav_installed
		bin=$(clamd_bin)
		clamd_db "$dir/db"
		clamd_conf "$dir" >"$dir/clamd.conf"
		log "clamd: starting on 127.0.0.1:$CLAMD_PORT (test signatures in $dir/db)"
		start_bg clamd "$dir/clamd.conf" "$bin" -c "$dir/clamd.conf"
	fi
	wait_for "clamd on 127.0.0.1:$CLAMD_PORT (PING)" clamd clamd_answers "$CLAMD_PORT" || die "clamd did not answer PING"
	CLAMD_ADDR=127.0.0.1:$CLAMD_PORT
}

# keep_clamd_settings keeps SHIPFILE_CLAMD_ADDR in .run/env while clamd answers, so that
# `infra` after `up` does not drop it.
keep_clamd_settings() {
	if [[ -z $CLAMD_ADDR ]] && clamd_answers "$CLAMD_PORT"; then
		CLAMD_ADDR=127.0.0.1:$CLAMD_PORT
	fi
}

cmd_clamd() {
	prepare
	infra
	keep_mail_settings
	ensure_clamd
	write_env
	unlock
	log "clamd answers on $CLAMD_ADDR (SHIPFILE_TEST_CLAMD_ADDR in $ENV_FILE)"
}

# ---------------------------------------------------------------------------------------
# .run/env

write_env() {
	local tmp=$ENV_FILE.tmp.$$ key
	key=$(secret_key)
	# The file holds SHIPFILE_SECRET_KEY: readable by its owner only.
	(umask 077 && : >"$tmp")
	{
		printf '# Written by scripts/dev.sh on %s. The caller'"'"'s own SHIPFILE_* variables win.\n' "$(date -u +%FT%TZ)"
		kv SHIPFILE_DATABASE_URL "postgres://postgres@127.0.0.1:$PG_URL_PORT/shipfile?sslmode=disable"
		kv SHIPFILE_TEST_DATABASE_URL "postgres://postgres@127.0.0.1:$PG_URL_PORT/postgres?sslmode=disable"
		kv SHIPFILE_NATS_URL "$NATS_URL"
		kv SHIPFILE_S3_ENDPOINT "$S3_ENDPOINT"
		kv SHIPFILE_S3_ACCESS_KEY "$MINIO_USER"
		kv SHIPFILE_S3_SECRET_KEY "$MINIO_PASSWORD"
		kv SHIPFILE_S3_BUCKET shipfile
		kv SHIPFILE_S3_USE_SSL false
		if [[ -n $SMTP_ADDR ]]; then
			kv SHIPFILE_SMTP_HOST "${SMTP_ADDR%:*}"
			kv SHIPFILE_SMTP_PORT "${SMTP_ADDR##*:}"
		fi
		if [[ -n $MAIL_WEB_URL ]]; then
			# maildev's REST API (GET /email) for tests that read the mail the services sent.
			kv SHIPFILE_TEST_MAILDEV_URL "$MAIL_WEB_URL"
		fi
		if [[ -n $CLAMD_ADDR ]]; then
			# clamd for the tests' scanners; `up` hands it to its services as
			# SHIPFILE_CLAMD_ADDR (which turns the gateway's SHIPFILE_SCAN to block), so
			# other tests' gateways are not put in block mode by .run/env.
			kv SHIPFILE_TEST_CLAMD_ADDR "$CLAMD_ADDR"
		fi
		# The key webhook secrets are stored encrypted under (gateway, webhooks): made once
		# and kept, since secrets sealed under a lost key cannot be read again.
		kv SHIPFILE_SECRET_KEY "$key"
	} >"$tmp"
	mv "$tmp" "$ENV_FILE"
}

# secret_key prints the SHIPFILE_SECRET_KEY of .run/env, or a new one (base64 of 32
# random bytes) when there is none yet.
secret_key() {
	local k=""
	if [[ -f $ENV_FILE ]]; then
		k=$(sed -n "s/^export SHIPFILE_SECRET_KEY='\([A-Za-z0-9+\/=_-]*\)'\$/\1/p" "$ENV_FILE" | head -n 1)
	fi
	if [[ -z $k ]]; then
		k=$(head -c 32 /dev/urandom | base64 | tr -d '\n')
	fi
	printf '%s\n' "$k"
}

# show_env prints .run/env with the secret key masked.
show_env() { sed "s/^export SHIPFILE_SECRET_KEY=.*/export SHIPFILE_SECRET_KEY='***'  # in the file/" "$ENV_FILE"; }

# kv NAME VALUE: an export line, the value single-quoted.
kv() { printf "export %s='%s'\n" "$1" "${2//\'/\'\\\'\'}"; }

# load_env: .run/env, then the caller's SHIPFILE_* variables over it.
load_env() {
	local k
	if [[ -f $ENV_FILE ]]; then
		# shellcheck disable=SC1090
		. "$ENV_FILE"
	fi
	for k in "${!CALLER[@]}"; do
		export "$k=${CALLER[$k]}"
	done
}

# ---------------------------------------------------------------------------------------
# services

svc_addr() {
	case $1 in
	gateway) probe_addr "${SHIPFILE_HTTP_ADDR:-127.0.0.1:8080}" ;;
	mailer) probe_addr "${SHIPFILE_MAILER_ADDR:-127.0.0.1:8081}" ;;
	expiry) probe_addr "${SHIPFILE_EXPIRY_ADDR:-127.0.0.1:8082}" ;;
	webhooks) probe_addr "${SHIPFILE_WEBHOOKS_ADDR:-127.0.0.1:8083}" ;;
	scanner) probe_addr "${SHIPFILE_SCANNER_ADDR:-127.0.0.1:8085}" ;;
	esac
}

# svc_ops_addr NAME: where NAME serves /healthz, /readyz and /metrics (the gateway on
# SHIPFILE_OPS_ADDR, never on its public address; the others on their one address).
svc_ops_addr() {
	case $1 in
	gateway) probe_addr "${SHIPFILE_OPS_ADDR:-127.0.0.1:8084}" ;;
	*) svc_addr "$1" ;;
	esac
}

svc_ready() { [[ $(http_status "http://$(svc_ops_addr "$1")/readyz") == 200 ]]; }

# start_service NAME: starts bin/NAME unless ours already runs; does not wait.
start_service() {
	local name=$1 pid addr
	pid=$(pid_of "$name")
	addr=$(svc_addr "$name")
	if [[ -n $pid ]]; then
		log "$name: already running (pid $pid, http://$addr)"
		return
	fi
	[[ -x $ROOT/bin/$name ]] || die "bin/$name is missing; did make build work?"
	if port_open "${addr%:*}" "${addr##*:}"; then
		die "$name: $addr is taken by a process dev.sh did not start"
	fi
	local ops
	ops=$(svc_ops_addr "$name")
	if [[ $ops != "$addr" ]] && port_open "${ops%:*}" "${ops##*:}"; then
		die "$name: its ops address $ops is taken by a process dev.sh did not start"
	fi
	log "$name: starting (http://$addr)"
	(
		load_env
		if ! caller_set SHIPFILE_WEBHOOK_ALLOW_PRIVATE; then export SHIPFILE_WEBHOOK_ALLOW_PRIVATE=true; fi
		if [[ $name == gateway && -n $OIDC_ISSUER ]]; then
			# The test provider `up` started, and its client.
			export SHIPFILE_OIDC_ISSUER=$OIDC_ISSUER SHIPFILE_OIDC_CLIENT_ID=$OIDC_CLIENT_ID \
				SHIPFILE_OIDC_CLIENT_SECRET=$OIDC_CLIENT_SECRET
			if ! caller_set SHIPFILE_OIDC_ADMIN_GROUPS; then export SHIPFILE_OIDC_ADMIN_GROUPS=$OIDC_ADMIN_GROUPS; fi
		fi
		if ! caller_set SHIPFILE_CLAMD_ADDR && [[ -n ${SHIPFILE_TEST_CLAMD_ADDR:-} ]]; then
			export SHIPFILE_CLAMD_ADDR=$SHIPFILE_TEST_CLAMD_ADDR
		fi
		if ! caller_set SHIPFILE_PUBLIC_URL; then
			SHIPFILE_PUBLIC_URL="http://$(svc_addr gateway)"
			export SHIPFILE_PUBLIC_URL
		fi
		if [[ -n $JAEGER_OTLP ]]; then
			# The caller's own OTEL_* settings win.
			export OTEL_EXPORTER_OTLP_ENDPOINT=${OTEL_EXPORTER_OTLP_ENDPOINT:-$JAEGER_OTLP}
			export OTEL_TRACES_SAMPLER=${OTEL_TRACES_SAMPLER:-parentbased_always_on}
		fi
		cd "$ROOT"
		start_bg "$name" "bin/$name" "$ROOT/bin/$name"
	)
}

wait_service() {
	wait_for "$1 at http://$(svc_ops_addr "$1")/readyz" "$1" svc_ready "$1" ||
		die "$1 did not become ready; see $LOGS/$1.log (make down stops what runs)"
}

# ---------------------------------------------------------------------------------------
# stopping

# stop_one NAME: stops our NAME (pid file), SIGTERM then SIGKILL after STOP_TIMEOUT.
stop_one() {
	local name=$1 pid deadline
	pid=$(pid_of "$name")
	if [[ -z $pid ]]; then
		rm -f "$(pidfile "$name")"
		return
	fi
	log "stopping $name (pid $pid)"
	if [[ $name == pg || $name == pgbench ]]; then
		as_pg "$(pid_field "$name" bindir)/pg_ctl" -D "$(pid_field "$name" data)" -m fast -w -t "$STOP_TIMEOUT" stop >/dev/null 2>&1 || true
	else
		kill -TERM "$pid" 2>/dev/null || true
	fi
	deadline=$((SECONDS + STOP_TIMEOUT))
	while alive "$pid" && ((SECONDS < deadline)); do sleep 0.2; done
	if alive "$pid"; then
		warn "$name (pid $pid) still runs after ${STOP_TIMEOUT}s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$(pidfile "$name")"
}

# stop_all NAME...: stops the named components in STOP_ORDER, then any others named.
stop_all() {
	local n want=" $* " done=" "
	for n in "${STOP_ORDER[@]}"; do
		if [[ $want == *" $n "* ]]; then
			stop_one "$n"
			done+="$n "
		fi
	done
	for n in "$@"; do
		[[ $done == *" $n "* ]] || stop_one "$n"
	done
}

# ---------------------------------------------------------------------------------------
# commands

prepare() {
	mkdir -p "$PIDS" "$LOGS"
	# One dev.sh at a time sets things up; the lock is released once the setup is done.
	exec 9>"$RUN/lock"
	if have flock; then
		flock -w 600 9 || die "another scripts/dev.sh has held $RUN/lock for 10 minutes"
	fi
}

unlock() { exec 9>&-; }

infra() {
	ensure_pg
	ensure_nats
	ensure_minio
}

cmd_infra() {
	prepare
	infra
	keep_mail_settings
	keep_clamd_settings
	write_env
	unlock
	log "settings written to $ENV_FILE"
	show_env
}

# keep_mail_settings keeps the SMTP lines in .run/env while our maildev runs, so that
# `infra` after `up` does not drop them.
keep_mail_settings() {
	if [[ -n $(pid_of maildev) ]] && maildev_ready; then
		SMTP_ADDR=127.0.0.1:$SMTP_PORT
		MAIL_WEB_URL=http://127.0.0.1:$MAIL_WEB_PORT
	fi
}

cmd_up() {
	local s start
	prepare
	build_jaeger_bg start
	infra
	ensure_mail
	ensure_oidc
	ensure_clamd
	write_env
	unlock
	start=$SECONDS
	log "building the five services and shipctl (make build)"
	make -C "$ROOT" --no-print-directory build || die "make build failed"
	log "make build took $((SECONDS - start))s"
	if jaeger_building; then
		# A first build of Jaeger takes longer than make build on a small machine: the
		# services do not wait for it; its job starts Jaeger once built, and what the
		# services export before then is dropped.
		log "Jaeger is still building; it starts on its own once built (log: $LOGS/jaeger-build.log)"
		JAEGER_OTLP=http://127.0.0.1:$JAEGER_OTLP_PORT JAEGER_PENDING=1
	else
		wait_jaeger_build
		ensure_jaeger
	fi
	# The gateway applies the schema migrations at start; the others use that schema.
	start_service gateway
	wait_service gateway
	for s in "${SERVICES[@]:1}"; do start_service "$s"; done
	for s in "${SERVICES[@]:1}"; do wait_service "$s"; done
	local gw mail
	gw=$(svc_addr gateway)
	mail=${MAIL_WEB_URL:-"none (mail goes to ${SHIPFILE_SMTP_HOST:-127.0.0.1}:${SHIPFILE_SMTP_PORT:-1025})"}
	cat <<EOF

shipfile is up.
  API            http://$gw/api/v1
  API docs       http://$gw/api/v1/docs  (Swagger UI)   http://$gw/api/v1/redoc  (ReDoc)
  web UI         http://$gw/  $(first_user_line "$gw")
  mail view      $mail
  sign in        $(oidc_line)
  MinIO console  $(minio_console)
  traces         $(jaeger_line)
  ops            gateway http://$(svc_ops_addr gateway)  mailer http://$(svc_addr mailer)  expiry http://$(svc_addr expiry)  webhooks http://$(svc_addr webhooks)  scanner http://$(svc_addr scanner)  (/healthz /readyz /metrics)
  clamd          $CLAMD_ADDR (test signatures only: the EICAR test file)
  settings       $ENV_FILE
  logs           $LOGS/<name>.log
  stop           make down
EOF
}

# oidc_line: how to sign in, for `up`'s summary: the test provider's users and passwords.
oidc_line() {
	if [[ -z $OIDC_ISSUER ]]; then
		printf 'the OpenID provider %s (SHIPFILE_OIDC_ISSUER)\n' "${SHIPFILE_OIDC_ISSUER:-not set}"
		return
	fi
	printf '"Sign in with SSO" through the test OpenID provider %s; its users:\n' "$OIDC_ISSUER"
	"$(oidc_provider_bin)" -print-users | sed 's/^/                   /'
	if needs_setup "$(svc_addr gateway)"; then
		printf '                 (or by password, after creating the first admin at /setup)\n'
	else
		printf '                 (or by password)\n'
	fi
}

# needs_setup ADDR: whether the gateway at ADDR has no user yet (its /setup answers 200;
# once a user exists it answers 404).
needs_setup() {
	[[ $(curl -s -o /dev/null -m 3 -w '%{http_code}' "http://$1/setup" 2>/dev/null) == 200 ]]
}

# first_user_line ADDR: `up`'s hint beside the web UI: /setup while no user exists,
# otherwise that the database was kept.
first_user_line() {
	if needs_setup "$1"; then
		printf '(no user yet: create the first admin at http://%s/setup)' "$1"
	else
		printf '(sign in: the database and its users are kept across down/up; dev.sh reset empties it)'
	fi
}

minio_console() {
	if [[ -n $(pid_of minio) ]]; then
		printf 'http://127.0.0.1:%s (%s / %s)\n' "$MINIO_CONSOLE_PORT" "$MINIO_USER" "$MINIO_PASSWORD"
	else
		printf 'http://127.0.0.1:%s (not started by dev.sh; reused MinIO on :%s)\n' "$MINIO_CONSOLE_PORT" "$MINIO_PORT"
	fi
}

# cmd_reset drops the development database (the one SHIPFILE_DATABASE_URL names in
# .run/env) after asking, or at once with --yes, so that the next `up` starts empty
# (/setup). The services must be stopped first (make down). Objects in the bucket stay:
# nothing refers to them any more.
cmd_reset() {
	local yes=0 a url db admin s
	for a in "$@"; do
		case $a in
		-y | --yes) yes=1 ;;
		*) die "usage: dev.sh reset [--yes]" ;;
		esac
	done
	for s in "${SERVICES[@]}"; do
		[[ -z $(pid_of "$s") ]] || die "$s is running: stop the services first (make down), then reset"
	done
	load_env
	url=${SHIPFILE_DATABASE_URL:-}
	[[ -n $url ]] || die "no SHIPFILE_DATABASE_URL in $ENV_FILE: nothing to reset"
	db=${url##*/}
	db=${db%%\?*}
	[[ $db =~ ^[A-Za-z_][A-Za-z0-9_]*$ && $db != postgres && $db != template0 && $db != template1 ]] ||
		die "refusing to drop the database '$db' of SHIPFILE_DATABASE_URL"
	admin=${url%/*}/postgres
	[[ $url == *\?* ]] && admin+="?${url#*\?}"
	if ((!yes)); then
		[[ -t 0 ]] || die "reset asks before it drops the database '$db'; without a terminal pass --yes"
		read -r -p "Drop the development database '$db' (every user, package and setting)? [y/N] " a
		[[ $a == [yY]* ]] || {
			log "nothing dropped"
			return
		}
	fi
	psql -d "$admin" -v ON_ERROR_STOP=1 -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null ||
		die "could not drop the database '$db'"
	log "dropped the database '$db': the next make up creates it again, empty (the first admin signs up at /setup)"
}

cmd_down() {
	local names=() f
	mkdir -p "$PIDS"
	for f in "$PIDS"/*.pid; do
		[[ -e $f ]] || continue
		f=${f##*/}
		names+=("${f%.pid}")
	done
	if ((${#names[@]} == 0)); then
		log "nothing to stop (no pid files in $PIDS)"
		return
	fi
	stop_all "${names[@]}"
	log "stopped what dev.sh started; anything else was left alone"
}

# ensure_chromium installs Debian's Chromium for the web UI's browser tests
# (services/gateway/test/browser) when it is missing.
ensure_chromium() {
	command -v chromium >/dev/null && return 0
	local sudo=""
	[[ $(id -u) == 0 ]] || sudo="sudo"
	log "installing chromium (apt-get) for the browser tests"
	{ $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } ||
		log "could not install chromium: the browser tests will fail (apt-get install chromium)"
}

cmd_test() {
	local rc
	trap 'test_cleanup' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	prepare
	TRACING=on build_jaeger_bg
	ensure_chromium
	infra
	ensure_mail
	ensure_clamd
	write_env
	wait_jaeger_build
	# The tests start their own OpenID providers and Jaeger from these binaries.
	SHIPFILE_OIDC_PROVIDER_BIN=$(oidc_provider_bin)
	SHIPFILE_JAEGER_BIN=$(jaeger_bin)
	export SHIPFILE_OIDC_PROVIDER_BIN SHIPFILE_JAEGER_BIN
	unlock
	load_env
	log "running the tests (make test-race)"
	set +e
	make -C "$ROOT" --no-print-directory test-race
	rc=$?
	set -e
	exit "$rc"
}

test_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if ((${#STARTED[@]} > 0)); then
		log "stopping what this test run started: ${STARTED[*]}"
		stop_all "${STARTED[@]}" || true
	fi
	exit "$rc"
}

cmd_status() {
	local f name pid
	mkdir -p "$PIDS"
	for f in "$PIDS"/*.pid; do
		[[ -e $f ]] || { log "dev.sh runs nothing"; return; }
		name=${f##*/}
		name=${name%.pid}
		pid=$(pid_of "$name")
		if [[ -n $pid ]]; then
			printf '%-10s running (pid %s)\n' "$name" "$pid"
		else
			printf '%-10s not running (stale pid file removed)\n' "$name"
		fi
	done
	[[ ! -f $ENV_FILE ]] || {
		echo
		show_env
	}
}

# cmd_bench CMD...: infra, the bench's PostgreSQL (ensure_bench_pg), then CMD with
# SHIPFILE_TEST_DATABASE_URL on it and SHIPFILE_BENCH_PG saying which server it is.
cmd_bench() {
	(($# > 0)) || die "usage: dev.sh bench CMD [ARG...]"
	prepare
	infra
	keep_mail_settings
	# make bench starts clamd first (dev.sh clamd): keep it for the scan row.
	keep_clamd_settings
	write_env
	if caller_set SHIPFILE_TEST_DATABASE_URL; then
		BENCH_PG_ORIGIN="the caller's SHIPFILE_TEST_DATABASE_URL"
	else
		ensure_bench_pg
	fi
	unlock
	load_env
	if ! caller_set SHIPFILE_TEST_DATABASE_URL; then
		export SHIPFILE_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$BENCH_PG_PORT/postgres?sslmode=disable"
	fi
	export SHIPFILE_BENCH_PG="$BENCH_PG_ORIGIN"
	cd "$ROOT"
	exec "$@"
}

cmd_exec() {
	(($# > 0)) || die "usage: dev.sh exec CMD [ARG...]"
	load_env
	cd "$ROOT"
	exec "$@"
}

usage() {
	sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

main() {
	local cmd=${1:-}
	(($# == 0)) || shift
	case $cmd in
	infra) cmd_infra ;;
	clamd) cmd_clamd ;;
	up) cmd_up ;;
	down) cmd_down ;;
	reset) cmd_reset "$@" ;;
	test) cmd_test ;;
	status) cmd_status ;;
	exec) cmd_exec "$@" ;;
	bench) cmd_bench "$@" ;;
	-h | --help | help) usage ;;
	*)
		usage >&2
		exit 2
		;;
	esac
}

main "$@"
