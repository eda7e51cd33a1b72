#!/usr/bin/env bash
# What writing an image costs the writers: TPC-C OLTP (2 clients, or C) on anker
# with pgbench's per-second progress, and in the middle of the run an image
# of the two largest tables (stock, customer: anker.compact) followed by a
# CHECKPOINT; heap in the same cluster gets the CHECKPOINT at the same
# moment. Reports the image's size, time and MB/s, and tps in the seconds
# before, during and after, per engine. --repeat N writes the two images N
# times in a row, so that "during" spans several of pgbench's 1 s samples.
# --hold SEC writes no image: on both engines a transaction opens cursors
# over stock and customer, fetches a row of each (anker's scans take their
# copy-on-write snapshots) and keeps them open for SEC seconds, so the
# snapshots' cost to writers shows without the image writer's CPU and WAL.
# --xmin-only (with --hold) opens no cursor: a REPEATABLE READ transaction
# holds its snapshot's xmin for SEC seconds, which holds back both engines'
# garbage collection as the cursors' transaction does, without anker's
# copy-on-write snapshots.
# --cost-delay MS writes the images at the pace of vacuum_cost_delay = MS
# (with vacuum_cost_limit's default, 200): 2 is autovacuum's pace, at which
# the images VACUUM writes by itself are written; 0 (the default) is a
# manual VACUUM's, unpaced.
# --vacuum TABLE runs VACUUM TABLE on both engines instead (at --cost-delay's
# pace), the way autovacuum writes images: on anker once the table's log has
# passed its image mark, so that the VACUUM writes an image (with 2 clients
# at W=4, `stock` gets there 3 to 4 minutes after the start: give --duration
# 300 or so), on heap at --at. Unlike anker.compact's SELECT, a VACUUM holds no
# xmin that others' pruning waits for.
#
#   bench/image_dip.sh [--warehouses W] [--duration SEC] [--at SEC] [--clients C] [--repeat N] [--cost-delay MS]
#                      [--hold SEC [--xmin-only] | --vacuum TABLE]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
W=4; DURATION=40; AT=15; CLIENTS=2; REPEAT=1; COST_DELAY=0; HOLD=0; XMIN_ONLY=0; VACUUM=
while [ $# -gt 0 ]; do
    case $1 in
        --warehouses) W=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --at) AT=$2; shift 2 ;;
        --clients) CLIENTS=$2; shift 2 ;;
        --repeat) REPEAT=$2; shift 2 ;;
        --cost-delay) COST_DELAY=$2; shift 2 ;;
        --hold) HOLD=$2; shift 2 ;;
        --xmin-only) XMIN_ONLY=1; shift ;;
        --vacuum) VACUUM=$2; shift 2 ;;
        *) sed -n '2,29p' "$0" >&2; exit 2 ;;
    esac
done
. "$BENCH/lib/cluster.sh"
. "$BENCH/lib/tpcc.sh"
export PGOPTIONS="-c client_min_messages=warning"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "shared_buffers = '2GB'" "synchronous_commit = off" \
    "max_wal_size = '16GB'" "checkpoint_timeout = '30min'" "autovacuum = off" "jit = off" >/dev/null
WORK=$(cluster_workdir)
for am in heap anker; do
    tpcc_create_db "tpcc_$am" "$am" "$W"
