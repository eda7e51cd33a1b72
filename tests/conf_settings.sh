#!/usr/bin/env bash
# anker.* settings in postgresql.conf take effect (none is dropped as an
# unknown parameter at start-up), and a misspelt anker.* setting is refused.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
cluster_start "lc_messages = 'C'" "shared_preload_libraries = 'anker'" "anker.memory_limit = '128MB'" \
    "anker.snapshot_method = 'none'" "anker.enable_scan_node = off" "anker.malloc_trim_threshold = '4MB'"
got=$(cluster_psql -Atc "SELECT current_setting('anker.snapshot_method') || ' ' || current_setting('anker.enable_scan_node') || ' ' || current_setting('anker.memory_limit') || ' ' || current_setting('anker.malloc_trim_threshold')")
echo "settings: $got"
[ "$got" = "none off 128MB 4MB" ]
if grep -i "invalid configuration parameter" "$CLUSTER_LOG"; then
    echo "FAIL: the server dropped an anker setting"; exit 1
fi
out=$(cluster_psql -c "SET anker.snapshot_methd = 'cow'" 2>&1 || true)
echo "$out"
grep -q 'invalid configuration parameter name "anker.snapshot_methd"' <<< "$out"
echo "ok: anker settings from postgresql.conf apply; unknown anker.* names are refused"
