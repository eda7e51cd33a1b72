#!/usr/bin/env bash
# Two storage layouts of the same rows, run by the same code: TPC-C loaded USING anker once by
# build A (database tpcc_a) and once by build B (tpcc_b) in one throwaway cluster, then OLTP
# rounds on build B alone that alternate the two databases ABBA. A table keeps the layout it
# was made with (column specs live in its log and images), so this isolates what a layout
# change does; bench/build_ab.sh, which restarts one database under each build, cannot see it.
#
#   bench/layout_ab.sh --a OLD.so --b NEW.so [--warehouses W] [--clients C] [--duration SEC]
#                      [--rounds R] [--conf 'postgresql.conf line' ...]
#
# Both anker.so files must work with the installed extension script (as for build_ab.sh). The
# installed anker.so is put back at the end, also on failure. Prints tps and client backends'
# CPU per transaction (bench/lib/pgcpu.py) per round, each pair's B/A, B/A of the sums, and
# the memory anker holds for each database's tables.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
W=4; CLIENTS=2; DURATION=30; ROUNDS=8
. "$BENCH/lib/two_builds.sh"
two_builds_start 2,14p "$@"
tpcc_create_db tpcc_a anker "$W"
two_builds_restart_with "$B"
tpcc_create_db tpcc_b anker "$W"
cluster_psql -q -c CHECKPOINT
postmaster=$(head -n1 "$CLUSTER_DATA/postmaster.pid")
oltp() { # $1 = database, $2 = seconds; prints "tps transactions client_cpu_seconds"
    local out
    out=$(cd "$WORK" && cluster_run python3 "$BENCH/lib/pgcpu.py" "$postmaster" -- \
        "$PG_BINDIR/pgbench" -n -M prepared -c "$CLIENTS" -j "$threads" -T "$2" \
        -D warehouses="$W" -D uniform=0 "${TPCC_MIX_ARGS[@]}" "$1" 2>&1)
    echo "$(echo "$out" | grep -Eo 'tps = [0-9.]+' | head -n1 | awk '{print $3}')" \
        "$(echo "$out" | grep -Eo 'transactions actually processed: [0-9]+' | awk '{print $4}')" \
        "$(echo "$out" | sed -n 's/^cpu: .*client=\([0-9.]*\).*/\1/p')"
}
for db in tpcc_a tpcc_b; do oltp "$db" 10 >/dev/null; done   # warm-up
declare -A tps_sum xacts cpu last
for r in $(seq 1 "$ROUNDS"); do
    order="tpcc_a tpcc_b"; [ $((r % 2)) = 0 ] && order="tpcc_b tpcc_a"
    for db in $order; do
        read -r tps n c < <(oltp "$db" "$DURATION")
        printf 'round %d %s: %s tps, client CPU %s ms per transaction\n' "$r" "$db" "$tps" \
            "$(awk -v c="$c" -v n="$n" 'BEGIN {printf "%.4f", c * 1000 / n}')"
        tps_sum[$db]=$(awk -v a="${tps_sum[$db]:-0}" -v b="$tps" 'BEGIN {print a + b}')
        xacts[$db]=$(( ${xacts[$db]:-0} + n ))
        cpu[$db]=$(awk -v a="${cpu[$db]:-0}" -v b="$c" 'BEGIN {print a + b}')
        last[$db]=$tps
    done
    echo "pair $r B/A $(awk -v b="${last[tpcc_b]}" -v a="${last[tpcc_a]}" 'BEGIN {printf "%.3f", b / a}')"
done
echo "B/A tps $(awk -v b="${tps_sum[tpcc_b]}" -v a="${tps_sum[tpcc_a]}" 'BEGIN {printf "%.3f", b / a}')," \
    "client CPU per transaction B/A $(awk -v cb="${cpu[tpcc_b]}" -v nb="${xacts[tpcc_b]}" -v ca="${cpu[tpcc_a]}" \
        -v na="${xacts[tpcc_a]}" 'BEGIN {printf "%.3f", (cb / nb) / (ca / na)}')"
for db in tpcc_a tpcc_b; do
    echo "$db: anker holds $(cluster_psql -d "$db" -At -c "SELECT pg_size_pretty(sum(bytes)) FROM anker.tables")"
done
bad=0
for db in tpcc_a tpcc_b; do tpcc_check "$db" || bad=1; done
exit "$bad"
