#!/usr/bin/env bash
# Where a TPC-C transaction's CPU time goes in the backend, heap against anker, function by
# function: one throwaway cluster, the TPC-C tables USING heap in one database and USING anker
# in another, then ABBA rounds in which one pgbench client runs the transaction type (or the
# standard mix) and `perf record --call-graph dwarf` samples its backend for SEC seconds (with
# --clients C, C clients run and one of their backends is sampled). Prints,
# per engine, the CPU µs per transaction spent under each table AM entry point and under its
# counterpart in the other engine, the mean of the engine's rounds, and anker's busiest
# functions, and where the backend's CPU was: in anker.so (for heap: anker's executor hooks
# only), in PostgreSQL and its libraries, in the kernel. `raw_parser` (parsing, the same work
# for both engines) is a control: how far it differs between rounds is how far the machine
# drifted.
#
#   bench/profile_ab.sh [--type payment|neworder|...|mix] [--warehouses W] [--seconds SEC]
#                       [--rounds R] [--clients C] [--out DIR]
#
# Needs perf (Debian: linux-perf). The normal release build has the debug info the unwinder
# needs. The perf data is deleted; the `perf script` text of each round stays in DIR (default: a
# new directory under /tmp).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
W=4; SECONDS_SAMPLED=4; ROUNDS=2; TYPE=payment; CLIENTS=1; OUT=
while [ $# -gt 0 ]; do
    case $1 in
        --type) TYPE=$2; shift 2 ;;
        --warehouses) W=$2; shift 2 ;;
        --seconds) SECONDS_SAMPLED=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --clients) CLIENTS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        *) sed -n '2,17p' "$0" >&2; exit 2 ;;
    esac
done
command -v perf >/dev/null || { echo "profile_ab.sh needs perf (Debian: linux-perf)" >&2; exit 2; }
[ "$TYPE" = mix ] || [ -f "$BENCH/tpcc/$TYPE.pgbench" ] || { echo "no transaction type $TYPE (bench/tpcc/*.pgbench, or mix)" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d /tmp/profile-ab.XXXXXX)}
mkdir -p "$OUT"
. "$BENCH/lib/cluster.sh"
. "$BENCH/lib/tpcc.sh"
export PGOPTIONS="-c client_min_messages=warning"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "shared_buffers = '2GB'" "synchronous_commit = off" \
    "max_wal_size = '16GB'" "checkpoint_timeout = '30min'" "jit = off" >/dev/null
WORK=$(cluster_workdir)
for am in heap anker; do tpcc_create_db "tpcc_$am" "$am" "$W"; done
cluster_psql -q -c CHECKPOINT
if [ "$TYPE" = mix ]; then
    tpcc_mix_args standard
    SCRIPTS=("${TPCC_MIX_ARGS[@]}")
else
    SCRIPTS=(-f "$BENCH/tpcc/$TYPE.pgbench")
fi

# label | anker's function | heap's function (- : none)
PAIRS=(
    "whole backend|PostgresMain|PostgresMain"
    "control: parsing|raw_parser|raw_parser"
    "UPDATE, in the AM|anker::tam::modify::tuple_update|heap_update"
    "INSERT, in the AM|anker::tam::modify::tuple_insert|heap_insert"
    "DELETE, in the AM|anker::tam::modify::tuple_delete|heap_delete"
    "row lock, in the AM|anker::tam::modify::tuple_lock|heap_lock_tuple"
    "ExecUpdate's old row|anker::tam::scan::tuple_fetch_row_version|heap_fetch"
    "Seq Scan rows|anker::tam::scan::scan_getnextslot|heap_getnextslot"
    "Seq Scan start|anker::tam::scan::scan_begin|heap_beginscan"
    "index scan rows (index and table)|index_getnext_slot|index_getnext_slot"
    "garbage: chains pruned / pages pruned|anker::undo::collect_garbage|heap_page_prune_opt"
    "WAL records inserted|XLogInsert|XLogInsert"
    "the xid's assignment|GetCurrentTransactionId|GetCurrentTransactionId"
    "commit|CommitTransactionCommand|CommitTransactionCommand"
    "the log's tail lock (anker only)|anker::durable::lock_tail_buffer|-"
    "LWLocks taken|LWLockAcquire|LWLockAcquire"
    "spinlocks waited for|perform_spin_delay|perform_spin_delay"
)
functions() { # $1 = anker|heap
    local col=2 p
    [ "$1" = heap ] && col=3
    for p in "${PAIRS[@]}"; do echo "$p" | cut -d'|' -f"$col"; done
}

