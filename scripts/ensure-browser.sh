#!/usr/bin/env bash
# Ensure Debian's Chromium builds are installed for the browser e2e suites and the benches (both drive them through
# playwright-core; test/e2e/browser.ts):
#   /usr/bin/chromium-headless-shell  package chromium-headless-shell: the headless shell, which the suites run
#   /usr/bin/chromium                 package chromium: the full browser, which the benches measure in
#  - fast path: both present -> one line, exit 0 without touching apt
#  - otherwise apt-installs the missing packages (never downloads browser builds)
#  - concurrent runs are serialised on the shared apt lock
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"

declare -A BINARIES=([chromium]=/usr/bin/chromium [chromium-headless-shell]=/usr/bin/chromium-headless-shell)

missing() {
  local package
  for package in "${!BINARIES[@]}"; do [ -x "${BINARIES[$package]}" ] || printf '%s\n' "$package"; done
}
installed() {
  log "chromium is installed ($("${BINARIES[chromium]}" --version 2>/dev/null | head -n 1 || echo "${BINARIES[chromium]}"); and its headless shell)"
}

if [ -z "$(missing)" ]; then installed; exit 0; fi

with_lock apt 600
packages="$(missing)"
if [ -z "$packages" ]; then installed; exit 0; fi   # installed by someone else while we waited for the lock

# shellcheck disable=SC2086 # word splitting wanted: package names
apt_install $packages

[ -z "$(missing)" ] || die "packages $packages installed but $(missing | tr '\n' ' ')still missing"
installed
