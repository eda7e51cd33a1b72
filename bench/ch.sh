#!/usr/bin/env bash
# The 22 CH-benCHmark queries (bench/olap/ch/) on heap, on anker and on standalone DuckDB over
# the same rows: one throwaway cluster with anker preloaded, the TPC-C + CH tables loaded
# USING heap in one database and USING anker in another (bench/lib/tpcc.sh), every query run
# --runs times in each (median latency; one backend, no parallel workers), its results compared
# between heap and anker (rows sorted: ties in ORDER BY may come in any order), then the heap
# database's rows exported to CSV and loaded into DuckDB (the Python wheel from PyPI, in a venv
# under /var/tmp), which runs the same texts on one thread.
#
#   bench/ch.sh [--warehouses W] [--runs R] [--timeout SEC] [--threads N] [--no-duckdb]
#               [--olap-engine postgres|duckdb] [--olap-min-cost C] [--out DIR]
#
# --olap-engine sets anker.olap_engine in the anker database (default postgres); the "ran in"
# column says which engine EXPLAIN shows for each query (and anker.olap_threads = --threads);
# --olap-min-cost sets anker.olap_min_cost (0: DuckDB takes even the cheapest queries).
# Prints a table (also DIR/summary.md): latency per engine, heap/anker, anker/DuckDB, rows,
# whether anker's rows equal heap's; geometric means over the queries all three finished.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
W=1; RUNS=3; TIMEOUT=300; THREADS=1; DUCK=1; OUT=; ENGINE=postgres; MIN_COST=
while [ $# -gt 0 ]; do
    case $1 in
        --warehouses) W=$2; shift 2 ;;
        --runs) RUNS=$2; shift 2 ;;
        --timeout) TIMEOUT=$2; shift 2 ;;
        --threads) THREADS=$2; shift 2 ;;
        --no-duckdb) DUCK=0; shift ;;
        --olap-engine) ENGINE=$2; shift 2 ;;
        --olap-min-cost) MIN_COST=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        *) sed -n '2,18p' "$0" >&2; exit 2 ;;
    esac
done
QDIR=$BENCH/olap/ch
DUCK_VENV=/var/tmp/anker-duckdb
DUCK_VERSION=2.0.1
. "$BENCH/lib/cluster.sh"
. "$BENCH/lib/tpcc.sh"
[ -n "$OUT" ] || OUT=$BENCH/out/$(date +%Y%m%d-%H%M%S)-ch-W$W
mkdir -p "$OUT"
if [ "$DUCK" = 1 ] && ! "$DUCK_VENV/bin/python" -c "import duckdb; assert duckdb.__version__ == '$DUCK_VERSION'" 2>/dev/null; then
    echo "installing duckdb $DUCK_VERSION (PyPI wheel) into $DUCK_VENV"
    python3 -m venv "$DUCK_VENV"
    "$DUCK_VENV/bin/pip" install -q "duckdb==$DUCK_VERSION"
fi
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '8GB'" "shared_buffers = '2GB'" \
    "work_mem = '64MB'" "max_parallel_workers_per_gather = $((THREADS - 1))" "jit = off" >/dev/null
# one timestamp for both loads: identical rows, comparable results
export TPCC_LOAD_TIME
TPCC_LOAD_TIME=$(date -u '+%Y-%m-%d %H:%M:%S+00')
for am in heap anker; do
    tpcc_create_db "ch_$am" "$am" "$W" 2> >(grep -v NOTICE >&2)
    echo "ch_$am: W=$W loaded USING $am"
done
cluster_psql -q -c "ALTER DATABASE ch_anker SET anker.olap_engine = '$ENGINE'" -c "ALTER DATABASE ch_anker SET anker.olap_threads = $THREADS"
[ -z "$MIN_COST" ] || cluster_psql -q -c "ALTER DATABASE ch_anker SET anker.olap_min_cost = $MIN_COST"
WORK=$(cluster_workdir)

# median milliseconds of RUNS runs of query file $2 in database $1, or timeout/error
pg_ms() {
    local out
    out=$({ echo "SET statement_timeout = '${TIMEOUT}s';"; echo '\timing on'; echo '\o /dev/null'
            for _ in $(seq 1 "$RUNS"); do cat "$2"; done; } | cluster_psql -X -d "$1" 2>&1) || true
    if grep -q "statement timeout" <<<"$out"; then echo timeout; return; fi
    if grep -q "ERROR" <<<"$out"; then echo error; return; fi
    grep -Eo 'Time: [0-9.]+ ms' <<<"$out" | awk '{print $2}' | sort -n | awk '{a[NR] = $1} END {printf "%.1f\n", a[int((NR + 1) / 2)]}'
}
# the rows of query file $2 in database $1, sorted
pg_rows() { # (an error is output too, and differs from the other engine's rows)
    { cluster_psql -X -At -P null='(null)' -d "$1" -c "SET statement_timeout = '${TIMEOUT}s'" -f "$2" 2>&1 || true; } | sort
}

