#!/usr/bin/env bash
# Runs the given compiled benches (dist/bench/<name>.bench.js) one after another, each under a time bound, and
# lets every bench run whatever the others did: a failing bench is reported (name, exit code) and the next one
# starts; at the end a summary names the failed ones and the script exits 1 if any failed.
#   BENCH_TIMEOUT: the bound per bench, in timeout(1)'s syntax (default 30m). When it passes, the bench's process
#   group gets SIGTERM (the bench harness then removes its containers and drops its database), SIGKILL 60 s later.
# Usage: bash scripts/run-benches.sh dist/bench/*.bench.js    (npm run bench runs them all this way)
set -uo pipefail

[ "$#" -gt 0 ] || { echo "usage: $0 <bench.js>..." >&2; exit 2; }
REPO_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
. "$REPO_DIR/scripts/lib/common.sh"
. "$REPO_DIR/scripts/lib/node.sh"
# Node.js 24 (npm run bench has it on PATH already; run alone, this fetches it once into the user's cache) and
# node_modules' native addons built for it.
use_project_node
(cd "$REPO_DIR" && ensure_node_modules) || exit 1
bound="${BENCH_TIMEOUT:-30m}"
failed=()
for bench in "$@"; do
  name="$(basename -- "$bench" .js)"
  name="${name%.bench}"
  echo "=== $name" >&2
  timeout --kill-after=60 "$bound" node "$bench"
  status=$?
  case "$status" in
    0) continue ;;
    124) reason="timed out after $bound (exit code 124)" ;;
    137) reason="killed by SIGKILL (exit code 137: still running 60 s after its time bound of $bound, or killed by the kernel)" ;;
    *) reason="exit code $status" ;;
  esac
  echo "=== $name FAILED: $reason" >&2
  failed+=("$name: $reason")
done

echo >&2
if [ "${#failed[@]}" -eq 0 ]; then
  echo "benches: all $# passed" >&2
  exit 0
fi
echo "benches: ${#failed[@]} of $# failed:" >&2
printf '  %s\n' "${failed[@]}" >&2
exit 1
