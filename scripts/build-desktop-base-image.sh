#!/usr/bin/env bash
# Build the desktop base image (scripts/lib/debootstrap-image.sh), on which the reference desktop, the reference
# browser and the test servers are layers (build_layered_image: each shares its layers and its packages' install):
#   the Debian base (scripts/build-debian-base-image.sh: minbase, user "workspace") with a layer of images/desktop
#   (packages: Xvnc, openbox, xterm, sound; rootfs overlay), no setuid/setgid bits
#   -> docker commit as workspace-server/desktop-base:<12 hex of sha256(both recipes + these scripts)>
# It runs as a desktop without the server-session bridges, but workspaces use the desktop image.
#
# stdout: ONLY the image tag (last line). Progress goes to stderr. If the tag already exists locally, exits at once.
# Env: DEBIAN_MIRROR (default: read from this machine's apt sources),
#      DESKTOP_BUILD_TIMEOUT (seconds for the layer, default 1200).
set -euo pipefail
umask 022

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd -- "$SCRIPT_DIR/.." && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/debootstrap-image.sh
. "$SCRIPT_DIR/lib/debootstrap-image.sh"

IMAGE_REPO=workspace-server/desktop-base
BASE_SCRIPT=build-debian-base-image.sh
RECIPE_RELS=(images/debian-base images/desktop)
LAYER_RELS=(images/desktop)
HASHED_RELS=(scripts/build-desktop-base-image.sh scripts/build-debian-base-image.sh scripts/lib/debootstrap-image.sh)
IMAGE_CMD='["/usr/local/bin/start-desktop"]'
IMAGE_MESSAGE="workspace-server desktop base (bookworm minbase, Xvnc, openbox, xterm, sound)"
BUILD_TIMEOUT="${DESKTOP_BUILD_TIMEOUT:-1200}"

[ -f "$REPO_DIR/images/desktop/packages.txt" ] || die "missing images/desktop/packages.txt"
[ -f "$REPO_DIR/images/desktop/rootfs/usr/local/bin/start-desktop" ] || die "missing images/desktop/rootfs/usr/local/bin/start-desktop"
build_layered_image
