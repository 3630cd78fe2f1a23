#!/usr/bin/env bash
# generate.sh regenerates shipfile's generated code (`make generate`):
#
#   1. protobuf: proto/events/v1/*.proto → pkg/events/eventsv1/*.pb.go
#      (pkg/events reads the event types from this descriptor: the (event_type)
#      option of each field of Envelope.data)
#      (buf generate with proto/buf.yaml + proto/buf.gen.yaml, plugin protoc-gen-go),
#      then pkg/events/types.gen.go, the Type* constants of the event types, read off
#      that descriptor (pkg/events/internal/typegen; a test of pkg/events fails when stale)
#   2. sqlc:     every service's SQL (services/*/sqlc.yaml, every package it lists: the
#      gateway's internal/store/*.sql → internal/store/*.gen.go and each store package's
#      internal/store/<pkg>/queries.sql → internal/store/<pkg>/*.gen.go; the mailer's, the
#      expiry service's and the dispatcher's internal/store/queries.sql →
#      internal/store/db), each compiled against the one schema, services/gateway/migrations
#   3. oapi-codegen: proto/openapi.yaml → pkg/apiclient/client.gen.go (the REST API's
#      client and types, with pkg/apiclient/oapi-codegen.yaml)
#
# `generate.sh check` regenerates nothing: it fails when the sqlc code on disk differs
# from what the queries and the migrations give (sqlc diff in each service, which
# compares every package of its sqlc.yaml), e.g. after
# a migration or a queries.sql edit without `make generate`. `make test-race` and
# `make lint` run it; it takes well under a second once sqlc is in the cache.
#
# The tools are pinned below and installed with `go install module@version` into
# ${SHIPFILE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shipfile}/bin when missing or
# built from another version (the same cache scripts/dev.sh uses). Only the Go module
# proxy is needed. Without buf (e.g. it cannot be built here), protoc from the
# operating system's protobuf-compiler package is used instead when it is on PATH.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${SHIPFILE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shipfile}
CACHE_BIN=$CACHE/bin

# Pinned tools: module and version (`go list -m -versions MODULE` lists newer ones).
BUF_MODULE=github.com/bufbuild/buf
BUF_PKG=github.com/bufbuild/buf/cmd/buf
BUF_VERSION=v1.75.0
PROTOC_GEN_GO_MODULE=google.golang.org/protobuf
PROTOC_GEN_GO_PKG=google.golang.org/protobuf/cmd/protoc-gen-go
# Keep equal to google.golang.org/protobuf in pkg/go.mod: the generated code and the
# runtime it calls must agree.
PROTOC_GEN_GO_VERSION=v1.36.12
SQLC_MODULE=github.com/sqlc-dev/sqlc
SQLC_PKG=github.com/sqlc-dev/sqlc/cmd/sqlc
# v1.31.1 is the newest release (`go list -m -versions`), and its go.mod asks for Go 1.26.0.
SQLC_VERSION=v1.31.1
OAPI_CODEGEN_MODULE=github.com/oapi-codegen/oapi-codegen/v2
OAPI_CODEGEN_PKG=github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen
# Keep the runtime it calls, github.com/oapi-codegen/runtime in pkg/go.mod, at a version
# this generator supports.
OAPI_CODEGEN_VERSION=v2.8.2

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'generate: %s\n' "$*" >&2; exit 1; }

# go_tool NAME MODULE PACKAGE VERSION: prints the path of the pinned binary in the cache,
# installing it when absent or built from another version.
go_tool() {
	local name=$1 module=$2 pkg=$3 version=$4 bin=$CACHE_BIN/$1 have=""
	if [[ -x $bin ]]; then
		# The main module's version is on the "mod" line of `go version -m`.
		have=$(go version -m "$bin" 2>/dev/null | awk -v m="$module" '$1 == "mod" && $2 == m { print $3; exit }') || true
		if [[ $have == "$version" ]]; then
			printf '%s\n' "$bin"
			return 0
		fi
	fi
	command -v go >/dev/null || die "$name is not in $CACHE_BIN and Go is not installed to build it"
	log "installing $pkg@$version into $CACHE_BIN"
	mkdir -p "$CACHE_BIN"
	# Outside any module, so the repo's go.work does not take part.
	if ! (cd "$CACHE" && GOWORK=off GOFLAGS='' GOBIN=$CACHE_BIN go install "$pkg@$version") >&2; then
		return 1
	fi
	printf '%s\n' "$bin"
}

