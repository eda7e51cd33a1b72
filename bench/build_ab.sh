#!/usr/bin/env bash
# Two builds of anker against each other on the same rows: one throwaway cluster, TPC-C loaded
# USING anker once, then rounds that alternate the builds ABBA, each round after a restart
# with that build's anker.so in place of the installed one (the tables load back from their
# files). Across two runs of tpcc_ab.sh a change of a few per cent drowns in the machine's
# drift; here both builds see the same cluster, tables and minutes.
#
#   bench/build_ab.sh --a OLD.so --b NEW.so [--warehouses W] [--clients C] [--duration SEC]
#                     [--rounds R] [--conf 'postgresql.conf line' ...]
#
# Make the two files from two checkouts: `cargo pgrx install --release ...` in each and copy
# $(pg_config --pkglibdir)/anker.so away after each; both must come from sources with the same
# SQL (the installed extension script is used for both). The installed anker.so is put back
# at the end, also on failure. Prints tps per round and build, each pair's B/A, and B/A of the
# sums.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
A=; B=; W=4; CLIENTS=2; DURATION=25; ROUNDS=4; CONF=()
while [ $# -gt 0 ]; do
    case $1 in
        --a) A=$2; shift 2 ;;
        --b) B=$2; shift 2 ;;
        --warehouses) W=$2; shift 2 ;;
        --clients) CLIENTS=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --conf) CONF+=("$2"); shift 2 ;;
        *) sed -n '2,15p' "$0" >&2; exit 2 ;;
    esac
done
[ -f "$A" ] && [ -f "$B" ] || { echo "--a and --b must name two anker.so files" >&2; exit 2; }
. "$BENCH/lib/cluster.sh"
. "$BENCH/lib/tpcc.sh"
tpcc_mix_args standard
LIB=$("${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}" --pkglibdir)/anker.so
SAVED=$(mktemp /tmp/anker-installed.XXXXXX.so)
cp "$LIB" "$SAVED"
finish() {
    cluster_cleanup
    cp "$SAVED" "$LIB" && rm -f "$SAVED"
}
trap finish EXIT
export PGOPTIONS="-c client_min_messages=warning"
cp "$A" "$LIB"
cluster_start "shared_preload_libraries = 'anker'" "shared_buffers = '2GB'" "synchronous_commit = off" \
    "max_wal_size = '16GB'" "checkpoint_timeout = '30min'" "max_parallel_workers_per_gather = 0" \
    "jit = off" "${CONF[@]}"
WORK=$(cluster_workdir)
tpcc_create_db tpcc "anker" "$W"
cluster_psql -q -c CHECKPOINT
threads=$CLIENTS; [ "$threads" -gt "$(nproc)" ] && threads=$(nproc)
oltp() { # $1 = seconds; prints tps
    (cd "$WORK" && cluster_run "$PG_BINDIR/pgbench" -n -M prepared -c "$CLIENTS" -j "$threads" -T "$1" \
        -D warehouses="$W" -D uniform=0 "${TPCC_MIX_ARGS[@]}" tpcc 2>&1) |
        grep -Eo 'tps = [0-9.]+' | head -n1 | awk '{print $3}'
}
declare -A sum round_tps
ratios=()
for r in $(seq 1 "$ROUNDS"); do
    order="A B"; [ $((r % 2)) = 0 ] && order="B A"
    for build in $order; do
        cluster_stop
        cp "${!build}" "$LIB"
        _cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DATA" -l "$CLUSTER_LOG" -w -t 120 start >/dev/null
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
bad=0
out=$(cluster_psql -At -F '|' -d tpcc -f "$BENCH/tpcc/check.sql")
if printf '%s\n' "$out" | awk -F'|' '$2 != 0 {bad = 1} END {exit !bad}'; then
    echo "tpcc: CONSISTENCY VIOLATED: $(printf '%s' "$out" | tr '\n' ';')"; bad=1
else
    echo "tpcc: consistency conditions hold"
fi
exit "$bad"
