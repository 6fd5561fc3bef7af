#!/usr/bin/env bash
# npm test: the whole suite against real PostgreSQL, Redis and Docker, which it installs and starts.
# Extra arguments go to jest (e.g. npm test -- test/e2e/users).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/common.sh
. scripts/lib/node.sh
# Node.js 24 for this run and everything it starts (jest, the api and workers it spawns).
use_project_node
# Each line says how far into the run it is (bash's SECONDS), so a slow phase shows in any log of the run.
log() { printf '[test %ss] %s\n' "$SECONDS" "$*" >&2; }
images=$(mktemp -d)
# A failed step ends the run: the jobs still going (npm ci, the image builds) end with it (each cleans up after itself).
trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$images"' EXIT

bash scripts/ensure-services.sh
# npm's packages download while Docker installs and starts (both mostly wait on the network on a fresh machine); a
# node_modules installed under another Node.js has its native addons rebuilt meanwhile (scripts/lib/node.sh).
ensure_node_modules & npm_packages=$!
bash scripts/ensure-docker.sh
# debootstrap, which every image build installs first (under the lock their package cache is filled under), before
# the host's test tools take apt's lock for a minute (scripts/lib/common.sh: apt installs take turns).
bash -c '. scripts/lib/common.sh; have debootstrap || apt_install debootstrap debian-archive-keyring'
# The images are built in the background (each is cached by a hash of its recipe, so on a machine that has built
# them this takes seconds) while npm's packages and the host's test tools install, the code compiles, the unit
# tests run and then the e2e suites that need no image; the compose deployment's images, which only the last,
# "alone" suites need, while the other e2e suites run.
# The four test images are started at the same time. They are layers on shared bases (the Debian base, and the
# desktop base for the desktop, the browser and the test servers), which the first build to need one makes under its
# lock while the others wait for it. Every layer's packages come from debootstrap's package cache, filled under a
# lock (scripts/lib/debootstrap-image.sh).
test_images_to_build=(  # name and build script
  "desktop build-desktop-image.sh" "browser build-browser-image.sh" "egress build-egress-image.sh" "servers build-test-server-images.sh"
)
# Each build's stdout (its tag: the last line) into $images/<name>.tag; its stderr to ours, with the lines it does
# not prefix itself (debootstrap's) prefixed with its name. The first failure ends the run and the other builds
# (they stop after their current step, which the scripts' timeouts bound).
build_test_images() {
  local entry name script pid rc
  local -A building=()  # pid -> "name script"
  trap 'kill "${!building[@]}" 2>/dev/null; exit 143' TERM  # from the EXIT trap above
  for entry in "${test_images_to_build[@]}"; do
    read -r name script <<<"$entry"
    bash "scripts/$script" >"$images/$name.out" 2> >(sed -u "/^\[$script\] /!s/^/[$script] /" >&2) &
    building[$!]="$name $script"
  done
  while [ "${#building[@]}" -gt 0 ]; do
    rc=0; wait -n -p pid "${!building[@]}" || rc=$?
    read -r name script <<<"${building[$pid]}"; unset "building[$pid]"
    tail -n 1 "$images/$name.out" >"$images/$name.tag"
    if [ "$rc" -ne 0 ] || [ ! -s "$images/$name.tag" ]; then
      log "no $name image: scripts/$script failed (exit $rc)"
      kill "${!building[@]}" 2>/dev/null || true
      return 1
    fi
  done
}
build_test_images &
test_images=$!
# The host's test tools (X tools, haproxy, promtool…), chromium and ffmpeg: apt, beside the image builds and the
# compile (their installs and the builds' take turns on apt: scripts/lib/common.sh).
( bash scripts/ensure-test-tools.sh && bash scripts/ensure-browser.sh && bash scripts/ensure-media-tools.sh ) &
host_tools=$!
wait "$npm_packages" || { log "installing or rebuilding the npm packages failed"; exit 1; }
log "compiling"
npm run --silent build
wait "$host_tools" || { log "installing the host's test tools failed"; exit 1; }
log "unit tests"
# Unit tests, two files at a time (jest would take one worker on two cores).
npx jest "$@" --selectProjects unit --maxWorkers=2 --passWithNoTests
# Every e2e suite's api and worker log into test-results/logs/<run>/<suite>.log beside the secrets the suite used
# (test/e2e/harness.ts); the last step fails if any of those secrets is in any of those logs.
WS_TEST_LOG_DIR="test-results/logs/run-$(date -u +%Y%m%dT%H%M%SZ)-$$"
export WS_TEST_LOG_DIR
# e2e: each file has its own database, Redis prefix and deployment id, so files run E2E_WORKERS at a time (default
# 3: docs/decisions/operations.md), in groups (test/e2e/groups.js): those that need no image while the images build,
# then the rest but a few, then those few in two lanes side by side, each lane one file at a time. Files named on the
# command line run one at a time, as before. --forceExit: a handle a failed test leaves open must not keep the run
# from ending (the failure is already reported).
if [ "$#" -eq 0 ]; then
  log "e2e: the early group (no image), ${E2E_WORKERS:-3} files at a time"
  WS_E2E_GROUP=early npx jest --selectProjects e2e --maxWorkers="${E2E_WORKERS:-3}" --passWithNoTests --forceExit || e2e_failed=1
