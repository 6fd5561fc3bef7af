# shellcheck shell=bash
# Build a reference image without any container registry: debootstrap (Debian, minbase + the packages of the
# recipe directories) + their rootfs overlays (in order) + user "workspace" (uid/gid 1000), setuid/setgid bits
# stripped, then `docker import` as <repo>:<12 hex of sha256(recipe files + the scripts named)>.
# Source it (after common.sh), set the variables below, then call build_debootstrap_image.
#   IMAGE_REPO     e.g. workspace-server/browser
#   RECIPE_RELS    recipe directories relative to the repo (each may hold packages.txt and rootfs/), in order
#   HASHED_RELS    further files whose content is part of the tag (the calling script, this library)
#   IMAGE_CMD      the image's CMD, a JSON array
#   IMAGE_MESSAGE  docker import message
#   BUILD_TIMEOUT  seconds for debootstrap
# stdout: ONLY the image tag. Progress goes to stderr. If the tag already exists locally, returns at once.

_dbi_recipe_hash() {
  (
    cd "$REPO_DIR"
    { for d in "${RECIPE_RELS[@]}"; do find "$d" -type f -print0; done | LC_ALL=C sort -z
      printf '%s\0' "${HASHED_RELS[@]}"; } |
      while IFS= read -r -d '' f; do
        printf '%s %s %s\n' "$(sha256sum <"$f" | cut -c1-64)" "$([ -x "$f" ] && echo x || echo -)" "$f"
      done | sha256sum | cut -c1-12
  )
}

# The packages.txt entries of the recipe directories given, comments and blank lines dropped, each name once (its
# first place), comma-separated.
_dbi_recipe_packages() {
  local d
  for d in "$@"; do
    if [ -f "$REPO_DIR/$d/packages.txt" ]; then sed -e 's/#.*//' "$REPO_DIR/$d/packages.txt"; fi
  done | tr -s ' \t\r\n' '\n' | sed '/^$/d' | awk '!seen[$0]++' | paste -sd, -
}

_dbi_exists() { have docker && docker image inspect "$_DBI_TAG" >/dev/null 2>&1; }

# The start of every build: sets _DBI_TAG from the recipe hash; when that image exists (also once a concurrent run
# building it lets go of its lock), prints the tag and succeeds. Otherwise fails, holding the image's lock with
# Docker running: the caller builds.
_dbi_up_to_date() {
  local hash
  hash="$(_dbi_recipe_hash)" && [ -n "$hash" ] || die "cannot hash the recipe of $IMAGE_REPO"
  _DBI_TAG="$IMAGE_REPO:$hash"
  if _dbi_exists; then log "image $_DBI_TAG is up to date"; printf '%s\n' "$_DBI_TAG"; return 0; fi
  "$SCRIPT_DIR/ensure-docker.sh" >&2 || die "docker engine is not available"
  with_lock "${IMAGE_REPO##*/}-image" 1800
  if _dbi_exists; then log "image $_DBI_TAG is up to date (built by a concurrent run)"; printf '%s\n' "$_DBI_TAG"; return 0; fi
  return 1
}

# The end of every build (started at SECONDS $1): the image is there; its tag on stdout.
_dbi_built() {
  _dbi_exists || die "image $_DBI_TAG not found after it was made"
  log "built $_DBI_TAG in $(( SECONDS - $1 ))s ($(docker image inspect --format '{{.Size}}' "$_DBI_TAG" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"
  printf '%s\n' "$_DBI_TAG"
}

# A recipe's overlay files (the directory $1) into the root filesystem at $2 ("" inside a build container), as root:
# root-owned, 0755 for executables, 0644 otherwise. Run on the host for a debootstrap build and inside the build
# container for a layer.
_DBI_OVERLAY='
  set -e
  cd "$1"
  find . -type f | while IFS= read -r f; do
    mode=0644; [ -x "$f" ] && mode=0755
    install -D -o root -g root -m "$mode" "$f" "$2/${f#./}"
  done
'

