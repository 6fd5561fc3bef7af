#!/usr/bin/env bash
# Ensure a headless-capable Chromium is installed at /usr/bin/chromium for the browser-client e2e test
# (test/e2e/browser-client.e2e-spec.ts drives it through playwright-core).
#  - fast path: /usr/bin/chromium present -> one line, exit 0 without touching apt
#  - otherwise apt-installs the Debian package `chromium` (never downloads browser builds)
#  - concurrent runs are serialised on the shared apt lock
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"

CHROMIUM=/usr/bin/chromium

chromium_version() {
  "$CHROMIUM" --version 2>/dev/null | head -n 1
}

if [ -x "$CHROMIUM" ]; then
  log "chromium is installed ($(chromium_version || echo "$CHROMIUM"))"
  exit 0
fi

with_lock apt 600
if [ -x "$CHROMIUM" ]; then   # installed by someone else while we waited for the lock
  log "chromium is installed ($(chromium_version || echo "$CHROMIUM"))"
  exit 0
fi

apt_install chromium

[ -x "$CHROMIUM" ] || die "package chromium installed but $CHROMIUM is missing"
log "installed chromium ($(chromium_version || echo "$CHROMIUM"))"
