#!/usr/bin/env bash
# Update throughput of anker's in-place path (no indexed column changes:
# same row id, before-image on the undo chain) against its new-row-id path
# (an indexed column changes: new version, new index entries), with heap
# doing the same updates for reference. One run; pgbench, single-row
# updates by primary key.
#
#   bench/mvcc/update_paths.sh [--rows N] [--clients C] [--duration SEC]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROWS=1000000; CLIENTS=2; DURATION=30
while [ $# -gt 0 ]; do
    case $1 in
        --rows) ROWS=$2; shift 2 ;;
        --clients) CLIENTS=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        *) echo "usage: $0 [--rows N] [--clients C] [--duration SEC]" >&2; exit 2 ;;
    esac
done
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '8GB'" "shared_buffers = '1GB'" \
    "synchronous_commit = off" "max_wal_size = '4GB'" "jit = off"
cluster_psql -q -c "CREATE EXTENSION anker"
for am in anker heap; do
    cluster_psql -q -c "CREATE TABLE u_$am (id int PRIMARY KEY, k int, v int, note text) USING $am" \
        -c "CREATE INDEX ON u_$am (k)" \
        -c "INSERT INTO u_$am SELECT g, g, 0, 'note ' || g FROM generate_series(1, $ROWS) g" -c "VACUUM ANALYZE u_$am"
done
work=$(cluster_workdir)
for am in anker heap; do
    printf '\\set id random(1, %s)\nUPDATE u_%s SET v = v + 1 WHERE id = :id;\n' "$ROWS" "$am" > "$work/inplace_$am.sql"
    printf '\\set id random(1, %s)\nUPDATE u_%s SET k = k + 1 WHERE id = :id;\n' "$ROWS" "$am" > "$work/newrow_$am.sql"
done
chown postgres "$work"/*.sql
run() { cluster_pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$DURATION" -f "$work/$1.sql" postgres 2>&1 | grep -Eo 'tps = [0-9.]+' | head -n1 | awk '{print $3}'; }
declare -A tps
for t in inplace_anker newrow_anker inplace_heap newrow_heap; do
    tps[$t]=$(run "$t")
    cluster_psql -q -c "VACUUM u_${t#*_}"
    echo "$t: ${tps[$t]} tps"
done
echo
echo "| update | anker tps | heap tps | anker / heap |"
echo "|---|---:|---:|---:|"
for p in inplace newrow; do
    printf '| %s | %.0f | %.0f | %.2f |\n' "$([ $p = inplace ] && echo 'non-indexed column (anker: in place)' || echo 'indexed column (anker: new row id)')" \
        "${tps[${p}_anker]}" "${tps[${p}_heap]}" "$(echo "${tps[${p}_anker]} / ${tps[${p}_heap]}" | bc -l)"
done
printf 'anker in-place / new-row-id = %.2f\n' "$(echo "${tps[inplace_anker]} / ${tps[newrow_anker]}" | bc -l)"
cluster_psql -c "SELECT name, value FROM anker.stats WHERE name LIKE '%update%'"
