#!/usr/bin/env bash
# Fails when the entities and the migrations disagree: applies every migration to a scratch database,
# then asks TypeORM whether it would generate anything.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/common.sh
. scripts/lib/node.sh
use_project_node
ensure_node_modules
[ -d dist ] || npm run --silent build
scratch="ws_migration_check_$$"
export DATABASE_NAME=$scratch
trap 'node -e "require(\"./dist/libs/database/src/migrate\").dropDatabase(require(\"./dist/libs/common/src\").loadConfig(), \"$scratch\")"' EXIT
node dist/libs/database/src/migrate.js >/dev/null
if ! npx typeorm migration:generate migrations/Unapplied -d dist/apps/cli/src/data-source.js --dryrun --check; then
  echo "migration check: the entities differ from the migrations; run: npm run migration:generate -- <Name>" >&2
  exit 1
fi
echo "migration check: entities and migrations agree"
