#!/usr/bin/env bash
# npm test: the whole suite against real PostgreSQL, Redis and Docker, which it installs and starts.
# Extra arguments go to jest (e.g. npm test -- test/e2e/users).
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[test] %s\n' "$*" >&2; }

[ -d node_modules ] || { log "installing npm packages"; npm ci --no-audit --no-fund; }
bash scripts/ensure-services.sh
bash scripts/ensure-docker.sh
bash scripts/ensure-test-tools.sh
bash scripts/ensure-browser.sh
bash scripts/ensure-media-tools.sh
# The images are built in the background (each is cached by a hash of its recipe, so on a machine that has built
# them this takes seconds) while the code is compiled and the unit tests run; the compose deployment's images,
# which only the last, "alone" group of e2e suites needs, while the other e2e suites run.
images=$(mktemp -d)
# A failed step ends the run: the builds still going end with it (each cleans up after itself).
trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$images"' EXIT
# The four test images are built at the same time. None is made from another (each is its own debootstrap rootfs,
# scripts/lib/debootstrap-image.sh; the servers image is committed from its own base; the compose images, built
# later, use none of them). What they share is debootstrap's package cache, /var/cache/workspace-server/debootstrap,
# and two debootstraps must not fill it at once: a missing .deb is downloaded straight to its final name in the
# cache (wget -O, no temporary file, no lock), and a second run that finds the half-written file fails its checksum,
# deletes it and downloads it again under the first one, which may then copy a truncated .deb into its rootfs or
# give up after its retries. A cached .deb whose checksum matches is only read (and copied into the rootfs). So when
# an image is to be built, one `debootstrap --download-only` of the packages of the images to build fills the cache
# first, and the builds only read it: debootstrap takes the first of alternative dependencies whatever else is
# installed, so what a union of package lists needs is the union of what each needs. (A cache dir per image would
# need a change to debootstrap-image.sh, whose content is part of every image's tag, and would download the
# packages they have in common once per image.)
test_image_recipes=(  # name, build script, the tag's repository and recipe directories (as in the script)
  "desktop build-desktop-image.sh workspace-server/desktop images/desktop images/bridge"
  "browser build-browser-image.sh workspace-server/browser images/desktop images/browser"
  "egress build-egress-image.sh workspace-server/egress images/egress"
  "servers build-test-server-images.sh workspace-server/test-servers images/test-servers"
)
# Fills debootstrap's cache with the packages of the test images that are not built yet (nothing to do, and no
# network, when all are). Explicit checks, whether `set -e` applies or not.
seed_debootstrap_cache() (
  # shellcheck source-path=SCRIPTDIR source=lib/common.sh
  . scripts/lib/common.sh
  # shellcheck source-path=SCRIPTDIR source=lib/debootstrap-image.sh
  . scripts/lib/debootstrap-image.sh
  # shellcheck disable=SC2034  # REPO_DIR, RECIPE_RELS and HASHED_RELS are the library's inputs to _dbi_recipe_hash
  REPO_DIR=$PWD
  local entry name script repo rels recipes=() packages mirror cache=/var/cache/workspace-server/debootstrap
  for entry in "${test_image_recipes[@]}"; do
    read -r name script repo rels <<<"$entry"
    read -r -a RECIPE_RELS <<<"$rels"
    # shellcheck disable=SC2034
    HASHED_RELS=("scripts/$script" scripts/lib/debootstrap-image.sh)
    docker image inspect "$repo:$(_dbi_recipe_hash)" >/dev/null 2>&1 || recipes+=("${RECIPE_RELS[@]}")
  done
  [ "${#recipes[@]}" -gt 0 ] || return 0
  # Also keeps the builds from each installing debootstrap at the same time on a fresh machine.
  ( with_lock apt 600
    have debootstrap || apt_install debootstrap
    [ -r /usr/share/keyrings/debian-archive-keyring.gpg ] || apt_install debian-archive-keyring ) || exit 1
  packages="$(for d in "${recipes[@]}"; do [ ! -f "$d/packages.txt" ] || sed -e 's/#.*//' "$d/packages.txt"; done |
    tr -s ' \t\r\n' '\n' | sed '/^$/d' | LC_ALL=C sort -u | paste -sd, -)"
  mirror="$(debian_mirror bookworm)" || exit 1
  as_root mkdir -p "$cache" /var/tmp || exit 1
  _seed_target="$(as_root mktemp -d /var/tmp/workspace-debootstrap-seed.XXXXXX)" || exit 1
  trap 'as_root rm -rf --one-file-system "$_seed_target"' EXIT
  local start=$SECONDS
  log "filling $cache for $(printf '%s\n' "${recipes[@]}" | LC_ALL=C sort -u | paste -sd' ' -) (debootstrap --download-only)"
  if ! as_root timeout --kill-after=30 1200 debootstrap --download-only --variant=minbase --include="$packages" \
      --cache-dir="$cache" bookworm "$_seed_target" "$mirror" >"$images/debootstrap-seed.log" 2>&1; then
    tail -n 40 "$images/debootstrap-seed.log" >&2
    die "debootstrap --download-only failed (or exceeded 1200s)"
  fi
  log "debootstrap cache filled in $(( SECONDS - start ))s"
)
# Each build's stdout (its tag: the last line) into $images/<name>.tag; its stderr to ours, with the lines it does
# not prefix itself (debootstrap's) prefixed with its name. The first failure ends the run and the other builds
# (they stop after their current step, which the scripts' timeouts bound).
build_test_images() {
  local entry name script pid rc
  local -A building=()  # pid -> "name script"
  trap 'kill "${!building[@]}" 2>/dev/null; exit 143' TERM  # from the EXIT trap above
  seed_debootstrap_cache &  # in the background, so that the trap runs at once
  building[$!]="cache"
  wait "$!" || { log "filling the debootstrap cache for the test images failed"; return 1; }
  building=()
  for entry in "${test_image_recipes[@]}"; do
    read -r name script _ <<<"$entry"
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
npm run --silent build
# Unit tests, two files at a time (jest would take one worker on two cores).
npx jest "$@" --selectProjects unit --maxWorkers=2 --passWithNoTests
wait "$test_images" || { log "building the test images failed"; exit 1; }
WS_TEST_DESKTOP_IMAGE=$(cat "$images/desktop.tag") WS_TEST_BROWSER_IMAGE=$(cat "$images/browser.tag")
WS_TEST_EGRESS_IMAGE=$(cat "$images/egress.tag") WS_TEST_SERVERS_IMAGE=$(cat "$images/servers.tag")
export WS_TEST_DESKTOP_IMAGE WS_TEST_BROWSER_IMAGE WS_TEST_EGRESS_IMAGE WS_TEST_SERVERS_IMAGE
log "images: desktop $WS_TEST_DESKTOP_IMAGE, browser $WS_TEST_BROWSER_IMAGE, egress $WS_TEST_EGRESS_IMAGE, test servers $WS_TEST_SERVERS_IMAGE"
# The compose deployment's images: the service image (Dockerfile, once per source hash) on a Node.js 20 base, and
# PostgreSQL and Redis, all made from Debian packages (test/e2e/compose.e2e-spec.ts).
bash scripts/build-compose-images.sh >"$images/compose.env" &
compose_images=$!
use_compose_images() {
  wait "$compose_images" || { log "building the compose images failed"; return 1; }
  while IFS= read -r line; do export "${line?}"; log "compose image $line"; done <"$images/compose.env"
}
# Every e2e suite's api and worker log into test-results/logs/<run>/<suite>.log beside the secrets the suite used
# (test/e2e/harness.ts); the last step fails if any of those secrets is in any of those logs.
WS_TEST_LOG_DIR="test-results/logs/run-$(date -u +%Y%m%dT%H%M%SZ)-$$"
export WS_TEST_LOG_DIR
# e2e: each file has its own database, Redis prefix and deployment id, so the whole suite runs E2E_WORKERS files at
# a time (default 2), then the few that need the machine to themselves (E2E_ALONE in jest.config.js) one by one.
# Files named on the command line run one at a time, as before. --forceExit: a handle a failed test leaves open
# must not keep the run from ending (the failure is already reported).
if [ "$#" -eq 0 ]; then
  WS_E2E_GROUP=shared npx jest --selectProjects e2e --maxWorkers="${E2E_WORKERS:-2}" --passWithNoTests --forceExit || e2e_failed=1
  use_compose_images
  WS_E2E_GROUP=alone npx jest --selectProjects e2e --runInBand --passWithNoTests --forceExit || e2e_failed=1
else
  use_compose_images
  npx jest "$@" --selectProjects e2e --runInBand --passWithNoTests --forceExit || e2e_failed=1
fi
if [ -d "$WS_TEST_LOG_DIR" ]; then node scripts/check-log-secrets.js "$WS_TEST_LOG_DIR"; fi
[ -z "${e2e_failed:-}" ]
