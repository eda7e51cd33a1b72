#!/usr/bin/env bash
# ANALYZE, heap against anker: one table of ROWS rows per engine (7 columns: ints, a float, a
# date, short and md5 text), loaded in one cluster with autovacuum off, then a manual ANALYZE
# of each, alternating, ROUNDS times. The first round of each engine also sets the hint bits
# of the freshly loaded rows. Prints ms per ANALYZE and round, the medians and anker/heap, and
# what each engine's statistics say of the column in row order (correlation 1) and of a
# column with 1,000 values.
#
#   bench/analyze_ab.sh [--rows 5000000] [--rounds 4] [--conf 'postgresql.conf line' ...]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
ROWS=5000000; ROUNDS=4; CONF=()
while [ $# -gt 0 ]; do
    case $1 in
        --rows) ROWS=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --conf) CONF+=("$2"); shift 2 ;;
        *) sed -n '2,9p' "$0" >&2; exit 2 ;;
    esac
done
. "$BENCH/lib/cluster.sh"
export PGOPTIONS="-c client_min_messages=warning"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "shared_buffers = '4GB'" "autovacuum = off" \
    "max_wal_size = '16GB'" "checkpoint_timeout = '30min'" "anker.memory_limit = '8GB'" "${CONF[@]}" >/dev/null
cluster_psql -q -c "CREATE EXTENSION anker"
for am in heap anker; do
    cluster_psql -q -c "CREATE TABLE t_$am (id int, a int, b text, c float8, d date, e int, f text) USING $am" \
        -c "INSERT INTO t_$am SELECT i, i % 1000, 'name ' || (i % 5000), i * 0.5, date '2020-01-01' + i % 1000,
                i % 7, md5(i::text) FROM generate_series(1, $ROWS) i"
done
analyze_ms() { # table; prints the ANALYZE's wall time in ms
    cluster_psql -At -c "SELECT extract(epoch FROM clock_timestamp()) * 1000" -c "ANALYZE $1" \
        -c "SELECT extract(epoch FROM clock_timestamp()) * 1000" | grep -v ANALYZE |
        awk 'NR == 1 {t = $1} NR == 2 {printf "%.0f", $1 - t}'
}
declare -A times
echo "ANALYZE of $ROWS rows, ms:"
for r in $(seq 1 "$ROUNDS"); do
    line="  round $r:"
    for am in heap anker; do
        ms=$(analyze_ms "t_$am")
        times[$am]="${times[$am]:-} $ms"
        line="$line $am $ms"
    done
    echo "$line"
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
h=$(echo "${times[heap]}" | median); a=$(echo "${times[anker]}" | median)
printf 'median: heap %s ms, anker %s ms, anker/heap = %.2f\n' "$h" "$a" "$(echo "$a / $h" | bc -l)"
cluster_psql -c "SELECT tablename, attname, n_distinct, round(correlation::numeric, 3) AS correlation
                   FROM pg_stats WHERE tablename IN ('t_heap', 't_anker') AND attname IN ('id', 'a')
                  ORDER BY attname, tablename"
cluster_psql -c "SELECT relname, reltuples FROM pg_class WHERE relname IN ('t_heap', 't_anker') ORDER BY 1"