declare -A duck_ms duck_rows
if [ "$DUCK" = 1 ]; then
    data=$WORK/duckdb-data
    mkdir -p "$data"
    for t in warehouse district customer history new_order orders order_line item stock supplier nation region; do
        cluster_psql -X -At -F $'\t' -d ch_heap -c "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = '$t'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum" > "$data/$t.cols"
        cols=$(cluster_psql -X -At -d ch_heap -c "SELECT string_agg(quote_ident(attname) || CASE WHEN atttypid = 'bpchar'::regtype THEN '::text' ELSE '' END, ', ' ORDER BY attnum) FROM pg_attribute WHERE attrelid = '$t'::regclass AND attnum > 0 AND NOT attisdropped")
        cluster_psql -X -d ch_heap -c "COPY (SELECT $cols FROM $t) TO STDOUT WITH (FORMAT csv)" > "$data/$t.csv"
    done
    while IFS=$'\t' read -r q ms rows; do
        duck_ms[$q]=$ms; duck_rows[$q]=$rows
    done < <("$DUCK_VENV/bin/python" "$BENCH/lib/ch_duckdb.py" "$data" "$QDIR" "$RUNS" "$THREADS")
    rm -rf "$data"
fi

{
    echo "# CH-benCHmark, W=$W: heap, anker and DuckDB $DUCK_VERSION on the same rows"
    echo
    echo "$(date -u +%Y-%m-%d), commit $(git -C "$ROOT" rev-parse --short HEAD); median of $RUNS runs per query; $THREADS thread(s) per query in each engine; anker.olap_engine = $ENGINE."
    echo
    echo "| query | heap ms | anker ms | DuckDB ms | heap/anker | anker/DuckDB | rows | anker rows = heap rows | anker ran in |"
    echo "|---|---:|---:|---:|---:|---:|---:|---|---|"
} > "$OUT/summary.md"
same=0; differ=0; geo_ha=(); geo_ad=(); geo_hd=()
for f in "$QDIR"/q*.sql; do
    q=$(basename "$f" .sql)
    h=$(pg_ms ch_heap "$f"); a=$(pg_ms ch_anker "$f")
    hr=$(pg_rows ch_heap "$f"); ar=$(pg_rows ch_anker "$f")
    n=0; [ -n "$hr" ] && n=$(wc -l <<<"$hr")
    if [ "$hr" = "$ar" ]; then eq=yes; same=$((same + 1)); else eq="**no**"; differ=$((differ + 1)); fi
    d=${duck_ms[$q]:--}
    ha=-; ad=-
    [[ $h =~ ^[0-9.]+$ && $a =~ ^[0-9.]+$ ]] && ha=$(awk -v h="$h" -v a="$a" 'BEGIN {printf "%.2f", h / a}')
    [[ $a =~ ^[0-9.]+$ && $d =~ ^[0-9.]+$ ]] && ad=$(awk -v a="$a" -v d="$d" 'BEGIN {printf "%.1f", a / d}')
    [[ $ha != - ]] && geo_ha+=("$(awk -v h="$h" -v a="$a" 'BEGIN {print h / a}')")
    if [[ $ha != - && $ad != - ]]; then geo_ad+=("$(awk -v a="$a" -v d="$d" 'BEGIN {print a / d}')"); geo_hd+=("$(awk -v h="$h" -v d="$d" 'BEGIN {print h / d}')"); fi
    dn=${duck_rows[$q]:--}
    [ "$dn" != - ] && [ "$dn" != "$n" ] && dn="$dn (DuckDB)"
    ran=PostgreSQL
    { echo "EXPLAIN"; cat "$f"; } | cluster_psql -X -At -d ch_anker 2>/dev/null | grep -q AnkerDuckDB && ran=DuckDB
    echo "| $q | $h | $a | $d | $ha | $ad | $n | $eq | $ran |" | tee -a "$OUT/summary.md"
done
geomean() { [ $# -gt 0 ] && printf '%s\n' "$@" | awk '{s += log($1); n++} END {printf "%.2f", exp(s / n)}' || printf -- -; }
{
    echo
    echo "Geometric means: heap/anker $(geomean "${geo_ha[@]}")× over the ${#geo_ha[@]} queries both finished; anker/DuckDB $(geomean "${geo_ad[@]}")× and heap/DuckDB $(geomean "${geo_hd[@]}")× over the ${#geo_ad[@]} all three finished."
    echo "Results: $same queries with anker's rows equal to heap's, $differ differing; $(grep -c '| DuckDB |$' "$OUT/summary.md") run by DuckDB inside anker."
} | tee -a "$OUT/summary.md"
echo "summary: $OUT/summary.md"
[ "$differ" = 0 ]
