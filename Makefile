# shipfile — `make` lists the targets. Each Go target loops over the modules of go.work.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go
# The modules of go.work, listed explicitly (check-modules fails when the two differ);
# SERVICES are the ones with binaries; cli is the command line, bin/shipfile (static).
MODULES := bench cli deploy pkg proto services/gateway services/mailer services/expiry services/webhooks services/scanner
SERVICES := services/gateway services/mailer services/expiry services/webhooks services/scanner
BIN := $(CURDIR)/bin
# `go list -m -versions honnef.co/go/tools`: v0.8.2 is staticcheck 2026.2.2 (knows Go 1.26).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# `go list -m -versions sigs.k8s.io/kustomize/kustomize/v5`: v5.8.2 is the newest that builds
# with Go 1.26 (v5.8.3 wants 1.27); deploy/go.mod pins its library, kustomize/api v0.21.2.
KUSTOMIZE_VERSION := v5.8.2
KUSTOMIZE := $(HOME)/.cache/shipfile/bin/kustomize

.PHONY: help up down reset test test-race test-faults test-scale bench lint fmt generate check-generated migrate assets build clean check-modules k8s

help: ## list the targets
	@echo "usage: make <target>"
	@awk 'BEGIN { FS = ":.*## " } /^[a-z0-9-]+:.*## / { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

up: ## start PostgreSQL, NATS, MinIO, maildev, clamd and the five services in the background
	@bash scripts/dev.sh up

down: ## stop what `make up` / `make test` started (and nothing else); the database stays
	@bash scripts/dev.sh down

reset: ## drop the development database of `make up` (asks first; `make reset YES=1` does not)
	@bash scripts/dev.sh reset $(if $(YES),--yes)

test: ## every test, with PostgreSQL, NATS, MinIO and SMTP started as by `make up`
	@bash scripts/dev.sh test

test-race: check-modules check-generated assets ## go test -race in each module (expects the infrastructure; see `make test`)
	@for m in $(MODULES); do \
		echo "==> go test -race $$m"; \
		if ! (cd $$m && $(GO) test -race -count=1 -timeout 20m ./...); then \
			echo "FAIL: module $$m; the modules after it were not run" >&2; exit 1; \
		fi; \
	done; \
	echo "ok: all modules pass: $(MODULES)"

# BENCH_FLAGS go to bench/cmd/shipbench, e.g. BENCH_FLAGS="-quick" (tiny sizes) or
# BENCH_FLAGS="-rows api,events -profile /tmp/prof"; the report is also written to .run/bench.md.
# It runs on a PostgreSQL configured like production: the shared one when it is, else a
# cluster of its own that scripts/dev.sh bench starts (and `dev.sh down` stops).
BENCH_FLAGS ?=
bench: check-modules assets ## measure speed against baselines of the same run (bench/cmd/shipbench, 18–22 min)
	@bash scripts/dev.sh clamd >/dev/null
	@bash scripts/dev.sh bench bash -c 'cd bench && $(GO) run ./cmd/shipbench -o "$(CURDIR)/.run/bench.md" $(BENCH_FLAGS)'

# test-faults: the fault scenarios of bench/faults (build tag faults: real processes
# killed and restarted under load; their figures also go to .run/faults.md), the browser's
# decryption of a 2 GiB end-to-end encrypted file to disk with its memory bounded
# (services/gateway/test/browser TestEndToEndLargeDownload with SHIPFILE_E2E_LARGE=2GiB,
# ~2 min on 2 cores; make test runs it with 256 MiB), then each fuzz target for FUZZTIME.
# FAULTS_FLAGS go to go test, e.g. FAULTS_FLAGS="-run SMTP" or FAULTS_FLAGS="-args -load 4s";
# FUZZTIME=0 skips the fuzzing.
FUZZTIME ?= 20s
FAULTS_FLAGS ?=
FUZZ_TARGETS := \
	services/gateway/internal/transport/httpapi:FuzzCreatePackageBody \
	services/gateway/internal/transport/httpapi:FuzzCreateTokenBody \
	services/gateway/internal/transport/httpapi:FuzzUploadMultipart \
	services/gateway/internal/transport/httpapi:FuzzBearerToken \
	services/gateway/internal/transport/httpapi:FuzzMagicLinkToken \
	services/webhooks/internal/app:FuzzRenderBody
