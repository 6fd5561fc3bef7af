#!/usr/bin/env bash
# npm run bench: every benchmark, each printing its figures and ratios against a baseline measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/common.sh
. scripts/lib/node.sh
# Node.js 24 (fetched once into the user's cache unless `node` is already 24) for the build and every bench.
use_project_node
ensure_node_modules
bash scripts/ensure-services.sh
bash scripts/ensure-docker.sh
# websockify is the baseline of the stream gateway benchmark (Debian's package).
command -v websockify >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends websockify >/dev/null; }
# haproxy (Debian's) is the load balancer of the api replicas benchmark; never started as a service.
command -v haproxy >/dev/null || bash -c '. scripts/lib/common.sh; with_lock apt 600; apt_install haproxy'
WS_TEST_DESKTOP_IMAGE=$(bash scripts/build-desktop-image.sh | tail -1)
export WS_TEST_DESKTOP_IMAGE
npm run --silent build
# profile-sync.bench starts the project's S3 test server (scripts/s3-server.js) itself for its s3:// half.
# Each bench under a time bound (BENCH_TIMEOUT); a failing one is reported and the rest still run; non-zero if any failed.
exec bash scripts/run-benches.sh dist/bench/*.bench.js