gen_proto() {
	local protoc_gen_go buf
	protoc_gen_go=$(go_tool protoc-gen-go "$PROTOC_GEN_GO_MODULE" "$PROTOC_GEN_GO_PKG" "$PROTOC_GEN_GO_VERSION") ||
		die "go install $PROTOC_GEN_GO_PKG@$PROTOC_GEN_GO_VERSION failed"
	# buf.gen.yaml names the plugin "protoc-gen-go": the pinned one comes first on PATH.
	PATH="$(dirname "$protoc_gen_go"):$PATH"
	export PATH
	mkdir -p "$ROOT/pkg/events/eventsv1"
	if buf=$(go_tool buf "$BUF_MODULE" "$BUF_PKG" "$BUF_VERSION"); then
		log "buf generate (proto/ → pkg/events/eventsv1)"
		(cd "$ROOT/proto" && "$buf" generate)
	elif command -v protoc >/dev/null; then
		log "buf unavailable; protoc $(protoc --version) (proto/ → pkg/events/eventsv1)"
		(cd "$ROOT/proto" && protoc -I . \
			--plugin=protoc-gen-go="$protoc_gen_go" \
			--go_out="$ROOT/pkg/events/eventsv1" \
			--go_opt=module=github.com/shipfile/shipfile/pkg/events/eventsv1 \
			events/v1/*.proto)
	else
		die "neither buf ($BUF_PKG@$BUF_VERSION) could be installed nor protoc found (apt-get install protobuf-compiler)"
	fi
	log "event type constants (pkg/events/eventsv1 → pkg/events/types.gen.go)"
	(cd "$ROOT/pkg" && go run ./events/internal/typegen/gentypes events/types.gen.go)
}

# sqlc_services prints the directories of the services with a sqlc.yaml, relative to ROOT.
sqlc_services() {
	local f
	for f in "$ROOT"/services/*/sqlc.yaml; do
		[[ -e $f ]] || die "no services/*/sqlc.yaml"
		f=${f%/sqlc.yaml}
		printf '%s\n' "${f#"$ROOT"/}"
	done
}

gen_sqlc() {
	local sqlc dir
	sqlc=$(go_tool sqlc "$SQLC_MODULE" "$SQLC_PKG" "$SQLC_VERSION") ||
		die "go install $SQLC_PKG@$SQLC_VERSION failed"
	for dir in $(sqlc_services); do
		log "sqlc generate ($dir)"
		(cd "$ROOT/$dir" && "$sqlc" generate)
	done
}

# check_sqlc fails when any service's generated code is stale (sqlc diff prints how).
check_sqlc() {
	local sqlc dir stale=()
	sqlc=$(go_tool sqlc "$SQLC_MODULE" "$SQLC_PKG" "$SQLC_VERSION") ||
		die "go install $SQLC_PKG@$SQLC_VERSION failed"
	for dir in $(sqlc_services); do
		log "sqlc diff ($dir)"
		if ! (cd "$ROOT/$dir" && "$sqlc" diff >&2); then
			stale+=("$dir")
		fi
	done
	if ((${#stale[@]} > 0)); then
		die "the sqlc code of ${stale[*]} is stale or its SQL does not compile against services/gateway/migrations: run make generate"
	fi
	log "sqlc code is up to date: $(sqlc_services | tr '\n' ' ')"
}

gen_openapi() {
	local oapi
	oapi=$(go_tool oapi-codegen "$OAPI_CODEGEN_MODULE" "$OAPI_CODEGEN_PKG" "$OAPI_CODEGEN_VERSION") ||
		die "go install $OAPI_CODEGEN_PKG@$OAPI_CODEGEN_VERSION failed"
	log "oapi-codegen (proto/openapi.yaml → pkg/apiclient)"
	(cd "$ROOT/pkg/apiclient" && "$oapi" -config oapi-codegen.yaml ../../proto/openapi.yaml)
}

case ${1:-} in
check)
	check_sqlc
	;;
"")
	gen_proto
	gen_sqlc
	gen_openapi
	log "generated code is up to date"
	;;
*)
	die "usage: generate.sh [check]"
	;;
esac
