#!/usr/bin/env bash
# Build the reference desktop image without any container registry (scripts/lib/debootstrap-image.sh): the desktop
# base (scripts/build-desktop-base-image.sh: minbase + images/desktop) with a layer of images/bridge (server-session
# bridges, the RDP relay: packages and rootfs overlay), installed by apt in a container of the base, no
# setuid/setgid bits
#   -> docker commit as workspace-server/desktop:<12 hex of sha256(both recipes + these scripts)>
#
# stdout: ONLY the image tag (last line). Progress goes to stderr:
#   tag=$(scripts/build-desktop-image.sh | tail -1)
# If the tag already exists locally, exits immediately.
# Env: DEBIAN_MIRROR (default: read from this machine's apt sources),
#      DESKTOP_BUILD_TIMEOUT (seconds for debootstrap and for the layer, default 1200).
set -euo pipefail
umask 022

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd -- "$SCRIPT_DIR/.." && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/debootstrap-image.sh
. "$SCRIPT_DIR/lib/debootstrap-image.sh"

IMAGE_REPO=workspace-server/desktop
BASE_SCRIPT=build-desktop-base-image.sh
RECIPE_RELS=(images/debian-base images/desktop images/bridge)
LAYER_RELS=(images/bridge)
HASHED_RELS=(scripts/build-desktop-image.sh scripts/build-desktop-base-image.sh scripts/build-debian-base-image.sh scripts/lib/debootstrap-image.sh)
IMAGE_CMD='["/usr/local/bin/start-desktop"]'
IMAGE_MESSAGE="workspace-server reference desktop (bookworm minbase)"
BUILD_TIMEOUT="${DESKTOP_BUILD_TIMEOUT:-1200}"

[ -f "$REPO_DIR/images/bridge/packages.txt" ] || die "missing images/bridge/packages.txt"
build_layered_image
