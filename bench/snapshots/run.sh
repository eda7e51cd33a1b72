#!/usr/bin/env bash
# All snapshot measurements of one run: (a) creation time, (b) first write
# to a shared page (engine micro-benchmark), (c) sum() latency under an
# update stream per provider (PostgreSQL). CSV, PNG plots and a Markdown
# report go to --out (default bench/snapshots/results).
#
#   bench/snapshots/run.sh [--mb 200] [--columns 1,25,50] [--rows 10000000] [--runs 7] [--out DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MB=200; COLUMNS=1,25,50; ROWS=10000000; RUNS=7; OUT=$ROOT/bench/snapshots/results
while [ $# -gt 0 ]; do
    case $1 in
        --mb) MB=$2; shift 2 ;;
        --columns) COLUMNS=$2; shift 2 ;;
        --rows) ROWS=$2; shift 2 ;;
        --runs) RUNS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        *) echo "usage: $0 [--mb MB] [--columns LIST] [--rows N] [--runs R] [--out DIR]" >&2; exit 2 ;;
    esac
done
mkdir -p "$OUT"
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
{
    echo "# Snapshot measurements"
    echo
    echo "\`bench/snapshots/run.sh --mb $MB --columns $COLUMNS --rows $ROWS --runs $RUNS\`, $(date -u +%FT%TZ), $(nproc) cores"
    echo
    (cd "$ROOT/extension/engine" && CARGO_TARGET_DIR="$ROOT/target/engine-tests" \
        cargo run -q --release --example snapshot_bench -- --mb "$MB" --columns "$COLUMNS" --csv "$OUT")
    echo
    echo "## (c) SELECT sum() over $ROWS rows under a concurrent update stream"
    echo
    "$ROOT/bench/snapshots/sum_under_updates.sh" --rows "$ROWS" --runs "$RUNS" --out "$OUT" | sed -n '/^| provider/,$p'
} | tee "$OUT/report.md"
# Debian's python3-matplotlib (scripts/setup.sh installs it)
/usr/bin/python3 "$ROOT/bench/snapshots/plot.py" "$OUT"
