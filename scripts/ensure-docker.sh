#!/usr/bin/env bash
# Ensure a Docker engine answers on /var/run/docker.sock.
#  - fast path: `docker info` works -> one line, exit 0
#  - installs the engine (Debian package docker.io) if dockerd is missing
#    (/usr/local/bin/docker may be a bare client without an engine)
#  - starts: dockerd --iptables=false --storage-driver=overlay2
#    log: /var/log/dockerd-workspace.log   pid: /var/run/dockerd-workspace.pid
#    (--iptables=false: Docker's NAT and FORWARD-policy rules are not needed for loopback-published workspaces
#    and would rewrite this host's firewall; netfilter itself works, see workspace-firewall.sh)
#  - installs the workspace isolation firewall (workspace-firewall.sh) for the local engine, every run
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"

SOCK=/var/run/docker.sock
LOG=/var/log/dockerd-workspace.log
PIDFILE=/var/run/dockerd-workspace.pid
WAIT_SECONDS="${ENSURE_DOCKER_TIMEOUT:-60}"

docker_answers() {
  have docker && timeout 10 docker info --format '{{.ServerVersion}}' >/dev/null 2>&1
}

find_dockerd() {
  local p
  for p in "$(command -v dockerd 2>/dev/null || true)" /usr/sbin/dockerd /usr/bin/dockerd; do
    [ -n "$p" ] && [ -x "$p" ] && { printf '%s' "$p"; return 0; }
  done
  return 1
}

log_tail() {
  if [ -r "$LOG" ]; then
    log "last lines of $LOG:"
    tail -n 40 "$LOG" >&2
  fi
}

if [ -n "${DOCKER_HOST:-}" ] && [ "${DOCKER_HOST}" != "unix://$SOCK" ]; then
  docker_answers || die "DOCKER_HOST=$DOCKER_HOST is set (operator-managed engine) but 'docker info' fails"
  log "docker engine at $DOCKER_HOST is up"
  exit 0
fi

# Workspaces on this engine must not reach the host or each other; without the firewall they could.
ensure_firewall() {
  "$SCRIPT_DIR/workspace-firewall.sh" || die "the workspace isolation firewall could not be installed"
}

if docker_answers; then
  log "docker engine is up"
  ensure_firewall
  exit 0
fi

with_lock docker 300
if docker_answers; then   # someone else started it while we waited for the lock
  log "docker engine is up"
  ensure_firewall
  exit 0
fi

if ! dockerd_bin="$(find_dockerd)"; then
  apt_install docker.io
  dockerd_bin="$(find_dockerd)" || die "docker.io installed but no dockerd binary found"
fi
have docker || die "no docker client on PATH (expected /usr/bin/docker from docker.io)"

# Already started by us and still starting up? Then only wait.
pid=""
if [ -r "$PIDFILE" ]; then
  pid="$(cat "$PIDFILE" 2>/dev/null || true)"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q dockerd "/proc/$pid/cmdline" 2>/dev/null; then
    log "dockerd (pid $pid) is already running; waiting for it to answer"
  else
    pid=""
  fi
fi

if [ -z "$pid" ]; then
  if pgrep -x dockerd >/dev/null 2>&1; then
    die "a dockerd process is running but 'docker info' fails on $SOCK; not starting a second one (check it, or stop it)"
  fi
  as_root mkdir -p "$(dirname "$LOG")"
  log "starting $dockerd_bin --iptables=false --storage-driver=overlay2 (log: $LOG)"
  # Detached from this session/terminal so it survives the calling npm/CI process.
  as_root sh -c '
    echo "=== $(date -Is) starting dockerd" >>"$2"
    nohup setsid "$1" --iptables=false --storage-driver=overlay2 </dev/null >>"$2" 2>&1 &
    echo $! >"$3"
  ' sh "$dockerd_bin" "$LOG" "$PIDFILE"
  pid="$(cat "$PIDFILE")"
fi

max=$(( WAIT_SECONDS * 2 ))
for (( i = 0; i < max; i++ )); do
  if docker_answers; then
    log "docker engine is up (dockerd pid $pid, $(docker info --format '{{.ServerVersion}} {{.Driver}}' 2>/dev/null))"
    ensure_firewall
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    log_tail
    die "dockerd (pid $pid) exited during startup; see $LOG"
  fi
  sleep 0.5
done
log_tail
die "docker engine did not answer on $SOCK within ${WAIT_SECONDS}s (dockerd pid $pid still running; see $LOG)"
