#!/usr/bin/env bash
# The 22 CH-benCHmark queries (bench/olap/ch/) return on anker exactly the rows they return on
# heap: W=1 loaded into both with one load timestamp (identical rows), each query's rows
# compared sorted (ties in ORDER BY may come in any order), with anker.olap_engine = postgres
# and = duckdb (the queries the embedded DuckDB takes, however cheap: anker.olap_min_cost = 0). bench/ch.sh does the work and exits
# non-zero on a difference; here it runs each query once, without standalone DuckDB.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for engine in postgres duckdb; do
    "$ROOT/bench/ch.sh" --warehouses 1 --runs 1 --timeout 120 --no-duckdb --olap-engine $engine --olap-min-cost 0 --out "$out" | grep -E '^\| q|^Results' || {
        echo "FAIL: anker (anker.olap_engine = $engine) and heap disagree on a CH-benCHmark query (or the run failed)"
        exit 1
    }
    echo "ok: the 22 CH-benCHmark queries return the same rows on anker (anker.olap_engine = $engine) as on heap"
done
