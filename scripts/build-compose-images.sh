#!/usr/bin/env bash
# Build the images of the compose deployment without any container registry (the compose test and operators
# without registry access use them; docker-compose.yml's defaults are the official images):
#   1. a Node.js 24 base: the Debian base (scripts/build-debian-base-image.sh: bookworm minbase, tini,
#      ca-certificates), plus the project's Node.js 24 (scripts/lib/node.sh: the official binaries from the user's
#      cache, fetched there once; `node` and its headers in /usr/local as in the official image), this machine's
#      npm (its whole directory, with the npm and npx links) and its extra CA certificates, user "node" (uid/gid 1000)
#      -> workspace-server/node24:<hash> (hash: the recipe, these scripts, the node and npm versions, the CAs)
#   2. PostgreSQL 15 and Redis 7 from Debian's postgresql-15 and redis-server (images/compose-deps, a layer on the
#      Debian base, two tags) -> workspace-server/postgres:<hash>, workspace-server/redis:<hash>
#   3. the service image: `docker build` of the repo's Dockerfile FROM (1)
#      -> workspace-server:<12 hex of sha256(the build context's files + the base tag)>, older tags removed
# Each step is skipped when its tag exists (cached by recipe / source hash).
#
# stdout: ONLY these lines (progress goes to stderr), ready for `export`:
#   WS_COMPOSE_IMAGE=workspace-server:…  WS_COMPOSE_NODE_BASE=…  WS_COMPOSE_POSTGRES_IMAGE=…  WS_COMPOSE_REDIS_IMAGE=…
# Env: DEBIAN_MIRROR (default: this machine's apt sources), COMPOSE_IMAGES_BUILD_TIMEOUT (debootstrap, s, 1200).
set -euo pipefail
umask 022

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd -- "$SCRIPT_DIR/.." && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/debootstrap-image.sh
. "$SCRIPT_DIR/lib/debootstrap-image.sh"
# shellcheck source-path=SCRIPTDIR source=lib/node.sh
. "$SCRIPT_DIR/lib/node.sh"

HASHED_RELS=(scripts/build-compose-images.sh scripts/build-debian-base-image.sh scripts/lib/debootstrap-image.sh scripts/lib/node.sh)
IMAGE_CMD='["/bin/sh"]'
BUILD_TIMEOUT="${COMPOSE_IMAGES_BUILD_TIMEOUT:-1200}"
image_exists() { docker image inspect "$1" >/dev/null 2>&1; }
# Removes the other tags of `tag`'s repository (earlier recipes or sources); one still used by a container stays.
prune_others() {
  docker images --format '{{.Repository}}:{{.Tag}}' "${1%:*}" | grep -vxF "$1" | xargs -r docker rmi >/dev/null 2>&1 || true
}
short_hash() { sha256sum | cut -c1-12; }

"$SCRIPT_DIR/ensure-docker.sh" >&2 || die "docker engine is not available"

# Runs `script` as root in a container of `from`, then flattens that container into `to` (docker export |
# docker import), so the library's metadata (USER workspace, DISPLAY, EXPOSE 5900) does not carry over.
# The container is removed whatever happens. Extra arguments are --change options of the import.
_cid="" _tmp_files=()
cleanup() {
  [ -z "$_cid" ] || docker rm -f "$_cid" >/dev/null 2>&1 || true
  [ "${#_tmp_files[@]}" -eq 0 ] || rm -rf "${_tmp_files[@]}"
}
trap cleanup EXIT
flatten() {
  local from="$1" to="$2" script="$3" copy_tar="$4"; shift 4
  _cid="$(docker create --user 0 --workdir / --entrypoint /bin/sh "$from" -c "$script")" || die "docker create $from failed"
  if [ -n "$copy_tar" ]; then docker cp - "$_cid:/" <"$copy_tar" || die "docker cp into $_cid failed"; fi
  docker start -a "$_cid" >&2 || die "preparing $to failed"
  docker export "$_cid" | docker import "$@" --message "workspace-server: $to" - "$to" >&2 || die "docker import $to failed"
  docker rm -f "$_cid" >/dev/null 2>&1 || true
  _cid=""
}
# The library's recipe hash of recipe directories, and its layered build (in a subshell: its traps and lock end with
# it). The final tags' hash covers this script too; the layer (an intermediate tag, kept) only the recipes, the
# base's script and the library, so a change of what this script does afterwards does not install it again.
recipe_hash() { local IMAGE_REPO=x; RECIPE_RELS=("$@"); _dbi_recipe_hash; }
debian_base() { bash "$SCRIPT_DIR/build-debian-base-image.sh" | tail -n 1; }
# A layer of recipe $2 on the Debian base (build_layered_image: apt in a container of it, committed on top).
build_layer() {
  ( IMAGE_REPO="$1"; BASE_SCRIPT=build-debian-base-image.sh; RECIPE_RELS=(images/debian-base "$2"); LAYER_RELS=("$2")
    IMAGE_MESSAGE="$3"; HASHED_RELS=(scripts/build-debian-base-image.sh scripts/lib/debootstrap-image.sh)
    build_layered_image ) | tail -n 1
}

