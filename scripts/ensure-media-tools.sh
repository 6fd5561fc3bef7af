#!/usr/bin/env bash
# Ensure ffmpeg and ffprobe (Debian package ffmpeg) are installed: the worker turns session recordings into
# video with them, and the recording tests read the result back with ffprobe.
#  - fast path: both binaries present -> one line, exit 0 without touching apt
#  - otherwise apt-installs the Debian package (needs root or passwordless sudo); concurrent runs share the apt lock
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"

if have ffmpeg && have ffprobe; then
  log "ffmpeg is installed"
  exit 0
fi
with_lock apt 600
if have ffmpeg && have ffprobe; then
  log "ffmpeg is installed"
  exit 0
fi
apt_install ffmpeg
have ffmpeg && have ffprobe || die "package ffmpeg installed but ffmpeg or ffprobe is missing"
log "installed ffmpeg"
