#!/usr/bin/env bash
# What WAL-logging costs anker under TPC-C: heap, anker, and anker with every table UNLOGGED
# (the change log is still written to the relation file through shared buffers, without WAL),
# in one cluster, 2 clients, rounds rotating the three databases forwards and backwards so the
# machine's drift falls on all. Prints mean tps and the three ratios.
#
#   bench/log_cost.sh [--warehouses W] [--duration SEC] [--rounds R]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
W=4; DURATION=20; ROUNDS=3
while [ $# -gt 0 ]; do
    case $1 in
        --warehouses) W=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        *) sed -n '2,7p' "$0" >&2; exit 2 ;;
    esac
done
. "$BENCH/lib/cluster.sh"
. "$BENCH/lib/tpcc.sh"
export PGOPTIONS="-c client_min_messages=warning"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "shared_buffers = '2GB'" "synchronous_commit = off" \
    "max_wal_size = '16GB'" "checkpoint_timeout = '30min'" "max_parallel_workers_per_gather = 0" "jit = off" >/dev/null
tpcc_create_db tpcc_heap heap "$W"
tpcc_create_db tpcc_anker anker "$W"
tpcc_create_db tpcc_anker_unlogged anker "$W"
for t in warehouse district customer history new_order orders order_line item stock supplier nation region; do
    cluster_psql -q -d tpcc_anker_unlogged -c "ALTER TABLE $t SET UNLOGGED"
done
echo "loaded W=$W: tpcc_heap, tpcc_anker, tpcc_anker_unlogged"
cluster_psql -q -c CHECKPOINT
WORK=$(cluster_workdir)
tpcc_mix_args standard
tps() { # database seconds
    (cd "$WORK" && cluster_pgbench -n -M prepared -c 2 -j 2 -T "$2" -D warehouses="$W" -D uniform=0 "${TPCC_MIX_ARGS[@]}" "$1" 2>&1) |
        grep -Eo 'tps = [0-9.]+' | head -n1 | awk '{print $3}'
}
dbs=(tpcc_heap tpcc_anker tpcc_anker_unlogged)
for db in "${dbs[@]}"; do tps "$db" 10 >/dev/null; done   # warm-up
declare -A sum
for r in $(seq 1 "$ROUNDS"); do
    for db in tpcc_heap tpcc_anker tpcc_anker_unlogged tpcc_anker_unlogged tpcc_anker tpcc_heap; do
        t=$(tps "$db" "$DURATION")
        echo "round $r $db: $t tps"
        sum[$db]=$(echo "${sum[$db]:-0} + $t" | bc -l)
    done
done
for db in "${dbs[@]}"; do printf '%s: %.0f tps\n' "$db" "$(echo "${sum[$db]} / (2 * $ROUNDS)" | bc -l)"; done
printf 'anker/heap %.3f, anker unlogged/heap %.3f, anker/anker unlogged %.3f\n' \
    "$(echo "${sum[tpcc_anker]} / ${sum[tpcc_heap]}" | bc -l)" \
    "$(echo "${sum[tpcc_anker_unlogged]} / ${sum[tpcc_heap]}" | bc -l)" \
    "$(echo "${sum[tpcc_anker]} / ${sum[tpcc_anker_unlogged]}" | bc -l)"
