#!/usr/bin/env bash
# Build the reference desktop image without any container registry (scripts/lib/debootstrap-image.sh):
#   debootstrap (Debian bookworm, minbase + images/desktop/packages.txt + images/bridge/packages.txt)
#   + images/desktop/rootfs and images/bridge/rootfs (server-session bridges, the RDP relay) overlays
#   + user "workspace" (uid/gid 1000), no setuid/setgid bits
#   -> docker import as workspace-server/desktop:<12 hex of sha256(recipe + these scripts)>
#
# stdout: ONLY the image tag (last line). Progress goes to stderr:
#   tag=$(scripts/build-desktop-image.sh | tail -1)
# If the tag already exists locally, exits immediately.
# Env: DEBIAN_MIRROR (default: read from this machine's apt sources),
#      DESKTOP_BUILD_TIMEOUT (seconds for debootstrap, default 1200).
set -euo pipefail
umask 022

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd -- "$SCRIPT_DIR/.." && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/debootstrap-image.sh
. "$SCRIPT_DIR/lib/debootstrap-image.sh"

IMAGE_REPO=workspace-server/desktop
RECIPE_RELS=(images/desktop images/bridge)
HASHED_RELS=(scripts/build-desktop-image.sh scripts/lib/debootstrap-image.sh)
IMAGE_CMD='["/usr/local/bin/start-desktop"]'
IMAGE_MESSAGE="workspace-server reference desktop (bookworm minbase)"
BUILD_TIMEOUT="${DESKTOP_BUILD_TIMEOUT:-1200}"

[ -f "$REPO_DIR/images/desktop/packages.txt" ] || die "missing images/desktop/packages.txt"
[ -f "$REPO_DIR/images/desktop/rootfs/usr/local/bin/start-desktop" ] || die "missing images/desktop/rootfs/usr/local/bin/start-desktop"
build_debootstrap_image
