#!/usr/bin/env bash
# Build the test-servers image (real RDP and SSH servers for the server-session tests; test-only, never a
# workspace) the same way as the reference images (scripts/lib/debootstrap-image.sh): Debian's xrdp + xorgxrdp
# (openbox and xterm so a session shows something) and openssh-server, entrypoint images/test-servers'
# /usr/local/bin/test-server rdp|ssh, run as root.
#   -> workspace-server/test-servers:<12 hex of sha256(recipe + these scripts)>
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
IMAGE_REPO=workspace-server/test-servers-base
FINAL_REPO=workspace-server/test-servers
RECIPE_RELS=(images/test-servers)
HASHED_RELS=(scripts/build-test-server-images.sh scripts/lib/debootstrap-image.sh)
IMAGE_CMD='["/usr/local/bin/test-server","rdp"]'
IMAGE_MESSAGE="workspace-server test servers (bookworm minbase, xrdp + openssh-server; test-only)"
BUILD_TIMEOUT="${TEST_SERVERS_BUILD_TIMEOUT:-1200}"

[ -x "$REPO_DIR/images/test-servers/rootfs/usr/local/bin/test-server" ] || die "missing images/test-servers/rootfs/usr/local/bin/test-server"

final_tag="$FINAL_REPO:$(_dbi_recipe_hash)"
final_exists() { have docker && docker image inspect "$final_tag" >/dev/null 2>&1; }
if final_exists; then log "image $final_tag is up to date"; printf '%s\n' "$final_tag"; exit 0; fi

base_tag="$(build_debootstrap_image | tail -n 1)"
[ -n "$base_tag" ] || die "the base image was not built"

with_lock test-servers-commit 600
if ! final_exists; then
  cid="$(docker create "$base_tag")" || die "docker create $base_tag failed"
  trap 'docker rm -f "$cid" >/dev/null 2>&1 || true' EXIT
  docker commit \
    --change 'USER root' \
    --change 'WORKDIR /root' \
    --change 'ENV HOME=/root' \
    --change 'EXPOSE 3389 22' \
    --change 'ENTRYPOINT ["/usr/local/bin/test-server"]' \
    --change 'CMD ["rdp"]' \
    "$cid" "$final_tag" >&2 || die "docker commit failed"
  docker rm -f "$cid" >/dev/null 2>&1 || true
fi
# The base's tag is only a step towards the final one; untagging it keeps `docker images` to what tests use
# (the final image keeps the layer).
docker rmi "$base_tag" >/dev/null 2>&1 || log "WARNING: could not untag $base_tag"
final_exists || die "image $final_tag not found after commit"
log "built $final_tag"
printf '%s\n' "$final_tag"
