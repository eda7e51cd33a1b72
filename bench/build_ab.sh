#!/usr/bin/env bash
# Two builds of anker against each other on the same rows: one throwaway cluster, TPC-C loaded
# USING anker once, then rounds that alternate the builds ABBA, each round after a restart
# with that build's anker.so in place of the installed one (the tables load back from their
# files). Across two runs of tpcc_ab.sh a change of a few per cent drowns in the machine's
# drift; here both builds see the same cluster, tables and minutes.
#
#   bench/build_ab.sh --a OLD.so --b NEW.so [--warehouses W] [--clients C] [--duration SEC]
#                     [--rounds R] [--conf 'postgresql.conf line' ...] [--script FILE.pgbench]
#
# --script runs a pgbench script of one's own on the TPC-C tables instead of the mix (it gets
# -D warehouses=W): bench/tpcc/stock_lookups.pgbench, say, fetches 200 random `stock` rows by
# index a transaction, the path of index fetches almost alone.
#
# Make the two files from two checkouts: `cargo pgrx install --release ...` in each and copy
# $(pg_config --pkglibdir)/anker.so away after each; both must come from sources with the same
# SQL (the installed extension script is used for both). The installed anker.so is put back
# at the end, also on failure. Prints tps per round and build, each pair's B/A, and B/A of the
# sums.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
W=4; CLIENTS=2; DURATION=25; ROUNDS=4
. "$BENCH/lib/two_builds.sh"
SCRIPT=
args=()
while [ $# -gt 0 ]; do
    case $1 in
        --script) SCRIPT=$2; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
two_builds_start 2,19p "${args[@]}"
WORKLOAD=("${TPCC_MIX_ARGS[@]}")
[ -n "$SCRIPT" ] && WORKLOAD=(-f "$(realpath "$SCRIPT")")
tpcc_create_db tpcc "anker" "$W"
cluster_psql -q -c CHECKPOINT
oltp() { # $1 = seconds; prints tps
    (cd "$WORK" && cluster_run "$PG_BINDIR/pgbench" -n -M prepared -c "$CLIENTS" -j "$threads" -T "$1" \
        -D warehouses="$W" -D uniform=0 "${WORKLOAD[@]}" tpcc 2>&1) |
        grep -Eo 'tps = [0-9.]+' | head -n1 | awk '{print $3}'
}
declare -A sum round_tps
ratios=()
for r in $(seq 1 "$ROUNDS"); do
    order="A B"; [ $((r % 2)) = 0 ] && order="B A"
    for build in $order; do
        two_builds_restart_with "${!build}"
        oltp 8 >/dev/null   # the tables load from their files; warm the caches
        tps=$(oltp "$DURATION")
        echo "round $r $build: $tps tps"
        round_tps[$build]=$tps
        sum[$build]=$(echo "${sum[$build]:-0} + $tps" | bc -l)
    done
    ratios+=("$(echo "${round_tps[B]} / ${round_tps[A]}" | bc -l)")
done
printf 'A %.0f tps, B %.0f tps, B/A = %.3f\n' "$(echo "${sum[A]} / $ROUNDS" | bc -l)" \
    "$(echo "${sum[B]} / $ROUNDS" | bc -l)" "$(echo "${sum[B]} / ${sum[A]}" | bc -l)"
printf 'B/A by round: %s\n' "$(printf '%.3f ' "${ratios[@]}")"
tpcc_check tpcc
