#!/usr/bin/env bash
# Build the reference desktop image without any container registry:
#   debootstrap (Debian bookworm, minbase + images/desktop/packages.txt)
#   + images/desktop/rootfs overlay + user "workspace" (uid/gid 1000)
#   -> docker import as workspace-server/desktop:<12 hex of sha256(recipe + this script)>
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

SUITE=bookworm
IMAGE_REPO=workspace-server/desktop
RECIPE_REL=images/desktop
RECIPE_DIR="$REPO_DIR/$RECIPE_REL"
SELF_REL=scripts/build-desktop-image.sh
CACHE_DIR=/var/cache/workspace-server/debootstrap
BUILD_TIMEOUT="${DESKTOP_BUILD_TIMEOUT:-1200}"

[ -f "$RECIPE_DIR/packages.txt" ] || die "missing $RECIPE_DIR/packages.txt"
[ -f "$RECIPE_DIR/rootfs/usr/local/bin/start-desktop" ] || die "missing $RECIPE_DIR/rootfs/usr/local/bin/start-desktop"

# Content hash over every recipe file (path, executable bit, content) + this script.
recipe_hash() {
  (
    cd "$REPO_DIR"
    { find "$RECIPE_REL" -type f -print0 | LC_ALL=C sort -z; printf '%s\0' "$SELF_REL"; } |
      while IFS= read -r -d '' f; do
        printf '%s %s %s\n' "$(sha256sum <"$f" | cut -c1-64)" "$([ -x "$f" ] && echo x || echo -)" "$f"
      done | sha256sum | cut -c1-12
  )
}

TAG="$IMAGE_REPO:$(recipe_hash)"

image_exists() { have docker && docker image inspect "$TAG" >/dev/null 2>&1; }

if image_exists; then
  log "image $TAG is up to date"
  printf '%s\n' "$TAG"
  exit 0
fi

"$SCRIPT_DIR/ensure-docker.sh" >&2 || die "docker engine is not available"
with_lock desktop-image 1800
if image_exists; then
  log "image $TAG is up to date (built by a concurrent run)"
  printf '%s\n' "$TAG"
  exit 0
fi

have debootstrap || apt_install debootstrap
[ -r /usr/share/keyrings/debian-archive-keyring.gpg ] || apt_install debian-archive-keyring
MIRROR="$(debian_mirror "$SUITE")"

PACKAGES="$(sed -e 's/#.*//' "$RECIPE_DIR/packages.txt" | tr -s ' \t\r\n' '\n' | sed '/^$/d' | paste -sd, -)"
[ -n "$PACKAGES" ] || die "no packages listed in $RECIPE_DIR/packages.txt"

as_root mkdir -p "$CACHE_DIR" /var/tmp
ROOTFS="$(as_root mktemp -d /var/tmp/workspace-desktop-rootfs.XXXXXX)"

mounts_under() {  # mount points at or below $1, deepest first
  awk -v root="$1" '$5 == root || index($5, root "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "${ROOTFS:-}" ] && [ -d "$ROOTFS" ]; then
    local m
    for m in $(mounts_under "$ROOTFS"); do as_root umount -l "$m" 2>/dev/null || true; done
    if [ -n "$(mounts_under "$ROOTFS")" ]; then
      log "WARNING: filesystems still mounted under $ROOTFS; not deleting it"
    else
      as_root rm -rf --one-file-system "$ROOTFS" || log "WARNING: could not remove $ROOTFS"
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start=$SECONDS
log "building $TAG (debootstrap $SUITE from $MIRROR into $ROOTFS)"
log "packages: $PACKAGES"
if ! as_root timeout --kill-after=30 "$BUILD_TIMEOUT" debootstrap --variant=minbase --include="$PACKAGES" \
      --cache-dir="$CACHE_DIR" "$SUITE" "$ROOTFS" "$MIRROR" >&2; then
  [ -r "$ROOTFS/debootstrap/debootstrap.log" ] && { log "last lines of debootstrap.log:"; tail -n 40 "$ROOTFS/debootstrap/debootstrap.log" >&2; }
  die "debootstrap failed (or exceeded ${BUILD_TIMEOUT}s)"
fi
log "debootstrap done after $(( SECONDS - start ))s"
[ -z "$(mounts_under "$ROOTFS")" ] || die "debootstrap left filesystems mounted under $ROOTFS"

# Overlay files: root-owned, 0755 for executables, 0644 otherwise.
(
  cd "$RECIPE_DIR/rootfs"
  find . -type f -print0 | while IFS= read -r -d '' f; do
    mode=0644; [ -x "$f" ] && mode=0755
    as_root install -D -o root -g root -m "$mode" "$f" "$ROOTFS/${f#./}"
  done
)

# Unprivileged desktop user.
as_root chroot "$ROOTFS" groupadd --gid 1000 workspace
as_root chroot "$ROOTFS" useradd --uid 1000 --gid 1000 --create-home --home-dir /home/workspace \
  --shell /bin/bash workspace
as_root install -d -o root -g root -m 1777 "$ROOTFS/tmp/.X11-unix"

# Slim down: package caches, lists, docs, logs.
as_root sh -c '
  cd "$1"
  rm -rf var/cache/apt/archives/*.deb var/cache/apt/*.bin var/lib/apt/lists/* \
         usr/share/doc/* usr/share/man/* usr/share/info/* usr/share/lintian/* \
         var/cache/debconf/*-old var/lib/dpkg/*-old var/cache/ldconfig/aux-cache
  find usr/share/locale -mindepth 1 -maxdepth 1 ! -name "locale.alias" -exec rm -rf {} +
  find var/log -type f -exec truncate -s 0 {} +
  mkdir -p var/lib/apt/lists/partial
  : > etc/machine-id
' sh "$ROOTFS"

# No setuid/setgid bits (debootstrap leaves a dozen: su, mount, passwd, …): nothing in a workspace gains
# privileges by running a file. Workspaces also run with no-new-privileges; this holds for the image anywhere.
as_root find "$ROOTFS" -xdev -perm /6000 \( -type f -o -type d \) -exec chmod ug-s {} +
[ -z "$(as_root find "$ROOTFS" -xdev -perm /6000 -print -quit)" ] || die "setuid/setgid files remain in $ROOTFS"

log "importing rootfs ($(as_root du -sh --one-file-system "$ROOTFS" | cut -f1)) as $TAG"
as_root tar -C "$ROOTFS" --numeric-owner --one-file-system \
    --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -c . |
  docker import \
    --change 'USER workspace' \
    --change 'WORKDIR /home/workspace' \
    --change 'ENV HOME=/home/workspace' \
    --change 'ENV DISPLAY=:1' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'EXPOSE 5900' \
    --change 'CMD ["/usr/local/bin/start-desktop"]' \
    --message "workspace-server reference desktop ($SUITE minbase)" \
    - "$TAG" >&2 || die "docker import failed"
image_exists || die "image $TAG not found after import"
log "built $TAG in $(( SECONDS - start ))s ($(docker image inspect --format '{{.Size}}' "$TAG" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"
printf '%s\n' "$TAG"