order=()
for ((r = 0; r < ROUNDS; r++)); do
    if ((r % 2 == 0)); then order+=(heap anker); else order+=(anker heap); fi
done
echo "W=$W, $TYPE, $CLIENTS client(s); perf samples one backend for $SECONDS_SAMPLED s a round; CPU µs per transaction"
k=0
for am in "${order[@]}"; do
    k=$((k + 1))
    log="$OUT/pgbench-$k-$am.txt"
    (cd "$WORK" && cluster_run "$PG_BINDIR/pgbench" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T $((SECONDS_SAMPLED + 8)) \
        -D warehouses="$W" -D uniform=0 "${SCRIPTS[@]}" "tpcc_$am" >"$log" 2>&1) &
    client=$!
    sleep 4
    pid=$(cluster_psql -At -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND datname = 'tpcc_$am' LIMIT 1")
    perf record -q -F 2000 --call-graph dwarf,16384 -p "$pid" -o "$OUT/perf.data" -- sleep "$SECONDS_SAMPLED" >/dev/null 2>&1
    wait "$client"
    # the sampled backend's rate: the transactions pgbench reports over the run's seconds, shared
    # by its clients
    tps=$(grep -Eo 'tps = [0-9.]+' "$log" | head -n1 | awk -v c="$CLIENTS" '{print $3 / c}')
    perf script -i "$OUT/perf.data" 2>/dev/null >"$OUT/script-$k-$am.txt"
    rm -f "$OUT/perf.data"
    # shellcheck disable=SC2046 # one argument per function name
    python3 "$BENCH/lib/perf_share.py" --freq 2000 --seconds "$SECONDS_SAMPLED" --tps "$tps" --top 12 \
        $(functions "$am") <"$OUT/script-$k-$am.txt" >"$OUT/share-$k-$am.tsv"
    echo "round $k: $am, $tps tps"
done

python3 - "$OUT" "${order[@]}" -- "${PAIRS[@]}" <<'EOF'
import sys, statistics
out, rest = sys.argv[1], sys.argv[2:]
cut = rest.index("--")
order, pairs = rest[:cut], [p.split("|") for p in rest[cut + 1:]]
rounds = {"heap": [], "anker": []}
places = {"heap": [], "anker": []}
tops = []
for k, am in enumerate(order, 1):
    lines = [l.rstrip("\n").split("\t") for l in open(f"{out}/share-{k}-{am}.tsv")]
    rounds[am].append([float(v) for v, f in lines if not f.startswith(("top: ", "in: "))])
    places[am].append({f[4:]: float(v) for v, f in lines if f.startswith("in: ")})
    if am == "anker":
        tops.append({f[5:]: float(v) for v, f in lines if f.startswith("top: ")})
print(f"{'':40} {'heap':>22} {'anker':>22}  anker/heap")
fmt = lambda xs: " ".join(f"{x:6.2f}" for x in xs)
def row(label, h, a):
    ratio = statistics.mean(a) / statistics.mean(h) if statistics.mean(h) > 0 else float("nan")
    print(f"{label:40} {fmt(h):>22} {fmt(a):>22}  {ratio:6.2f}")
for i, (label, af, hf) in enumerate(pairs):
    row(label, [r[i] for r in rounds["heap"]], [r[i] for r in rounds["anker"]])
print("where the backend's CPU was (the sample's innermost frame):")
for p in places[order[0]][0]:  # (in perf_share.py's order)
    row("  in " + p, [r.get(p, 0.0) for r in places["heap"]], [r.get(p, 0.0) for r in places["anker"]])
print("anker's busiest functions (mean µs per transaction):")
names = set().union(*tops) if tops else set()
mean = {n: statistics.mean(t.get(n, 0.0) for t in tops) for n in names}
for n in sorted(names, key=lambda n: -mean[n])[:12]:
    print(f"  {mean[n]:6.2f}  {n}")
EOF
echo "perf script text per round: $OUT"
