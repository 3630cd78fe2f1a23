#!/usr/bin/env bash
# Installs the gateway's front-end assets (Swagger UI, ReDoc, tus-js-client for the web
# UI's resumable uploads, age-encryption and client-zip for end-to-end encryption) from
# the npm registry, pinned by services/gateway/web/package-lock.json, copies the files the
# gateway embeds into services/gateway/internal/docs/assets and bundles e2e-vendor.js with
# esbuild into e2e.bundle.js there (offline once npm ci ran). Skips work already done.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
web="$root/services/gateway/web"
out="$root/services/gateway/internal/docs/assets"

stamp="$web/node_modules/.shipfile-lock"
if [[ ! -f "$stamp" ]] || ! cmp -s "$web/package-lock.json" "$stamp"; then
	command -v npm >/dev/null || { echo "assets: npm is required (Node.js 20)" >&2; exit 1; }
	(cd "$web" && npm ci --silent --no-progress)
	cp "$web/package-lock.json" "$stamp"
fi

files=(
	"swagger-ui-dist/swagger-ui-bundle.js"
	"swagger-ui-dist/swagger-ui-standalone-preset.js"
	"swagger-ui-dist/swagger-ui.css"
	"swagger-ui-dist/favicon-32x32.png"
	"redoc/bundles/redoc.standalone.js"
	"tus-js-client/dist/tus.min.js"
)
mkdir -p "$out"
for f in "${files[@]}"; do
	src="$web/node_modules/$f"
	dst="$out/$(basename "$f")"
	[[ -f "$dst" && ! "$src" -nt "$dst" ]] && cmp -s "$src" "$dst" && continue
	cp "$src" "$dst"
done

# The end-to-end encryption bundle: rebuilt when its entry or the lock file is newer.
bundle="$out/e2e.bundle.js"
if [[ ! -f "$bundle" || "$web/e2e-vendor.js" -nt "$bundle" || "$stamp" -nt "$bundle" ]]; then
	"$web/node_modules/.bin/esbuild" "$web/e2e-vendor.js" --bundle --minify --format=iife \
		--target=es2022 --legal-comments=eof --log-level=warning --outfile="$bundle"
fi