done
cluster_psql -q -c CHECKPOINT
tpcc_mix_args standard
ms() { date +%s%3N; }
what=image; [ "$HOLD" != 0 ] && what=hold; [ -n "$VACUUM" ] && what=vacuum
for am in heap anker; do
    (cd "$WORK" && cluster_pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$DURATION" -P 1 \
        -D warehouses="$W" -D uniform=0 "${TPCC_MIX_ARGS[@]}" "tpcc_$am" 2>"$WORK/progress.$am" >/dev/null) &
    bench=$!
    b0=$(ms)
    if [ -n "$VACUUM" ] && [ "$am" = anker ]; then
        due="SELECT log_bytes > image_mark_bytes FROM anker.table_storage() WHERE relfilenode = pg_relation_filenode('$VACUUM')"
        until [ "$(cluster_psql -At -d tpcc_anker -c "$due")" = t ]; do
            [ $(( $(ms) - b0 )) -lt $(( (DURATION - 20) * 1000 )) ] || { echo "anker: $VACUUM's log did not reach its image mark in time (give a longer --duration)" >&2; exit 1; }
            sleep 1
        done
    else
        sleep "$AT"
    fi
    t0=$(ms)
    at=$(( (t0 - b0) / 1000 ))
    if [ -n "$VACUUM" ]; then
        PGOPTIONS="$PGOPTIONS -c vacuum_cost_delay=$COST_DELAY" cluster_psql -q -d "tpcc_$am" -c "VACUUM $VACUUM"
        [ "$am" = heap ] || grep -o "anker: wrote an image of \"$VACUUM\".*" "$CLUSTER_LOG" | tail -n1 | sed 's/^/anker: VACUUM /'
    elif [ "$HOLD" != 0 ] && [ "$XMIN_ONLY" = 1 ]; then
        cluster_psql -q -At -d "tpcc_$am" <<SQL
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM warehouse \\g /dev/null
SELECT pg_sleep($HOLD) \\g /dev/null
COMMIT;
SQL
    elif [ "$HOLD" != 0 ]; then
        cluster_psql -q -At -d "tpcc_$am" <<SQL | sed "s/^/$am: /"
BEGIN;
DECLARE s CURSOR FOR SELECT * FROM stock;
DECLARE c CURSOR FOR SELECT * FROM customer;
FETCH 1 FROM s \\g /dev/null
FETCH 1 FROM c \\g /dev/null
$([ "$am" = anker ] && echo "SELECT 'snapshots live: ' || string_agg(method, ', ') FROM anker.snapshot_list();")
SELECT pg_sleep($HOLD) \\g /dev/null
COMMIT;
SQL
    elif [ "$am" = anker ]; then
        for tbl in $(for _ in $(seq "$REPEAT"); do echo stock customer; done); do
            s0=$(ms)
            read -r rows bytes < <(PGOPTIONS="$PGOPTIONS -c vacuum_cost_delay=$COST_DELAY" cluster_psql -At -F ' ' -d tpcc_anker -c "SELECT rows, image_bytes FROM anker.compact('$tbl')")
            s1=$(ms)
            printf 'anker: image of %s: %d rows, %.1f MB in %d ms (%.0f MB/s)\n' "$tbl" "$rows" \
                "$(echo "$bytes / 1048576" | bc -l)" $((s1 - s0)) "$(echo "$bytes / 1048576 / (($s1 - $s0 + 1) / 1000)" | bc -l)"
        done
    fi
    t1=$(ms)
    cluster_psql -q -d "tpcc_$am" -c CHECKPOINT
    t2=$(ms)
    wait "$bench"
    # progress lines: "progress: 16.0 s, 1234.5 tps, ..."
    awk -v at="$at" -v img=$(( (t1 - t0 + 500) / 1000 )) -v ck=$(( (t2 - t1 + 500) / 1000 )) -v am="$am" -v what="$what" '
        /^progress:/ { t = $2 + 0; tps = $4 + 0
            if (t <= at) { b += tps; nb++ }
            else if (t <= at + img) { i += tps; ni++ }
            else if (t <= at + img + ck) { c += tps; nc++ }
            else { a += tps; na++ } }
        END { printf "%s: tps before %.0f, during the %s %s, during the checkpoint %s, after %.0f\n", am,
                b / (nb ? nb : 1), what, (ni ? sprintf("%.0f", i / ni) : "-"), (nc ? sprintf("%.0f", c / nc) : "-"), a / (na ? na : 1) }' \
        "$WORK/progress.$am"
    echo "$am: $what $((t1 - t0)) ms, checkpoint $((t2 - t1)) ms"
    echo "$am: tps second by second: $(awk '/^progress:/ { printf "%.0f ", $4 }' "$WORK/progress.$am")"
done
