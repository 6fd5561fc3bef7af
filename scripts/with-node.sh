#!/usr/bin/env bash
# Runs a command under the project's Node.js 24 (scripts/lib/node.sh: the `node` on PATH when it is 24, else the
# official binaries fetched once into the user's cache), with node_modules' native addons built for it. The
# package.json scripts that run the project's code or its tests (cli, migration:run, test:unit, test:e2e, openapi) go
# through it, so `npm run …` runs them on Node.js 24 whatever node runs npm.
# Usage: bash scripts/with-node.sh <command> [args...]   (e.g. node dist/apps/cli/src/main.js --help)
set -euo pipefail
[ "$#" -gt 0 ] || { echo "usage: $0 <command> [args...]" >&2; exit 2; }
SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/node.sh
. "$SCRIPT_DIR/lib/node.sh"
use_project_node quiet
(cd "$SCRIPT_DIR/.." && ensure_node_modules)
exec "$@"
