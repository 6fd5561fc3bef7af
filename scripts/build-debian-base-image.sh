#!/usr/bin/env bash
# Build the Debian base image (scripts/lib/debootstrap-image.sh), the only image that is debootstrapped: the
# desktop base, the egress sidecar and the compose deployment's PostgreSQL and Redis are layers on it
# (build_layered_image), and the compose tests' Node.js 20 base is made from it (scripts/build-compose-images.sh).
#   debootstrap (Debian bookworm, minbase + images/debian-base/packages.txt: tini, ca-certificates)
#   + user "workspace" (uid/gid 1000), no setuid/setgid bits
#   -> docker import as workspace-server/debian-base:<12 hex of sha256(recipe + these scripts)>
#
# stdout: ONLY the image tag (last line). Progress goes to stderr. If the tag already exists locally, exits at once.
# Env: DEBIAN_MIRROR (default: read from this machine's apt sources),
#      DEBIAN_BASE_BUILD_TIMEOUT (seconds for debootstrap, default 1200).
set -euo pipefail
umask 022

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd -- "$SCRIPT_DIR/.." && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/debootstrap-image.sh
. "$SCRIPT_DIR/lib/debootstrap-image.sh"

IMAGE_REPO=workspace-server/debian-base
RECIPE_RELS=(images/debian-base)
HASHED_RELS=(scripts/build-debian-base-image.sh scripts/lib/debootstrap-image.sh)
IMAGE_CMD='["/bin/sh"]'
IMAGE_MESSAGE="workspace-server Debian base (bookworm minbase, tini, ca-certificates)"
BUILD_TIMEOUT="${DEBIAN_BASE_BUILD_TIMEOUT:-1200}"

build_debootstrap_image