# --- 1. Node.js 24 base -------------------------------------------------------------------------------------
# The project's Node.js 24 (fetched once into the user's cache, whatever `node` is on PATH) and this machine's npm
# (…/lib/node_modules/npm behind `npm` on PATH; its version is what the base has, whichever node runs it).
NODE_DIR="$(project_node_dir)" || exit 1
npm_cli="$(readlink -f -- "$(command -v npm)")" || die "no npm on PATH: the Node.js base takes this machine's npm"
NPM_DIR="${npm_cli%/bin/npm-cli.js}"
[ "$NPM_DIR" != "$npm_cli" ] && [ -f "$NPM_DIR/package.json" ] \
  || die "cannot find this machine's npm directory (…/node_modules/npm/bin/npm-cli.js) behind $(command -v npm)"
npm_version="$("$NODE_DIR/bin/node" -p 'require(process.argv[1]).version' "$NPM_DIR/package.json")" || die "cannot read $NPM_DIR/package.json"
EXTRA_CAS=/usr/local/share/ca-certificates
node_base_hash="$({ recipe_hash images/debian-base; "$NODE_DIR/bin/node" --version; echo "npm $npm_version"
  [ ! -d "$EXTRA_CAS" ] || find "$EXTRA_CAS" -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum; } | short_hash)"
NODE_BASE="workspace-server/node24:$node_base_hash"
if image_exists "$NODE_BASE"; then
  log "image $NODE_BASE is up to date"
else
  rootfs_tag="$(debian_base)"
  [ -n "$rootfs_tag" ] || die "the Debian base was not built"
  with_lock node-base-image 900
  if ! image_exists "$NODE_BASE"; then
    # Where the official image has them: /usr/local/bin/node, /usr/local/include/node (node-gyp in the image builds
    # against these: npm_config_nodedir), npm whole in /usr/local/lib/node_modules/npm (it may have been upgraded in
    # place) with its npm and npx links. Also the machine's own extra certificate authorities
    # (/usr/local/share/ca-certificates), which Node.js is told to trust as it is here (NODE_EXTRA_CA_CERTS): npm in
    # the build reaches the registry the way this machine does.
    stage="$(mktemp -d)" tarball="$(mktemp)"; _tmp_files+=("$stage" "$tarball")
    chmod 0755 "$stage"
    mkdir -p "$stage/usr/local/bin" "$stage/usr/local/include" "$stage/usr/local/lib/node_modules" "$stage/usr/local/share/doc/node"
    cp -a "$NODE_DIR/bin/node" "$stage/usr/local/bin/node" && cp -a "$NODE_DIR/include/node" "$stage/usr/local/include/node" \
      && cp -a "$NODE_DIR/LICENSE" "$stage/usr/local/share/doc/node/LICENSE" \
      && cp -a "$NPM_DIR" "$stage/usr/local/lib/node_modules/npm" \
      && ln -s ../lib/node_modules/npm/bin/npm-cli.js "$stage/usr/local/bin/npm" \
      && ln -s ../lib/node_modules/npm/bin/npx-cli.js "$stage/usr/local/bin/npx" \
      || die "cannot stage Node.js and npm in $stage"
    if [ -d "$EXTRA_CAS" ]; then mkdir -p "$stage$EXTRA_CAS" && cp -a "$EXTRA_CAS/." "$stage$EXTRA_CAS/" || die "cannot stage $EXTRA_CAS"; fi
    tar -C "$stage" --owner=0 --group=0 --numeric-owner -cf "$tarball" usr || die "cannot pack Node.js and npm"
    flatten "$rootfs_tag" "$NODE_BASE" '
      set -e
      usermod -l node -d /home/node -m workspace && groupmod -n node workspace
      update-ca-certificates >/dev/null
      node --version | grep -q "^v24\." && npm --version >/dev/null' "$tarball" \
      --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV npm_config_nodedir=/usr/local' \
      --change 'WORKDIR /' --change 'CMD ["node"]'
    log "built $NODE_BASE"
    prune_others "$NODE_BASE"
    # The Node.js 20 bases this script made before.
    docker images --format '{{.Repository}}:{{.Tag}}' workspace-server/node20 | xargs -r docker rmi >/dev/null 2>&1 || true
  fi
