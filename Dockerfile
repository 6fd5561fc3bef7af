# The service image: one image runs the api, the worker, the cli and the migrations by its command.
#   docker build -t workspace-server .
#   docker run … workspace-server                                   (the api: node dist/apps/api/src/main.js)
#   docker run … workspace-server node dist/apps/worker/src/main.js (a worker)
#   docker run … workspace-server node dist/libs/database/src/migrate.js
#   docker run … workspace-server node dist/apps/cli/src/main.js --help
# BASE_IMAGE: any Node.js 24 image on Debian 12 with a `node` user (uid 1000). Where no image registry is
# reachable, scripts/build-compose-images.sh makes one from Debian packages and the project's Node.js 24 and builds
# this file FROM it.
ARG BASE_IMAGE=node:24-bookworm-slim

# --- build: every dependency, compile TypeScript to dist/ --------------------------------------------------
FROM ${BASE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# No install scripts: no native addon is compiled (the slim image has no compiler), so none can be built for another
# Node.js than the image's. The two there are optional: ssh2 (Docker hosts reached over ssh://) uses its JavaScript
# ciphers without its sshcrypto addon, and cpu-features, which only tunes ssh2's cipher order, is left out.
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY apps ./apps
COPY libs ./libs
COPY migrations ./migrations
# (bench/ is not in the context: the build compiles apps, libs and migrations only.)
# Then only the production dependencies stay, for the runtime stage to copy: a second `npm ci` there would fetch
# and unpack them again.
RUN npm run build && npm prune --omit=dev --no-audit --no-fund --ignore-scripts

# --- runtime: production dependencies, dist/, the browser client's files, the OpenAPI document ---------------
FROM ${BASE_IMAGE} AS runtime
# tini as PID 1 (signals reach node, zombies are reaped); the official Node image lacks it, the local base has it.
RUN if ! command -v tini >/dev/null; then \
      apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*; \
    fi; \
    ln -sf "$(command -v tini)" /usr/local/bin/tini
WORKDIR /app
COPY package.json package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY apps/web/public ./apps/web/public
COPY openapi.json ./
COPY --from=build /app/dist ./dist
# Object storage and the recording spool: writable by the service user only (mount volumes here).
RUN install -d -o node -g node -m 0750 /data /data/storage /data/recording-spool
ENV NODE_ENV=production \
    API_HOST=0.0.0.0 \
    API_PORT=8080 \
    STORAGE_URL=file:///data/storage \
    RECORDING_SPOOL_DIR=/data/recording-spool
USER node
EXPOSE 8080
# Liveness of the api (the worker's compose service overrides it).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.API_PORT||8080)+'/api/health/live').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["/usr/local/bin/tini", "--"]
CMD ["node", "dist/apps/api/src/main.js"]