fi
log "waiting for the test images"
wait "$test_images" || { log "building the test images failed"; exit 1; }
WS_TEST_DESKTOP_IMAGE=$(cat "$images/desktop.tag") WS_TEST_BROWSER_IMAGE=$(cat "$images/browser.tag")
WS_TEST_EGRESS_IMAGE=$(cat "$images/egress.tag") WS_TEST_SERVERS_IMAGE=$(cat "$images/servers.tag")
export WS_TEST_DESKTOP_IMAGE WS_TEST_BROWSER_IMAGE WS_TEST_EGRESS_IMAGE WS_TEST_SERVERS_IMAGE
log "images: desktop $WS_TEST_DESKTOP_IMAGE, browser $WS_TEST_BROWSER_IMAGE, egress $WS_TEST_EGRESS_IMAGE, test servers $WS_TEST_SERVERS_IMAGE"
# The compose deployment's images: the service image (Dockerfile, once per source hash) on a Node.js 24 base, and
# PostgreSQL and Redis, all made from Debian packages (test/e2e/compose.e2e-spec.ts).
bash scripts/build-compose-images.sh >"$images/compose.env" &
compose_images=$!
use_compose_images() {
  wait "$compose_images" || { log "building the compose images failed"; return 1; }
  while IFS= read -r line; do export "${line?}"; log "compose image $line"; done <"$images/compose.env"
}
if [ "$#" -eq 0 ]; then
  log "e2e: the shared group, ${E2E_WORKERS:-3} files at a time"
  WS_E2E_GROUP=shared npx jest --selectProjects e2e --maxWorkers="${E2E_WORKERS:-3}" --passWithNoTests --forceExit || e2e_failed=1
  use_compose_images
  log "e2e: the alone lanes, side by side"
  lanes=()
  for lane in $(node -p "Object.keys(require('./test/e2e/groups').E2E_ALONE_LANES).join(' ')"); do
    WS_E2E_GROUP=$lane npx jest --selectProjects e2e --runInBand --passWithNoTests --forceExit &
    lanes+=("$!")
  done
  for pid in "${lanes[@]}"; do wait "$pid" || e2e_failed=1; done
else
  use_compose_images
  npx jest "$@" --selectProjects e2e --runInBand --passWithNoTests --forceExit || e2e_failed=1
fi
if [ -d "$WS_TEST_LOG_DIR" ]; then node scripts/check-log-secrets.js "$WS_TEST_LOG_DIR"; fi
log "done"
[ -z "${e2e_failed:-}" ]
