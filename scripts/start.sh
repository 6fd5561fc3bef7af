#!/usr/bin/env bash
# npm start: installs what is missing, starts PostgreSQL, Redis and Docker, builds the reference images,
# migrates, registers the local Docker host, the desktop and the browser image, builds the egress sidecar image, then runs the api and one worker.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/common.sh
. scripts/lib/node.sh
log() { printf '[start] %s\n' "$*" >&2; }

# Node.js 24 (fetched once into the user's cache unless `node` is already 24) for the build, the api and the worker.
use_project_node
ensure_node_modules
bash scripts/ensure-services.sh
docker_ok=1
bash scripts/ensure-docker.sh || { docker_ok=0; log "WARNING: no Docker engine; the api runs, but workspaces cannot start"; }
bash scripts/ensure-media-tools.sh || log "WARNING: no ffmpeg; session recordings are captured but not converted to video"
# Secrets at rest (server image passwords, egress credentials, webhook signing secrets) are sealed with
# SERVER_CREDENTIALS_KEY: without one set, a key is made once and kept in data/server-credentials.key (0600).
if [ -z "${SERVER_CREDENTIALS_KEY:-}" ]; then
  key_file=data/server-credentials.key
  [ -s "$key_file" ] || { mkdir -p data; (umask 077 && node -e "process.stdout.write(require('crypto').randomBytes(32).toString('hex'))" > "$key_file"); log "made $key_file (SERVER_CREDENTIALS_KEY)"; }
  SERVER_CREDENTIALS_KEY=$(cat "$key_file")
  export SERVER_CREDENTIALS_KEY
fi
log "building"
npm run --silent build
node dist/libs/database/src/migrate.js
cli() { node dist/apps/cli/src/main.js "$@"; }
if [ "$docker_ok" = 1 ]; then
  tag=$(bash scripts/build-desktop-image.sh | tail -1)
  cli server ensure-local
  cli image add "$tag" --friendly-name "${DESKTOP_IMAGE_NAME:-Desktop}" --description "Reference desktop (Xvfb, openbox, xterm)" --cores 1 --memory 1G \
    --port vnc=5900/tcp --port audio=4901/tcp --port audio_input=4902/tcp >/dev/null
  log "image ${DESKTOP_IMAGE_NAME:-Desktop} -> $tag"
  # RDP and SSH server images are reached through bridge containers of the same desktop image.
  export SERVER_BRIDGE_IMAGE="${SERVER_BRIDGE_IMAGE:-$tag}"
  # The reference browser: a kiosk Chromium on WORKSPACE_URL; its go command points it at the URL a staged
  # browser workspace receives when it is assigned.
  browser_tag=$(bash scripts/build-browser-image.sh | tail -1)
  cli image add "$browser_tag" --friendly-name Browser --description "Reference browser (kiosk Chromium on WORKSPACE_URL)" --browser --go-cmd workspace-browser-open --cores 1 --memory 2G \
    --port vnc=5900/tcp --port audio=4901/tcp --port audio_input=4902/tcp >/dev/null
  log "image Browser -> $browser_tag"
  # The egress sidecar of workspaces that join a gateway (docs/decisions/egress.md, "Egress for real").
  EGRESS_IMAGE="${EGRESS_IMAGE:-$(bash scripts/build-egress-image.sh | tail -1)}"
  export EGRESS_IMAGE
  log "egress sidecar image -> $EGRESS_IMAGE"
  # Network namespaces made in advance, joined by launches (docs/decisions/workspaces.md, "Network holders").
  export NETWORK_POOL_SIZE="${NETWORK_POOL_SIZE:-2}"
fi

pids=()
cleanup() { trap - EXIT INT TERM; kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
node dist/apps/worker/src/main.js & pids+=($!)
node dist/apps/api/src/main.js & pids+=($!)

url="${PUBLIC_BASE_URL:-http://127.0.0.1:${API_PORT:-8080}}"
for _ in $(seq 1 100); do curl -fs "$url/api/health" >/dev/null 2>&1 && break; sleep 0.2; done
cat >&2 <<MSG

  workspace-server is running at $url   (Ctrl-C stops it)
  Make an API key:   npm run cli -- api-key create --name my-backend --permission "Global Admin" --json
  Then, e.g.:        curl -s $url/api/public/get_images -d '{"api_key":"…","api_key_secret":"…"}'
  CLI commands that store secrets (egress credentials, server image passwords) need the same key:
                     export SERVER_CREDENTIALS_KEY=\$(cat data/server-credentials.key)

MSG
wait -n "${pids[@]}"
