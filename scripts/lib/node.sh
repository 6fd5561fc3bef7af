# shellcheck shell=bash
# The project's Node.js: 24 LTS. Source it (it sources scripts/lib/common.sh unless that is loaded); do not execute it.
#   use_project_node [quiet]  unless the `node` on PATH is already major 24: fetches the official Node.js 24 binaries
#                          once (from the npm registry, where they are republished as node-linux-<arch>; pinned
#                          by version and sha512 below) into the user's cache, then puts its bin first on PATH and
#                          points npm_config_nodedir at it (node-gyp builds native addons against its headers)
#   project_node_dir       prints that cache directory, fetching it if needed (the compose base image packs it)
#   ensure_node_modules    npm ci when node_modules is missing; when it was installed under another Node.js ABI
#                          (its stamp says which), npm rebuild (native addons: ssh2's sshcrypto, cpu-features)
#   npm_ci                 npm ci, then the stamp
# Env: NODE_FETCH_TIMEOUT (seconds, default 600) bounds the download.
# Decisions: docs/decisions/operations.md, "Node.js 24 LTS, fetched by the scripts".

# shellcheck source-path=SCRIPTDIR source=common.sh
declare -F with_lock >/dev/null || . "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"

PROJECT_NODE_MAJOR=24
PROJECT_NODE_VERSION=24.22.3
# `npm view node-linux-<arch>@$PROJECT_NODE_VERSION dist.integrity`
PROJECT_NODE_INTEGRITY_X64='sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA=='
PROJECT_NODE_INTEGRITY_ARM64='sha512-IZx0J52/1NDwAsY2iyWR9nlPIYuYviTWetjj8+ElvYQh2+XRhLfCfkbFEF/2O5vGI2hcUbyPNHV+nz342FbJXw=='
# Records under which Node.js node_modules was installed (its native addons are built for that ABI).
NODE_MODULES_STAMP=node_modules/.workspace-server-node

_ws_node_arch() {
  [ "$(uname -s)" = Linux ] || die "Node.js $PROJECT_NODE_VERSION is fetched for Linux only, not $(uname -s): install Node.js $PROJECT_NODE_MAJOR yourself"
  case "$(uname -m)" in
    x86_64|amd64) echo x64 ;;
    aarch64|arm64) echo arm64 ;;
    *) die "no Node.js $PROJECT_NODE_VERSION build for $(uname -m): install Node.js $PROJECT_NODE_MAJOR yourself and put it first on PATH" ;;
  esac
}

_ws_node_cache_root() {
  local base="${XDG_CACHE_HOME:-}"
  if [ -z "$base" ]; then
    [ -n "${HOME:-}" ] || die "neither XDG_CACHE_HOME nor HOME is set: nowhere to keep Node.js $PROJECT_NODE_VERSION"
    base="$HOME/.cache"
  fi
  printf '%s/workspace-server\n' "$base"
}

# A usable extraction: its node runs and is the pinned version.
_ws_node_dir_ok() { [ -x "$1/bin/node" ] && [ "$("$1/bin/node" --version 2>/dev/null)" = "v$PROJECT_NODE_VERSION" ]; }

# Downloads, verifies and extracts into $1 (which does not exist yet), in a subshell: its traps and lock end with it.
_ws_node_fetch() (
  dest="$1" arch="$2" integrity="$3"
  root="$(dirname -- "$dest")" pkg="node-linux-$arch@$PROJECT_NODE_VERSION"
  timeout_s="${NODE_FETCH_TIMEOUT:-600}"
  mkdir -p "$root" || die "cannot make $root"
  # One fetch at a time per cache (parallel scripts wait here, then find it done); fd 7, apart from with_lock's 9
  # and apt_install's 8, and released when this subshell ends.
  exec 7>"$dest.lock" || die "cannot open $dest.lock"
  flock -w "$(( timeout_s + 120 ))" 7 || die "timed out waiting for another script fetching Node.js into $dest (lock $dest.lock)"
  if _ws_node_dir_ok "$dest"; then exit 0; fi  # fetched by the script we waited for
  have npm || die "need npm (any Node.js) to fetch Node.js $PROJECT_NODE_VERSION; or install Node.js $PROJECT_NODE_MAJOR yourself"
  rm -rf "$dest".partial.*  # left by a killed fetch (none runs now: we hold the lock)
  tmp="$(mktemp -d)" || die "mktemp failed"
  unpack="$(mktemp -d "$dest.partial.XXXXXX")" || die "cannot make a directory beside $dest"
  trap 'rm -rf "$tmp" "$unpack"' EXIT
  log "fetching Node.js $PROJECT_NODE_VERSION ($pkg from the npm registry, ~55 MB) into $dest ..."
  # In the temporary directory: no project .npmrc applies. npm's own retries are bounded by the timeout.
  (cd "$tmp" && timeout --kill-after=10 "$timeout_s" npm pack "$pkg" --loglevel=error --no-fund --no-audit >/dev/null) \
    || die "could not download $pkg with npm pack within ${timeout_s}s (registry unreachable? set NODE_FETCH_TIMEOUT, or install Node.js $PROJECT_NODE_MAJOR yourself)"
  tgz="$tmp/node-linux-$arch-$PROJECT_NODE_VERSION.tgz"
  [ -s "$tgz" ] || die "npm pack $pkg made no $tgz"
  want="$(printf '%s' "${integrity#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')"
  got="$(sha512sum <"$tgz" | cut -d' ' -f1)"
  if [ -z "$want" ] || [ "$want" != "$got" ]; then
    die "$pkg: the tarball's sha512 does not match the one pinned in scripts/lib/node.sh (sha512 got: $got); not using it"
  fi
  tar -xzf "$tgz" -C "$unpack" --strip-components=1 --no-same-owner || die "cannot extract $tgz"
  chmod 0755 "$unpack"
  _ws_node_dir_ok "$unpack" || die "$pkg's bin/node does not run here or is not v$PROJECT_NODE_VERSION"
  [ -f "$unpack/include/node/node_version.h" ] || die "$pkg has no include/node headers"
  rm -rf "$dest"  # an unusable earlier extraction
  mv -T "$unpack" "$dest" || die "cannot move Node.js into $dest"
  log "Node.js $PROJECT_NODE_VERSION is in $dest"
)

project_node_dir() {
  local arch integrity dest
  arch="$(_ws_node_arch)" || exit 1
  case "$arch" in x64) integrity="$PROJECT_NODE_INTEGRITY_X64" ;; arm64) integrity="$PROJECT_NODE_INTEGRITY_ARM64" ;; esac
  dest="$(_ws_node_cache_root)/node-v$PROJECT_NODE_VERSION-linux-$arch" || exit 1
  if ! _ws_node_dir_ok "$dest"; then
    _ws_node_fetch "$dest" "$arch" "$integrity" || exit 1
  fi
  printf '%s\n' "$dest"
}