test-faults: check-modules assets ## kill and restart real processes under load and check what arrived; fuzz each target (< 10 min)
	@bash scripts/dev.sh infra >/dev/null
	@bash scripts/dev.sh clamd >/dev/null
	@bash scripts/dev.sh exec bash -c 'cd bench/faults && SHIPFILE_FAULTS_REPORT="$(CURDIR)/.run/faults.md" \
		$(GO) test -tags faults -count=1 -timeout 6m -v $(FAULTS_FLAGS)'
	@bash scripts/dev.sh exec bash -c 'cd services/gateway && SHIPFILE_E2E_LARGE=2GiB \
		$(GO) test -count=1 -timeout 8m -run "^TestEndToEndLargeDownload$$" -v ./test/browser 2>&1 | grep -v "^ *{\"time\""; exit $${PIPESTATUS[0]}'
	@if [ "$(FUZZTIME)" != 0 ]; then for t in $(FUZZ_TARGETS); do \
		echo "==> fuzz $${t#*:} ($(FUZZTIME))"; \
		bash scripts/dev.sh exec $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) "./$${t%%:*}" \
			|| { echo "FAIL: fuzz $${t#*:}; the failing input is in $${t%%:*}/testdata/fuzz/$${t#*:}/" >&2; exit 1; }; \
	done; fi

# test-scale: bench/scale (build tag scale): two gateways behind a reverse proxy, three
# dispatchers, two mailers and two expiry schedulers on a three-node NATS cluster; a burst
# of package lifecycles with a NATS node and a dispatcher killed; prints how the work
# spread (also written to .run/scale.md). SCALE_FLAGS go to go test, e.g.
# SCALE_FLAGS="-args -packages 100".
SCALE_FLAGS ?=
test-scale: check-modules assets ## the system scaled out on one machine: every event, e-mail and expiry once, work spread (< 5 min)
	@bash scripts/dev.sh infra >/dev/null
	@bash scripts/dev.sh exec bash -c 'cd bench/scale && SHIPFILE_SCALE_REPORT="$(CURDIR)/.run/scale.md" \
		$(GO) test -tags scale -count=1 -timeout 5m -v $(SCALE_FLAGS) 2>&1 | grep -v "^ *\[[0-9]*\] "; exit $${PIPESTATUS[0]}'

lint: check-modules check-generated assets ## go vet + staticcheck in each module; redocly lint of proto/openapi.yaml
	@for m in $(MODULES); do \
		echo "==> vet + staticcheck $$m"; \
		(cd $$m && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...) || { echo "FAIL: lint in $$m" >&2; exit 1; }; \
	done
	@echo "==> redocly lint proto/openapi.yaml"
	@bash scripts/lint-openapi.sh

fmt: check-modules ## gofmt -w every module
	@for m in $(MODULES); do gofmt -l -w $$m; done

generate: ## regenerate code (sqlc, oapi-codegen, protobuf): scripts/generate.sh
	@bash scripts/generate.sh

check-generated: ## fail when a service's sqlc code is stale (sqlc diff against its queries and the migrations)
	@bash scripts/generate.sh check

migrate: build ## apply the schema migrations (bin/shipctl migrate, settings from .run/env)
	@bash scripts/dev.sh exec bin/shipctl migrate

assets: ## fetch the API docs assets (Swagger UI, ReDoc): scripts/assets.sh
	@bash scripts/assets.sh

build: assets ## build the binaries into bin/: gateway shipctl mailer expiry webhooks scanner shipfile
	@mkdir -p $(BIN)
	@for m in $(SERVICES); do \
		echo "==> go build $$m"; \
		(cd $$m && $(GO) build -o $(BIN)/ ./cmd/...) || { echo "FAIL: build in $$m" >&2; exit 1; }; \
	done
	@echo "==> go build cli (static: CGO_ENABLED=0)"
	@cd cli && CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cmd/... || { echo "FAIL: build in cli" >&2; exit 1; }

k8s: ## render the production Kubernetes manifests (kustomize build deploy/k8s/overlays/production)
	@if [[ "$$($(KUSTOMIZE) version 2>/dev/null)" != "$(KUSTOMIZE_VERSION)" ]]; then \
		echo "installing kustomize $(KUSTOMIZE_VERSION) into $(dir $(KUSTOMIZE))" >&2; \
		GOWORK=off GOFLAGS= GOBIN=$(dir $(KUSTOMIZE)) $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION) >&2; \
	fi
	@$(KUSTOMIZE) build deploy/k8s/overlays/production

check-modules: ## fail when MODULES and the modules of go.work differ (skipped for `make X MODULES=...`)
ifneq ($(origin MODULES),command line)
	@want=$$($(GO) work edit -json | sed -n 's/^[[:space:]]*"DiskPath": "\.\/\(.*\)"[,]*$$/\1/p' | sort); \
	have=$$(printf '%s\n' $(MODULES) | sort); \
	if [ "$$want" != "$$have" ]; then \
		echo "Makefile MODULES ($$(echo $$have)) differ from go.work ($$(echo $$want)); update MODULES" >&2; exit 1; \
	fi
else
	@:
endif

clean: ## remove bin/ and the Go test cache (.run/ stays: `make down` first)
	rm -rf $(BIN)
	$(GO) clean -testcache
