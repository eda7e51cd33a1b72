#!/usr/bin/env bash
# Without shared_preload_libraries, CREATE EXTENSION anker fails with a clear
# error and the server keeps running.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
cluster_start "lc_messages = 'C'"
out=$(cluster_psql -c "CREATE EXTENSION anker" 2>&1 || true)
echo "$out"
grep -q "anker must be loaded via shared_preload_libraries" <<< "$out"
cluster_psql -Atc "SELECT count(*) FROM pg_extension WHERE extname = 'anker'" | grep -qx 0
cluster_psql -Atc "SELECT 1" | grep -qx 1
echo "ok: CREATE EXTENSION refused without shared_preload_libraries"
