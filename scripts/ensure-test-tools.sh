#!/usr/bin/env bash
# Ensure the X tools the e2e tests need are installed:
#   Xvfb (xvfb), x11vnc (x11vnc), xsetroot (x11-xserver-utils), xdotool (xdotool): test/e2e/stream-rfb.e2e-spec.ts;
#   xfreerdp (freerdp2-x11): a native RDP client for test/e2e/server-sessions.e2e-spec.ts;
#   docker-compose (Debian's, 1.29): test/e2e/compose.e2e-spec.ts;
#   promtool (prometheus): test/structure/alert-rules.spec.ts checks deploy/prometheus/alerts.yml;
#   haproxy (haproxy): test/e2e/load-balancer.ts runs it (never as a service) in front of api replicas.
#  - fast path: all binaries present -> exit 0 without touching apt
#  - otherwise apt-installs the missing Debian packages (needs root or passwordless sudo)
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"

missing=()
have Xvfb || missing+=(xvfb)
have x11vnc || missing+=(x11vnc)
have xsetroot || missing+=(x11-xserver-utils)
have xdotool || missing+=(xdotool)
have xfreerdp || missing+=(freerdp2-x11)
have docker-compose || missing+=(docker-compose)
have promtool || missing+=(prometheus)
have haproxy || missing+=(haproxy)

if [ "${#missing[@]}" -eq 0 ]; then
  log "Xvfb, x11vnc, xsetroot, xdotool, xfreerdp, docker-compose, promtool and haproxy are installed"
  exit 0
fi

with_lock apt 600
apt_install "${missing[@]}"

for bin in Xvfb x11vnc xsetroot xdotool xfreerdp docker-compose promtool haproxy; do
  have "$bin" || die "$bin still missing after installing ${missing[*]}"
done
log "installed: ${missing[*]}"