# The last steps of every image's root filesystem, run as root with its root directory as $1 (on the host for a
# debootstrap build, "/" inside the build container for a layer):
# - slim down: package caches, lists, docs, logs;
# - no setuid/setgid bits: nothing in a workspace gains privileges by running a file (workspaces also run with
#   no-new-privileges; this holds for the image anywhere).
_DBI_FINISH='
  set -e
  cd "$1"
  rm -rf var/cache/apt/archives/*.deb var/cache/apt/*.bin var/lib/apt/lists/* \
         usr/share/doc/* usr/share/man/* usr/share/info/* usr/share/lintian/* \
         var/cache/debconf/*-old var/lib/dpkg/*-old var/cache/ldconfig/aux-cache
  find usr/share/locale -mindepth 1 -maxdepth 1 ! -name "locale.alias" -exec rm -rf {} +
  find var/log -type f -exec truncate -s 0 {} +
  mkdir -p var/lib/apt/lists/partial
  : > etc/machine-id
  find . -xdev -perm /6000 \( -type f -o -type d \) -exec chmod ug-s {} +
  if [ -n "$(find . -xdev -perm /6000 -print -quit)" ]; then echo "setuid/setgid files remain in $1" >&2; exit 1; fi
'

_dbi_mounts_under() {  # mount points at or below $1, deepest first
  awk -v root="$1" '$5 == root || index($5, root "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

_dbi_cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [ -z "${_DBI_CONTAINER:-}" ] || docker rm -f "$_DBI_CONTAINER" >/dev/null 2>&1 || true
  [ -n "${_DBI_PRIVATE_CACHE:-}" ] && as_root rm -rf "$_DBI_PRIVATE_CACHE"
  if [ -n "${_DBI_ROOTFS:-}" ] && [ -d "$_DBI_ROOTFS" ]; then
    local m
    for m in $(_dbi_mounts_under "$_DBI_ROOTFS"); do as_root umount -l "$m" 2>/dev/null || true; done
    if [ -n "$(_dbi_mounts_under "$_DBI_ROOTFS")" ]; then
      log "WARNING: filesystems still mounted under $_DBI_ROOTFS; not deleting it"
    else
      as_root rm -rf --one-file-system "$_DBI_ROOTFS" || log "WARNING: could not remove $_DBI_ROOTFS"
    fi
  fi
  exit "$rc"
}

# Fills debootstrap's package cache with apt's downloader, which fetches over one pipelined connection where
# debootstrap runs wget once per package, one after another (4 images' packages: ~3 minutes of a fresh machine's
# npm test). apt resolves the same closure from the same index (Priority: required, apt, and the recipe's packages,
# no Recommends) and names each file as debootstrap's cache does (<name>_<version, ':' as %3a>_<arch>.deb).
# debootstrap still checks every file's checksum against its own index and fetches whatever is missing, so this
# only saves time: a failure here is logged and the build goes on. Call under the debootstrap-cache lock.
_dbi_prefetch() {  # suite mirror cache_dir packages(comma-separated)
  local suite="$1" mirror="$2" cache_dir="$3" packages="$4" apt_dir="$3/.apt" required arch
  have apt-get && have apt-cache || { log "no apt-get here: debootstrap downloads the packages itself"; return 0; }
  arch="$(dpkg --print-architecture)"
  as_root mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache" "$apt_dir/empty" "$cache_dir/partial"
  as_root sh -c 'echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $1 $2 main" >"$3/sources.list"; : >"$3/status"' \
    sh "$mirror" "$suite" "$apt_dir"
  local -a opts=(-o Dir::State::Lists="$apt_dir/lists" -o Dir::State::status="$apt_dir/status"
    -o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts="$apt_dir/empty"
    -o Dir::Etc::Preferences="$apt_dir/empty/preferences" -o Dir::Etc::PreferencesParts="$apt_dir/empty" -o Dir::Cache="$apt_dir/cache" -o Dir::Cache::Archives="$cache_dir"
    -o APT::Architecture="$arch" -o APT::Architectures::="$arch"
    -o APT::Install-Recommends=false -o APT::Sandbox::User=root -o Debug::NoLocking=true -o Dpkg::Use-Pty=0)
  if ! as_root apt-get "${opts[@]}" -qq update </dev/null >&2; then
    log "apt could not read $mirror $suite: debootstrap downloads the packages itself"; return 0
  fi
  required="$(as_root apt-cache "${opts[@]}" dumpavail | awk '/^Package:/ { name = $2 } /^Priority: required$/ { print name }' | sort -u)"
  # shellcheck disable=SC2086 # word splitting wanted: package names
  if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get "${opts[@]}" -qq -y --download-only install \
        $required apt ${packages//,/ } </dev/null >&2; then
    log "apt could not fetch every package: debootstrap fetches the rest itself"
  fi
  as_root rm -rf "$cache_dir/partial" "$cache_dir/lock"
}

build_debootstrap_image() {
  local suite=bookworm cache_dir=/var/cache/workspace-server/debootstrap
  local tag d
  _dbi_up_to_date && return 0
  tag="$_DBI_TAG"

  local mirror packages
  mirror="$(debian_mirror "$suite")"
  packages="$(_dbi_recipe_packages "${RECIPE_RELS[@]}")"
  [ -n "$packages" ] || die "no packages listed in ${RECIPE_RELS[*]}"

  as_root mkdir -p "$cache_dir" /var/tmp
  _DBI_ROOTFS="$(as_root mktemp -d "/var/tmp/workspace-${IMAGE_REPO##*/}-rootfs.XXXXXX")"
  local rootfs="$_DBI_ROOTFS"
  trap _dbi_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  # The rootfs in memory where the machine has room (the largest image is ~1.1 GB; npm test builds four at once):
  # dpkg syncs every file it unpacks, which on a disk is much of a build's time. DEBOOTSTRAP_TMPFS=0 keeps it on disk.
  if [ "${DEBOOTSTRAP_TMPFS:-1}" != 0 ] && [ "$(awk '/^MemAvailable:/ { print int($2 / 1048576) }' /proc/meminfo)" -ge 8 ]; then
    as_root mount -t tmpfs -o size=4g,mode=0755 "workspace-${IMAGE_REPO##*/}-rootfs" "$rootfs" || die "cannot mount a tmpfs on $rootfs"
  fi

  local start=$SECONDS
  log "building $tag (debootstrap $suite from $mirror into $rootfs)"
  log "packages: $packages"
  # Several builds may run at once (npm test builds its images together) and share the package cache, which
  # debootstrap fills without a lock: a missing .deb is fetched straight to its final name, and a second run that
  # finds it half-written deletes it and fetches it again under the first. So the shared cache is filled under a
  # lock, by apt (_dbi_prefetch: one pipelined connection, where debootstrap fetches one package after another), and
  # each build reads a private copy of it (hard links): the few packages debootstrap chooses otherwise than apt
  # (usr-is-merged for usrmerge, say) it fetches into that copy, and they join the shared cache, whole, afterwards.
  if ! ( with_lock debootstrap-cache "$BUILD_TIMEOUT"
         have debootstrap || apt_install debootstrap
         [ -r /usr/share/keyrings/debian-archive-keyring.gpg ] || apt_install debian-archive-keyring
         _dbi_prefetch "$suite" "$mirror" "$cache_dir" "$packages" ); then
    die "could not install debootstrap or fill its package cache"
  fi
  _DBI_PRIVATE_CACHE="$(as_root mktemp -d "$cache_dir/.build.XXXXXX")"
  as_root find "$cache_dir" -maxdepth 1 -name '*.deb' -exec cp -l -t "$_DBI_PRIVATE_CACHE" {} + || die "cannot link the package cache"
  log "packages in the cache after $(( SECONDS - start ))s"
  if ! as_root timeout --kill-after=30 "$BUILD_TIMEOUT" debootstrap --variant=minbase --include="$packages" \
        --cache-dir="$_DBI_PRIVATE_CACHE" "$suite" "$rootfs" "$mirror" >&2; then
    [ -r "$rootfs/debootstrap/debootstrap.log" ] && { log "last lines of debootstrap.log:"; tail -n 40 "$rootfs/debootstrap/debootstrap.log" >&2; }
    die "debootstrap failed (or exceeded ${BUILD_TIMEOUT}s)"
  fi
  as_root find "$_DBI_PRIVATE_CACHE" -maxdepth 1 -name '*.deb' -links 1 -exec ln -t "$cache_dir" {} + 2>/dev/null || true
  as_root rm -rf "$_DBI_PRIVATE_CACHE"; _DBI_PRIVATE_CACHE=
  log "debootstrap done after $(( SECONDS - start ))s"
  [ -z "$(_dbi_mounts_under "$rootfs" | grep -vxF "$rootfs")" ] || die "debootstrap left filesystems mounted under $rootfs"

  # Overlay files, each recipe in order (a later one may replace an earlier one's file).
  for d in "${RECIPE_RELS[@]}"; do
    [ -d "$REPO_DIR/$d/rootfs" ] || continue
    as_root sh -c "$_DBI_OVERLAY" sh "$REPO_DIR/$d/rootfs" "$rootfs" || die "installing $d's overlay failed"
  done

  # Unprivileged user.
  as_root chroot "$rootfs" groupadd --gid 1000 workspace
  as_root chroot "$rootfs" useradd --uid 1000 --gid 1000 --create-home --home-dir /home/workspace \
    --shell /bin/bash workspace
  as_root install -d -o root -g root -m 1777 "$rootfs/tmp/.X11-unix"

  as_root sh -c "$_DBI_FINISH" sh "$rootfs" || die "finishing $rootfs failed"

  # fontconfig trusts a font directory's cache only while the directory's mtime matches it to the nanosecond. A
  # package configured after fontconfig's trigger may still change a font directory (xfonts-utils writes
  # fonts.dir into X11/Type1), so the caches are brought up to date last. A void cache is rebuilt by the first
  # program to open a font in every new container (~200 ms; on the desktop, openbox's theme, between the X
  # server and the first window).
  if [ -x "$rootfs/usr/bin/fc-cache" ]; then as_root chroot "$rootfs" fc-cache --system-only || die "fc-cache failed"; fi

  log "importing rootfs ($(as_root du -sh --one-file-system "$rootfs" | cut -f1)) as $tag"
  # POSIX (pax) format keeps modification times to the nanosecond (GNU format, whole seconds, voided every cache).
  as_root tar -C "$rootfs" --format=posix --numeric-owner --one-file-system \
      --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -c . |
    docker import \
      --change 'USER workspace' \
      --change 'WORKDIR /home/workspace' \
      --change 'ENV HOME=/home/workspace' \
      --change 'ENV DISPLAY=:1' \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'EXPOSE 5900' \
      --change "CMD $IMAGE_CMD" \
      --message "$IMAGE_MESSAGE" \
      - "$tag" >&2 || die "docker import failed"
  _dbi_built "$start"
}

