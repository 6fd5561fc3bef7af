#!/usr/bin/env bash
# Ensure PostgreSQL (127.0.0.1:5432, trust auth for user postgres) and Redis
# (127.0.0.1:6379) are installed and answering. Idempotent; fast when both are up.
#
# If DATABASE_HOST / REDIS_HOST point somewhere other than localhost, that service
# is treated as operator-managed and is neither installed nor started here.
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$SCRIPT_DIR/lib/common.sh"

PG_PORT=5432
REDIS_PORT=6379
WAIT_SECONDS="${ENSURE_SERVICES_TIMEOUT:-60}"

is_local_host() {
  case "${1:-}" in ''|127.0.0.1|localhost|::1|'[::1]') return 0 ;; *) return 1 ;; esac
}

pg_answers()    { have pg_isready && pg_isready -q -h 127.0.0.1 -p "$PG_PORT" -t 2 >/dev/null 2>&1; }
redis_answers() { have redis-cli && [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }
pg_trust_ok()   { have psql && psql -X -w -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1; }

# wait_for <check-fn>: bounded poll (WAIT_SECONDS, 0.25 s steps).
wait_for() {
  local fn="$1" i max=$(( WAIT_SECONDS * 4 ))
  for (( i = 0; i < max; i++ )); do
    "$fn" && return 0
    sleep 0.25
  done
  return 1
}

pg_version() {
  # Highest configured cluster version, else highest installed server version.
  local v
  v="$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1 || true)"
  [ -n "$v" ] || v="$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -1 || true)"
  printf '%s' "$v"
}

pg_server_installed() {
  local v; v="$(pg_version)"
  [ -n "$v" ] && [ -x "/usr/lib/postgresql/$v/bin/postgres" ] && have pg_ctlcluster && have psql && have pg_isready
}

pg_log_tail() {
  local v; v="$(pg_version)"
  local f="/var/log/postgresql/postgresql-$v-main.log"
  if [ -r "$f" ]; then log "last lines of $f:"; tail -n 30 "$f" >&2; fi
}

# Make sure host connections from loopback as postgres are trusted (a fresh Debian
# install uses peer for local sockets and scram-sha-256 for TCP).
pg_ensure_trust() {
  pg_trust_ok && return 0
  local v hba; v="$(pg_version)"; hba="/etc/postgresql/$v/main/pg_hba.conf"
  [ -f "$hba" ] || die "PostgreSQL answers on 127.0.0.1:$PG_PORT but rejects passwordless user postgres, and $hba does not exist to fix it"
  if ! grep -q '^# workspace-server: loopback trust' "$hba"; then
    log "adding loopback trust rules for user postgres to $hba"
    local tmp; tmp="$(mktemp)"
    {
      echo '# workspace-server: loopback trust (added by scripts/ensure-services.sh)'
      echo 'host    all             postgres        127.0.0.1/32            trust'
      echo 'host    all             postgres        ::1/128                 trust'
      cat "$hba"
    } >"$tmp"
    as_root sh -c "cat '$tmp' > '$hba'"
    rm -f "$tmp"
  fi
  as_root pg_ctlcluster --skip-systemctl-redirect "$v" main reload >&2 || die "pg_ctlcluster $v main reload failed"
  local i
  for (( i = 0; i < 20; i++ )); do pg_trust_ok && return 0; sleep 0.25; done
  die "PostgreSQL still rejects passwordless 'psql -h 127.0.0.1 -U postgres' after editing $hba"
}

ensure_postgres() {
  if ! is_local_host "${DATABASE_HOST:-}"; then
    log "DATABASE_HOST=$DATABASE_HOST is not local; assuming operator-managed PostgreSQL"
    return 0
  fi
  if pg_answers; then
    pg_trust_ok || pg_ensure_trust
    return 0
  fi
  if ! pg_server_installed; then
    apt_install postgresql
    pg_server_installed || die "postgresql installed but server binaries not found under /usr/lib/postgresql"
  fi
  local v; v="$(pg_version)"
  if [ ! -f "/etc/postgresql/$v/main/postgresql.conf" ]; then
    log "creating PostgreSQL cluster $v/main"
    as_root pg_createcluster --port "$PG_PORT" "$v" main >&2 || die "pg_createcluster $v main failed"
  fi
  local port
  port="$(awk -F= '/^[ \t]*port[ \t]*=/ { gsub(/[ \t]|#.*/, "", $2); print $2 }' "/etc/postgresql/$v/main/postgresql.conf" | tail -1)"
  if [ -n "$port" ] && [ "$port" != "$PG_PORT" ]; then
    # e.g. the package's postinst found 5432 busy at install time and picked 5433.
    log "cluster $v/main is configured for port $port; switching it to $PG_PORT"
    as_root pg_conftool "$v" main set port "$PG_PORT" >&2 || die "could not set port $PG_PORT in /etc/postgresql/$v/main/postgresql.conf"
    if as_root pg_ctlcluster --skip-systemctl-redirect "$v" main status >/dev/null 2>&1; then
      as_root pg_ctlcluster --skip-systemctl-redirect "$v" main restart >&2 || die "pg_ctlcluster $v main restart failed"
    fi
  fi
  log "starting PostgreSQL $v/main"
  # 'start' fails if it is already running (e.g. still starting up); the wait below decides.
  as_root pg_ctlcluster --skip-systemctl-redirect "$v" main start >&2 \
    || log "pg_ctlcluster start returned non-zero (may already be running); waiting for it to answer"
  if ! wait_for pg_answers; then
    pg_log_tail
    die "PostgreSQL did not answer on 127.0.0.1:$PG_PORT within ${WAIT_SECONDS}s"
  fi
  pg_ensure_trust
}

ensure_redis() {
  if ! is_local_host "${REDIS_HOST:-}"; then
    log "REDIS_HOST=$REDIS_HOST is not local; assuming operator-managed Redis"
    return 0
  fi
  redis_answers && return 0
  if ! have redis-server || ! have redis-cli; then
    apt_install redis-server
    { have redis-server && have redis-cli; } || die "redis-server installed but redis-server/redis-cli not on PATH"
  fi
  as_root mkdir -p /var/lib/redis /var/log/redis
  log "starting redis-server on 127.0.0.1:$REDIS_PORT"
  as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" \
    --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log >&2 \
    || log "redis-server returned non-zero; waiting for it to answer anyway"
  if ! wait_for redis_answers; then
    [ -r /var/log/redis/ci.log ] && { log "last lines of /var/log/redis/ci.log:"; tail -n 30 /var/log/redis/ci.log >&2; }
    die "Redis did not answer on 127.0.0.1:$REDIS_PORT within ${WAIT_SECONDS}s"
  fi
}

# Fast path: nothing to do, no lock, one line.
pg_local=1; redis_local=1
is_local_host "${DATABASE_HOST:-}" || pg_local=0
is_local_host "${REDIS_HOST:-}" || redis_local=0
if { [ "$pg_local" -eq 0 ] || { pg_answers && pg_trust_ok; }; } && { [ "$redis_local" -eq 0 ] || redis_answers; }; then
  if [ "$pg_local" -eq 1 ] && [ "$redis_local" -eq 1 ]; then
    log "postgres and redis are up"
  else
    log "local services up; operator-managed: $([ "$pg_local" -eq 0 ] && printf 'DATABASE_HOST=%s ' "$DATABASE_HOST")$([ "$redis_local" -eq 0 ] && printf 'REDIS_HOST=%s' "$REDIS_HOST")"
  fi
  exit 0
fi

with_lock services 300
ensure_postgres
ensure_redis
log "services ready (postgres 127.0.0.1:$PG_PORT, redis 127.0.0.1:$REDIS_PORT unless operator-managed)"
