#!/usr/bin/env bash
# TPC-B-like pgbench on anker and on heap in the same run: the standard
# `pgbench -i` schema, created USING anker (default_table_access_method) in
# one database and USING heap in another; the default built-in script.
#
#   bench/tpcb.sh [--scale S] [--clients C] [--duration SEC] [--rounds R]
#
# Prints tps per engine per round and the anker/heap ratio. Rounds
# alternate the engines, to spread the machine's noise over both.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCALE=10; CLIENTS=2; DURATION=60; ROUNDS=1
while [ $# -gt 0 ]; do
    case $1 in
        --scale) SCALE=$2; shift 2 ;;
        --clients) CLIENTS=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        *) echo "usage: $0 [--scale S] [--clients C] [--duration SEC] [--rounds R]" >&2; exit 2 ;;
    esac
done
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '8GB'" "shared_buffers = '1GB'" \
    "synchronous_commit = off" "max_wal_size = '4GB'" "jit = off"
for am in heap anker; do
    cluster_psql -c "CREATE DATABASE tpcb_$am"
    [ "$am" = anker ] && cluster_psql -d tpcb_anker -c "CREATE EXTENSION anker"
    cluster_run env PGOPTIONS="-c default_table_access_method=$am" "$PG_BINDIR/pgbench" -i -q -s "$SCALE" -d "tpcb_$am" >/dev/null 2>&1
    am_of=$(cluster_psql -d "tpcb_$am" -Atc "SELECT amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE relname = 'pgbench_accounts'")
    echo "tpcb_$am: pgbench_accounts USING $am_of, scale $SCALE"
done
declare -A sum
for r in $(seq 1 "$ROUNDS"); do
    for am in heap anker; do
        tps=$(cluster_pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$DURATION" "tpcb_$am" 2>&1 | grep -Eo 'tps = [0-9.]+' | head -n1 | awk '{print $3}')
        echo "round $r $am: $tps tps"
        sum[$am]=$(echo "${sum[$am]:-0} + $tps" | bc -l)
    done
done
printf 'heap %.0f tps, anker %.0f tps, anker/heap = %.2f\n' \
    "$(echo "${sum[heap]} / $ROUNDS" | bc -l)" "$(echo "${sum[anker]} / $ROUNDS" | bc -l)" "$(echo "${sum[anker]} / ${sum[heap]}" | bc -l)"
cluster_psql -d tpcb_anker -c "SELECT name, value FROM anker.stats WHERE value > 0"