# shellcheck disable=SC2120  # its one argument is optional
use_project_node() {
  local major dir prefix quiet="${1:-}"
  major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || true)"
  if [ "$major" = "$PROJECT_NODE_MAJOR" ]; then
    # Already Node.js 24 (an earlier call, or one of the user's own): native addons build against its own headers
    # where it has them (a user's npmrc may name another Node.js's, e.g. nodedir=/usr for a system Node.js 20).
    prefix="$(dirname -- "$(dirname -- "$(readlink -f -- "$(command -v node)")")")"
    if grep -qs "^#define NODE_MAJOR_VERSION $PROJECT_NODE_MAJOR\$" "$prefix/include/node/node_version.h"; then
      export npm_config_nodedir="$prefix"
    fi
    return 0
  fi
  dir="$(project_node_dir)" || exit 1
  have npm || die "no npm on PATH: Node.js $PROJECT_NODE_VERSION from the npm registry comes without it"
  # npm's prefix defaults to its node's, which would now be the cache: keep the one it has here (where its global
  # config, e.g. a cafile, and global installs are).
  [ -n "${npm_config_prefix:-}" ] || npm_config_prefix="$(npm config get prefix 2>/dev/null)" || npm_config_prefix=
  [ -z "$npm_config_prefix" ] || export npm_config_prefix
  export PATH="$dir/bin:$PATH"
  export npm_config_nodedir="$dir"
  hash -r
  [ "$quiet" = quiet ] || log "using Node.js $(node --version) from $dir${major:+ (not the $major on PATH)}"
}

# "<major> <ABI>" of the node on PATH, e.g. "24 137".
# shellcheck disable=SC2016  # a JavaScript template literal
_ws_node_abi() { node -p '`${process.versions.node.split(".")[0]} ${process.versions.modules}`'; }

npm_ci() {
  npm ci --no-audit --no-fund || return
  _ws_node_addons_check
  _ws_node_abi >"$NODE_MODULES_STAMP"
}

# Dies naming the native addons in node_modules that the node on PATH refuses as built for another ABI.
_ws_node_addons_check() {
  local bad
  bad="$(find node_modules -path '*/build/Release/*.node' ! -path '*/obj.target/*' -print0 \
    | xargs -0 -r node -e 'for (const f of process.argv.slice(1)) { try { process.dlopen({ exports: {} }, require("path").resolve(f)); } catch (e) { if (/NODE_MODULE_VERSION|did not self-register/.test(e.message)) console.log(f); } }' | paste -sd' ')"
  [ -z "$bad" ] || die "native addons built for another Node.js than $(node --version) (npm_config_nodedir=${npm_config_nodedir:-unset}): $bad"
}

# In the project's directory, with use_project_node done.
ensure_node_modules() {
  local want stamp major abi was
  if [ ! -d node_modules ]; then
    log "installing npm packages"
    npm_ci || die "npm ci failed"
    return 0
  fi
  want="$(_ws_node_abi)" || die "node does not run"
  stamp="$(cat "$NODE_MODULES_STAMP" 2>/dev/null || true)"
  [ "$stamp" != "$want" ] || return 0
  # Installed under another Node.js (or before the stamp existed): its native addons may be built for another ABI.
  # npm rebuild runs every package's install scripts again, as npm ci did, without downloading anything.
  if [ -n "$stamp" ]; then read -r major abi <<<"$stamp"; was="Node.js $major (ABI $abi)"; else was="an unrecorded Node.js"; fi
  log "node_modules was installed under $was: rebuilding its native addons for Node.js $(node --version)"
  npm rebuild --no-audit --no-fund >/dev/null || die "npm rebuild failed; remove node_modules and run npm ci"
  _ws_node_addons_check
  printf '%s\n' "$want" >"$NODE_MODULES_STAMP"
}
