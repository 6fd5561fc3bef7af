# shellcheck shell=bash
# Shared helpers for scripts/*.sh. Source it; do not execute it.
# All diagnostics go to stderr so callers can capture stdout.

_ws_prog="$(basename -- "${0:-workspace}")"

log() { printf '[%s] %s\n' "$_ws_prog" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$_ws_prog" "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

# Run a command as root (directly, or via non-interactive sudo).
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif have sudo && sudo -n true 2>/dev/null; then
    sudo -n "$@"
  else
    die "need root (or passwordless sudo) to run: $*"
  fi
}

# Serialise concurrent invocations (npm start + npm test + CI) on a lock file.
# Usage: with_lock <name> <timeout-seconds>   (holds the lock on fd 9 until exit)
with_lock() {
  local name="$1" timeout="$2" dir=/var/lock
  [ -w "$dir" ] || dir="${TMPDIR:-/tmp}"
  exec 9>"$dir/workspace-server-$name.lock" || die "cannot open lock file $dir/workspace-server-$name.lock"
  if ! flock -w "$timeout" 9; then
    die "timed out after ${timeout}s waiting for lock $dir/workspace-server-$name.lock (another run in progress?)"
  fi
}

_WS_APT_UPDATED=0
_WS_POLICY_RCD_CREATED=0

_ws_remove_policy_rcd() {
  if [ "$_WS_POLICY_RCD_CREATED" -eq 1 ]; then
    as_root rm -f /usr/sbin/policy-rc.d || true
    _WS_POLICY_RCD_CREATED=0
  fi
}

# apt_install pkg...  — apt-get update (once per script run) + non-interactive install.
# Service auto-start by maintainer scripts is suppressed (we start services ourselves
# with explicit flags); a temporary /usr/sbin/policy-rc.d is removed afterwards.
# Installs from scripts running side by side (npm test installs the host's test tools while the image builds
# install debootstrap) take turns on a lock of their own (fd 8, apart from with_lock's fd 9): dpkg's lock alone would
# let one script remove the policy-rc.d another's install still relies on.
apt_install() {
  have apt-get || die "apt-get not found; install these packages manually: $*"
  local lock_dir=/var/lock
  [ -w "$lock_dir" ] || lock_dir="${TMPDIR:-/tmp}"
  exec 8>"$lock_dir/workspace-server-apt-install.lock" || die "cannot open $lock_dir/workspace-server-apt-install.lock"
  flock -w 900 8 || die "timed out after 900s waiting for another script's apt-get install"
  _ws_apt_install_locked "$@"  # installs, or dies (which releases the lock with the process)
  exec 8>&-
}

_ws_apt_install_locked() {
  local -a apt_opts=(-o DPkg::Lock::Timeout=300 -o Dpkg::Use-Pty=0 -o APT::Get::Assume-Yes=true)
  if [ "$_WS_APT_UPDATED" -eq 0 ]; then
    log "apt-get update ..."
    as_root env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" -qq update </dev/null >&2 \
      || die "apt-get update failed"
    _WS_APT_UPDATED=1
  fi
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
    as_root chmod 0755 /usr/sbin/policy-rc.d
    _WS_POLICY_RCD_CREATED=1
  fi
  log "apt-get install $* ..."
  local rc=0
  as_root env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" -qq install -y --no-install-recommends "$@" </dev/null >&2 || rc=$?
  _ws_remove_policy_rcd
  [ "$rc" -eq 0 ] || die "apt-get install $* failed (exit $rc)"
}

# Print the primary Debian archive URI configured in this machine's apt sources
# (the one serving the plain release suite, not -security/-updates). Env override:
# DEBIAN_MIRROR.
debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then printf '%s\n' "${DEBIAN_MIRROR%/}"; return 0; fi
  local suite="${1:-bookworm}" uri=""
  # deb822 *.sources files: stanzas separated by blank lines.
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    uri="$(awk -v suite="$suite" '
      function flush() { if (types ~ /(^| )deb( |$)/ && enabled != "no" && suites_ok && uris != "") { split(uris, u, " "); print u[1]; found=1; exit } }
      BEGIN { RS=""; FS="\n" }
      {
        types=""; uris=""; suites_ok=0; enabled="yes"
        for (i = 1; i <= NF; i++) {
          line = $i
          if (line ~ /^[ \t]*#/) continue
          if (match(line, /^[Tt]ypes:[ \t]*/))   { types = substr(line, RLENGTH + 1) }
          else if (match(line, /^URIs:[ \t]*/))   { uris = substr(line, RLENGTH + 1) }
          else if (match(line, /^[Ee]nabled:[ \t]*/)) { enabled = tolower(substr(line, RLENGTH + 1)) }
          else if (match(line, /^[Ss]uites:[ \t]*/)) {
            n = split(substr(line, RLENGTH + 1), s, /[ \t]+/)
            for (j = 1; j <= n; j++) if (s[j] == suite) suites_ok = 1
          }
        }
        flush()
      }' "$f")"
    [ -n "$uri" ] && break
  done
  # One-line-style sources.list (+ *.list).
  if [ -z "$uri" ]; then
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [ -r "$f" ] || continue
      uri="$(awk -v suite="$suite" '
        /^[ \t]*deb[ \t]/ {
          i = 2
          if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
          if ($(i + 1) == suite) { print $i; exit }
        }' "$f")"
      [ -n "$uri" ] && break
    done
  fi
  case "$uri" in
    http://*|https://*|file:/*) printf '%s\n' "${uri%/}" ;;
    *) die "could not find an http(s) Debian mirror for suite '$suite' in /etc/apt/sources.list{,.d/*}; set DEBIAN_MIRROR" ;;
  esac
}
