#!/usr/bin/env bash
# Writes migrations/<timestamp>-<Name>.ts with what the entities need beyond the existing migrations.
# Usage: npm run migration:generate -- AddThing
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/common.sh
. scripts/lib/node.sh
use_project_node
ensure_node_modules
name=${1:?usage: npm run migration:generate -- <Name>}
npm run --silent build
scratch="ws_migration_gen_$$"
export DATABASE_NAME=$scratch
trap 'node -e "require(\"./dist/libs/database/src/migrate\").dropDatabase(require(\"./dist/libs/common/src\").loadConfig(), \"$scratch\")"' EXIT
node dist/libs/database/src/migrate.js
npx typeorm migration:generate "migrations/$name" -d dist/apps/cli/src/data-source.js --pretty
npx eslint --fix migrations/ >/dev/null 2>&1 || true
