#!/usr/bin/env bash
# Build the reference browser image the same way as the desktop (scripts/lib/debootstrap-image.sh): the desktop
# base (scripts/build-desktop-base-image.sh: Xvnc, openbox, xterm) with a layer of images/browser (Debian's
# chromium, run as a kiosk that opens WORKSPACE_URL; `workspace-browser-open` points it at another URL: the image's
# go command).
#   -> docker commit as workspace-server/browser:<12 hex of sha256(both recipes + these scripts)>
#
# stdout: ONLY the image tag (last line). Progress goes to stderr:
#   tag=$(scripts/build-browser-image.sh | tail -1)
# If the tag already exists locally, exits immediately.
# Env: DEBIAN_MIRROR (default: read from this machine's apt sources),
#      BROWSER_BUILD_TIMEOUT (seconds for debootstrap, default 1200).
set -euo pipefail
umask 022

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd -- "$SCRIPT_DIR/.." && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/debootstrap-image.sh
. "$SCRIPT_DIR/lib/debootstrap-image.sh"

IMAGE_REPO=workspace-server/browser
BASE_SCRIPT=build-desktop-base-image.sh
RECIPE_RELS=(images/debian-base images/desktop images/browser)
LAYER_RELS=(images/browser)
HASHED_RELS=(scripts/build-browser-image.sh scripts/build-desktop-base-image.sh scripts/build-debian-base-image.sh scripts/lib/debootstrap-image.sh)
IMAGE_CMD='["/usr/local/bin/start-browser"]'
IMAGE_MESSAGE="workspace-server reference browser (bookworm minbase, chromium kiosk)"
BUILD_TIMEOUT="${BROWSER_BUILD_TIMEOUT:-1200}"

[ -f "$REPO_DIR/images/browser/rootfs/usr/local/bin/start-browser" ] || die "missing images/browser/rootfs/usr/local/bin/start-browser"
build_layered_image
