#!/usr/bin/env bash
# Build the test-servers image (real RDP and SSH servers for the server-session tests; test-only, never a
# workspace) the same way as the reference images (scripts/lib/debootstrap-image.sh): the desktop base
# (scripts/build-desktop-base-image.sh: openbox and xterm, so a session shows something) with a layer of Debian's
# xrdp + xorgxrdp and openssh-server, entrypoint images/test-servers' /usr/local/bin/test-server rdp|ssh, run as root.
#   -> workspace-server/test-servers:<12 hex of sha256(both recipes + these scripts)>
#   docker run -d --rm -e TEST_PASSWORD=... <tag> rdp|ssh    (user "tester"; reach it by container IP)
#
# stdout: ONLY the image tag (last line). Progress goes to stderr:
#   tag=$(scripts/build-test-server-images.sh | tail -1)
# If the tag already exists locally, exits immediately.
# Env: DEBIAN_MIRROR (default: read from this machine's apt sources),
#      TEST_SERVERS_BUILD_TIMEOUT (seconds for debootstrap, default 1200).
set -euo pipefail
umask 022

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd -- "$SCRIPT_DIR/.." && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/debootstrap-image.sh
. "$SCRIPT_DIR/lib/debootstrap-image.sh"

# The library imports images that run as the user "workspace"; the servers need root (sshd, xrdp-sesman,
# chpasswd), so the library's image is a base that one `docker commit` turns into the final image with USER root.
IMAGE_REPO=workspace-server/test-servers
BASE_SCRIPT=build-desktop-base-image.sh
RECIPE_RELS=(images/debian-base images/desktop images/test-servers)
LAYER_RELS=(images/test-servers)
HASHED_RELS=(scripts/build-test-server-images.sh scripts/build-desktop-base-image.sh scripts/build-debian-base-image.sh scripts/lib/debootstrap-image.sh)
IMAGE_CMD='["rdp"]'
IMAGE_CHANGES=('USER root' 'WORKDIR /root' 'ENV HOME=/root' 'EXPOSE 3389 22' 'ENTRYPOINT ["/usr/local/bin/test-server"]')
IMAGE_MESSAGE="workspace-server test servers (xrdp + openssh-server on the desktop base; test-only)"
BUILD_TIMEOUT="${TEST_SERVERS_BUILD_TIMEOUT:-1200}"

[ -x "$REPO_DIR/images/test-servers/rootfs/usr/local/bin/test-server" ] || die "missing images/test-servers/rootfs/usr/local/bin/test-server"
build_layered_image
