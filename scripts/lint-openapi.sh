#!/usr/bin/env bash
# Lints proto/openapi.yaml with redocly (`make lint`): @redocly/cli pinned by
# proto/lint/package-lock.json, installed with npm ci into proto/lint/node_modules when
# missing or installed from another lock (like scripts/assets.sh); npm's own cache
# (~/.npm) serves later installs offline (--prefer-offline). The rules are redocly's
# recommended set, less those proto/lint/redocly.yaml turns off with its reasons. Any
# warning fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/proto/lint"

stamp="$dir/node_modules/.shipfile-lock"
if [[ ! -f "$stamp" ]] || ! cmp -s "$dir/package-lock.json" "$stamp"; then
	command -v npm >/dev/null || { echo "lint-openapi: npm is required (Node.js 20.19+ or 22.12+)" >&2; exit 1; }
	(cd "$dir" && npm ci --silent --no-progress --no-audit --no-fund --prefer-offline)
	cp "$dir/package-lock.json" "$stamp"
fi

cd "$dir"
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
out=$(node_modules/.bin/redocly lint --config redocly.yaml --format stylish ../openapi.yaml 2>&1) || {
	printf '%s\n' "$out" >&2
	echo "lint-openapi: proto/openapi.yaml has errors" >&2
	exit 1
}
# redocly exits 0 on warnings; a warning fails here too.
if grep -qiE '[0-9]+ warnings?|warning ' <<<"$out"; then
	printf '%s\n' "$out" >&2
	echo "lint-openapi: proto/openapi.yaml has warnings" >&2
	exit 1
fi
echo "ok: proto/openapi.yaml passes redocly lint"
