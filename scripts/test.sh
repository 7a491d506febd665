#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh Linux machine with Node 20, then runs it:
# npm dependencies, Docker (Debian's docker.io and a running dockerd, installed when missing; needs root), the
# locally built base image, the build, type checks, lint and import boundaries, then every jest tier.
# The last line printed is jest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."

node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a!==20||b<19){console.error(`Assay needs Node 20.19 or later 20.x, this is ${process.version}`);process.exit(1)}'

echo "== npm ci"
npm ci --no-audit --no-fund --loglevel=error

echo "== docker and the base image"
bash scripts/ensure-docker.sh
bash scripts/build-base-image.sh

echo "== build"
npm run --silent build

echo "== typecheck, lint, import boundaries"
npm run --silent typecheck
npm run --silent lint

echo "== tests"
exec npx jest --ci --selectProjects unit int e2e
