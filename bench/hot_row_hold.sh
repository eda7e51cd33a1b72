#!/usr/bin/env bash
# A hot row under a long transaction, heap and anker in one cluster: C clients
# update one row (pgbench, per-second progress) for DURATION seconds, and from
# second AT a REPEATABLE READ transaction holds its snapshot, idle, for HOLD
# seconds. No version of the row written meanwhile can be collected until it
# ends (both engines keep what that snapshot may read), so what each engine
# pays for versions it cannot collect yet shows as the updates' rate falls.
# Prints per engine the rate before, during and after the hold, the rate
# second by second, and for anker the undo records pruned during the hold
# and in the second after it (`anker.counters()`: the chain is cut once the
# horizon moves) and the table's memory at those moments.
#
#   bench/hot_row_hold.sh [--clients C] [--duration SEC] [--at SEC] [--hold SEC]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLIENTS=1; DURATION=40; AT=10; HOLD=15
while [ $# -gt 0 ]; do
    case $1 in
        --clients) CLIENTS=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --at) AT=$2; shift 2 ;;
        --hold) HOLD=$2; shift 2 ;;
        *) sed -n '2,13p' "$0" >&2; exit 2 ;;
    esac
done
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "synchronous_commit = off" "autovacuum = off" "jit = off" >/dev/null
WORK=$(cluster_workdir)
q() { cluster_psql -At -c "$1"; }
PRUNED="(SELECT value FROM anker.counters() WHERE name = 'undo_records_pruned')"
TABLE_KB="(SELECT bytes / 1024 FROM anker.table_storage() WHERE relfilenode = pg_relation_filenode('hot_anker'))"
q "CREATE EXTENSION anker" >/dev/null
echo "hot row: $CLIENTS client(s), $DURATION s; an idle REPEATABLE READ transaction from second $AT for $HOLD s"
for am in heap anker; do
    q "CREATE TABLE hot_$am (id int PRIMARY KEY, n bigint) USING $am; INSERT INTO hot_$am VALUES (1, 0)" >/dev/null
done
for am in heap anker; do
    echo "UPDATE hot_$am SET n = n + 1 WHERE id = 1;" > "$WORK/update_$am.sql"
    chmod 644 "$WORK/update_$am.sql"
    (cd "$WORK" && cluster_pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$DURATION" -P 1 \
        -f "$WORK/update_$am.sql" 2>"$WORK/progress.$am" >/dev/null) &
    bench=$!
    sleep "$AT"
    read -r p0 m0 < <(cluster_psql -At -F ' ' -c "SELECT $PRUNED, $TABLE_KB")
    # (the counters and the memory read again just before the hold ends)
    read -r p1 m1 < <(cluster_psql -q -At -F ' ' <<SQL | tail -n 1
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM hot_$am;
SELECT pg_sleep($HOLD);
SELECT $PRUNED, $TABLE_KB;
COMMIT;
SQL
)
    sleep 1
    read -r p2 m2 < <(cluster_psql -At -F ' ' -c "SELECT $PRUNED, $TABLE_KB")
    wait "$bench"
    awk -v at="$AT" -v hold="$HOLD" -v am="$am" '
        /^progress:/ { t = $2 + 0; tps = $4 + 0
            if (t <= at) { b += tps; nb++ } else if (t <= at + hold) { d += tps; nd++ } else { a += tps; na++ } }
        END { printf "%s: updates a second before %.0f, during the hold %.0f (%.2f of before), after %.0f\n",
                am, b / nb, d / nd, (d / nd) / (b / nb), a / na }' "$WORK/progress.$am"
    echo "$am: second by second: $(awk '/^progress:/ { printf "%.0f ", $4 }' "$WORK/progress.$am")"
    [ "$am" = anker ] && echo "anker: undo records pruned during the hold $((p1 - p0)), in the second after it $((p2 - p1));" \
        "the table's memory $m0 kB when the hold began, $m1 kB as it ended, $m2 kB a second later"
done