# A layered image: a base image another script builds (BASE_SCRIPT; its stdout is the base's tag) plus a layer:
# the packages of LAYER_RELS installed by apt in a container of the base, from debootstrap's package cache (filled as
# for a build from scratch; the container has no network), LAYER_RELS' rootfs overlays, the same finishing steps,
# committed on top of the base. Images built on one base share its ~600 MB of layers and its packages' unpacking
# and configuration (npm test builds the desktop, the browser and the test servers on one base: 210 CPU seconds
# fewer than three debootstraps, on 2 cores).
# Set, besides IMAGE_REPO, IMAGE_CMD, IMAGE_MESSAGE and BUILD_TIMEOUT:
#   BASE_SCRIPT    the base's build script, relative to scripts/ (or BASE_TAG: a base image already built)
#   RECIPE_RELS    the base's recipe directories and then the layer's (the tag's hash and the package cache)
#   LAYER_RELS     the layer's recipe directories, in order
#   HASHED_RELS    as above; include the base's build script
#   IMAGE_CHANGES  further `docker commit --change` values, after USER workspace and CMD (optional array)
build_layered_image() {
  local suite=bookworm cache_dir=/var/cache/workspace-server/debootstrap
  local tag base_tag mirror packages layer_packages cid d start rc=0
  _dbi_up_to_date && return 0
  tag="$_DBI_TAG"

  start=$SECONDS
  if [ -n "${BASE_TAG:-}" ]; then
    base_tag="$BASE_TAG"
  else
    base_tag="$(bash "$SCRIPT_DIR/$BASE_SCRIPT" | tail -n 1)"
    [ -n "$base_tag" ] || die "the base image (scripts/$BASE_SCRIPT) was not built"
  fi
  packages="$(_dbi_recipe_packages "${RECIPE_RELS[@]}")"
  layer_packages="$(_dbi_recipe_packages "${LAYER_RELS[@]}")"
  [ -n "$layer_packages" ] || die "no packages listed in ${LAYER_RELS[*]}"
  mirror="$(debian_mirror "$suite")"
  log "building $tag on $base_tag: ${layer_packages//,/ }"

  # The cache holds the whole closure (base and layer, resolved from nothing, as for a debootstrap build), so apt
  # in the container finds every package the base lacks.
  as_root mkdir -p "$cache_dir"
  if ! ( with_lock debootstrap-cache "$BUILD_TIMEOUT"
         [ -r /usr/share/keyrings/debian-archive-keyring.gpg ] || apt_install debian-archive-keyring
         _dbi_prefetch "$suite" "$mirror" "$cache_dir" "$packages" ); then
    die "could not fill the package cache"
  fi
  # The container's /srv: a hard-linked copy of the cache (the .debs), apt's lists of that mirror and the layer's
  # overlay files; nothing of it is committed (a volume is not part of the container's filesystem).
  _DBI_PRIVATE_CACHE="$(as_root mktemp -d "$cache_dir/.build.XXXXXX")"
  trap _dbi_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  as_root find "$cache_dir" -maxdepth 1 -name '*.deb' -exec cp -l -t "$_DBI_PRIVATE_CACHE" {} + || die "cannot link the package cache"
  as_root cp -al "$cache_dir/.apt/lists" "$_DBI_PRIVATE_CACHE/lists" || die "cannot link apt's lists"
  as_root mkdir -p "$_DBI_PRIVATE_CACHE/partial" "$_DBI_PRIVATE_CACHE/lists/partial" "$_DBI_PRIVATE_CACHE/overlay"
  printf '%s\n' "$_DBI_FINISH" | as_root tee "$_DBI_PRIVATE_CACHE/finish.sh" >/dev/null
  printf '%s\n' "$_DBI_OVERLAY" | as_root tee "$_DBI_PRIVATE_CACHE/overlay.sh" >/dev/null
  for d in "${LAYER_RELS[@]}"; do
    [ -d "$REPO_DIR/$d/rootfs" ] && as_root cp -r "$REPO_DIR/$d/rootfs/." "$_DBI_PRIVATE_CACHE/overlay/"
  done

  # Services a package would start stay stopped (policy-rc.d); the overlay as the debootstrap build installs it;
  # fontconfig's caches brought up to date last (see above).
  local script='
    set -eu
    printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d
    DEBIAN_FRONTEND=noninteractive apt-get -qq -y --no-install-recommends --no-download \
      -o Dir::Cache::Archives=/srv/ -o Dir::State::Lists=/srv/lists -o Debug::NoLocking=true \
      -o APT::Sandbox::User=root -o Dpkg::Use-Pty=0 install "$@" </dev/null
    rm -f /usr/sbin/policy-rc.d
    sh /srv/overlay.sh /srv/overlay ""
    sh /srv/finish.sh /
    if [ -x /usr/bin/fc-cache ]; then fc-cache --system-only; fi
  '
  # shellcheck disable=SC2086 # word splitting wanted: package names
  cid="$(docker create --user 0 --network none -v "$_DBI_PRIVATE_CACHE:/srv" \
          "$base_tag" /bin/sh -c "$script" sh ${layer_packages//,/ })" || die "docker create $base_tag failed"
  _DBI_CONTAINER="$cid"
  timeout --kill-after=30 "$BUILD_TIMEOUT" docker start -a "$cid" >&2 || rc=$?
  [ "$rc" -eq 0 ] || die "installing the layer in $cid failed (exit $rc)"
  local -a changes=(--change 'USER workspace' --change "CMD $IMAGE_CMD")
  for d in ${IMAGE_CHANGES[@]+"${IMAGE_CHANGES[@]}"}; do changes+=(--change "$d"); done
  docker commit "${changes[@]}" --message "$IMAGE_MESSAGE" "$cid" "$tag" >/dev/null || die "docker commit $tag failed"
  _dbi_built "$start"
}
