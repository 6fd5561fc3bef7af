#!/usr/bin/env bash
# Build the egress sidecar image the same way as the desktop (scripts/lib/debootstrap-image.sh): the Debian base
# (scripts/build-debian-base-image.sh: bookworm minbase) with a layer of images/egress/packages.txt (wireguard-go,
# wireguard-tools, openvpn, nebula, iproute2, iptables) and images/egress/rootfs (the sidecar's entrypoint,
# egress-sidecar).
#   -> docker commit as workspace-server/egress:<12 hex of sha256(both recipes + these scripts)>
# The image's USER is the library's "workspace": the worker and the tests run the sidecar as root (User 0),
# with NET_ADMIN and /dev/net/tun, which only the sidecar gets.
#
# stdout: ONLY the image tag (last line). Progress goes to stderr:
#   tag=$(scripts/build-egress-image.sh | tail -1)
# If the tag already exists locally, exits immediately.
# Env: DEBIAN_MIRROR (default: read from this machine's apt sources),
#      EGRESS_BUILD_TIMEOUT (seconds for debootstrap, default 1200).
set -euo pipefail
umask 022

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd -- "$SCRIPT_DIR/.." && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/debootstrap-image.sh
. "$SCRIPT_DIR/lib/debootstrap-image.sh"

IMAGE_REPO=workspace-server/egress
BASE_SCRIPT=build-debian-base-image.sh
RECIPE_RELS=(images/debian-base images/egress)
LAYER_RELS=(images/egress)
HASHED_RELS=(scripts/build-egress-image.sh scripts/build-debian-base-image.sh scripts/lib/debootstrap-image.sh)
IMAGE_CMD='["/usr/local/bin/egress-sidecar"]'
IMAGE_MESSAGE="workspace-server egress sidecar (bookworm minbase; WireGuard, OpenVPN, Nebula)"
BUILD_TIMEOUT="${EGRESS_BUILD_TIMEOUT:-1200}"

[ -f "$REPO_DIR/images/egress/rootfs/usr/local/bin/egress-sidecar" ] || die "missing images/egress/rootfs/usr/local/bin/egress-sidecar"
build_layered_image