fi

# --- 2. PostgreSQL 15 and Redis 7 ---------------------------------------------------------------------------
deps_hash="$(recipe_hash images/debian-base images/compose-deps)"
POSTGRES_IMAGE="workspace-server/postgres:$deps_hash"
REDIS_IMAGE="workspace-server/redis:$deps_hash"
if image_exists "$POSTGRES_IMAGE" && image_exists "$REDIS_IMAGE"; then
  log "images $POSTGRES_IMAGE and $REDIS_IMAGE are up to date"
else
  rootfs_tag="$(build_layer workspace-server/compose-deps-rootfs images/compose-deps "workspace-server PostgreSQL and Redis rootfs (on the Debian base)")"
  [ -n "$rootfs_tag" ] || die "the PostgreSQL/Redis rootfs was not built"
  with_lock compose-deps-image 900
  deps_tag="workspace-server/compose-deps:$deps_hash"
  image_exists "$deps_tag" || flatten "$rootfs_tag" "$deps_tag" '
      set -e
      # The cluster the package made at install time is not used: the entrypoint initialises PGDATA.
      rm -rf /var/lib/postgresql/15 /etc/postgresql/15
      install -d -o postgres -g postgres -m 700 /var/lib/postgresql/data
      install -d -o postgres -g postgres -m 2775 /run/postgresql
      install -d -o redis -g redis -m 750 /data' "" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/lib/postgresql/15/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/sh"]'
  # Two tags of one rootfs (their layers are shared), each with the official image's user, command and port.
  commit_as() {
    local tag="$1"; shift
    image_exists "$tag" && return 0
    _cid="$(docker create "$deps_tag")" || die "docker create $deps_tag failed"
    docker commit "$@" "$_cid" "$tag" >&2 || die "docker commit $tag failed"
    docker rm -f "$_cid" >/dev/null 2>&1 || true
    _cid=""
    log "built $tag"
  }
  commit_as "$POSTGRES_IMAGE" --change 'USER postgres' --change 'WORKDIR /var/lib/postgresql' \
    --change 'ENV PGDATA=/var/lib/postgresql/data' --change 'EXPOSE 5432' \
    --change 'ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/postgres-entrypoint"]' --change 'CMD ["postgres"]'
  commit_as "$REDIS_IMAGE" --change 'USER redis' --change 'WORKDIR /data' --change 'EXPOSE 6379' \
    --change 'ENTRYPOINT ["/usr/bin/tini", "--"]' --change 'CMD ["redis-server"]'
  docker rmi "$deps_tag" >/dev/null 2>&1 || log "WARNING: could not untag $deps_tag"
  prune_others "$POSTGRES_IMAGE"; prune_others "$REDIS_IMAGE"; prune_others "$deps_tag"
fi

# --- 3. The service image -----------------------------------------------------------------------------------
# The build context as .dockerignore leaves it (what the Dockerfile copies), hashed with the base's tag.
app_hash="$(cd "$REPO_DIR" && {
  echo "$NODE_BASE"
  find Dockerfile .dockerignore package.json package-lock.json openapi.json tsconfig.json tsconfig.build.json apps libs migrations \
      -type f ! -name '*.spec.ts' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; } | short_hash)"
APP_IMAGE="workspace-server:$app_hash"
if image_exists "$APP_IMAGE"; then
  log "image $APP_IMAGE is up to date"
else
  with_lock app-image 1800
  if ! image_exists "$APP_IMAGE"; then
    start=$SECONDS
    log "building $APP_IMAGE (docker build FROM $NODE_BASE)"
    # Host network: the npm registry is reached as from this machine (the engine here does no NAT).
    docker build --network host --build-arg "BASE_IMAGE=$NODE_BASE" --label "workspace-server.source-hash=$app_hash" \
      -t "$APP_IMAGE" "$REPO_DIR" >&2 || die "docker build failed"
    log "built $APP_IMAGE in $(( SECONDS - start ))s ($(docker image inspect --format '{{.Size}}' "$APP_IMAGE" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"
    prune_others "$APP_IMAGE"
  fi
fi

printf 'WS_COMPOSE_IMAGE=%s\nWS_COMPOSE_NODE_BASE=%s\nWS_COMPOSE_POSTGRES_IMAGE=%s\nWS_COMPOSE_REDIS_IMAGE=%s\n' \
  "$APP_IMAGE" "$NODE_BASE" "$POSTGRES_IMAGE" "$REDIS_IMAGE"
