#!/usr/bin/env bash
# Concurrent writers of one table, heap against anker: single-row INSERTs (a PL/pgSQL loop of
# 200 a transaction into a table shaped like TPC-C's `history`, 8 columns, no index) by one
# client, by two clients into one table, and by two clients into a table each, in rounds that
# alternate the engines. Every anker table has one change log whose last block's lock orders
# the table's writes (docs/durability.md), so two writers of one table take turns where two
# writers of two tables do not; heap's writers share only the last page. Prints tps per round
# and, per engine, how two clients scale over one.
#
#   bench/writers_ab.sh [--seconds SEC] [--rounds R] [--conf 'postgresql.conf line' ...]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
SECONDS_PER_RUN=8; ROUNDS=3; CONF=()
while [ $# -gt 0 ]; do
    case $1 in
        --seconds) SECONDS_PER_RUN=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --conf) CONF+=("$2"); shift 2 ;;
        *) sed -n '2,9p' "$0" >&2; exit 2 ;;
    esac
done
. "$BENCH/lib/cluster.sh"
export PGOPTIONS="-c client_min_messages=warning"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "shared_buffers = '2GB'" "synchronous_commit = off" \
    "max_wal_size = '16GB'" "checkpoint_timeout = '30min'" "jit = off" "autovacuum = off" "${CONF[@]}" >/dev/null
WORK=$(cluster_workdir)
printf 'SELECT insert_rows(:client_id, false);\n' >"$WORK/one_table.pgbench"
printf 'SELECT insert_rows(:client_id, true);\n' >"$WORK/own_table.pgbench"
chmod a+r "$WORK"/*.pgbench
COLUMNS="(h_c_id int NOT NULL, h_c_d_id int NOT NULL, h_c_w_id int NOT NULL, h_d_id int NOT NULL,
          h_w_id int NOT NULL, h_date timestamp NOT NULL, h_amount numeric(6,2) NOT NULL, h_data varchar(24) NOT NULL)"
for am in heap anker; do
    cluster_psql -q -c "CREATE DATABASE writers_$am"
    [ "$am" = anker ] && cluster_psql -q -d "writers_$am" -c "CREATE EXTENSION anker"
    cluster_psql -q -d "writers_$am" <<SQL
CREATE TABLE h0 $COLUMNS USING $am;
CREATE TABLE h1 $COLUMNS USING $am;
-- client c writes h0, or with own = true h(c % 2)
CREATE FUNCTION insert_rows(c int, own bool) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
    IF own AND c % 2 = 1 THEN
        FOR g IN 1..200 LOOP
            INSERT INTO h1 VALUES (g, 1, c, 1, c, now(), 10.00, 'abcdefghijklmnopqrstu');
        END LOOP;
    ELSE
        FOR g IN 1..200 LOOP
            INSERT INTO h0 VALUES (g, 1, c, 1, c, now(), 10.00, 'abcdefghijklmnopqrstu');
        END LOOP;
    END IF;
END \$\$;
SQL
done
run() { # $1 = engine, $2 = clients, $3 = script; prints tps
    (cd "$WORK" && cluster_run "$PG_BINDIR/pgbench" -n -M prepared -c "$2" -j "$2" -T "$SECONDS_PER_RUN" \
        -f "$WORK/$3.pgbench" "writers_$1" 2>&1) | grep -Eo 'tps = [0-9.]+' | head -n1 | awk '{print $3}'
}
declare -A sum
for r in $(seq 1 "$ROUNDS"); do
    order="heap anker"; [ $((r % 2)) = 0 ] && order="anker heap"
    for am in $order; do
        one=$(run "$am" 1 one_table); same=$(run "$am" 2 one_table); own=$(run "$am" 2 own_table)
        printf 'round %d %-5s  1 client %7.0f   2 clients, one table %7.0f   2 clients, a table each %7.0f  tps\n' \
            "$r" "$am" "$one" "$same" "$own"
        for k in one same own; do sum[$am-$k]=$(echo "${sum[$am-$k]:-0} + ${!k}" | bc -l); done
    done
done
for am in heap anker; do
    printf '%-5s two clients over one: one table %.2f, a table each %.2f\n' "$am" \
        "$(echo "${sum[$am-same]} / ${sum[$am-one]}" | bc -l)" "$(echo "${sum[$am-own]} / ${sum[$am-one]}" | bc -l)"
done
printf 'anker/heap: 1 client %.2f, 2 clients one table %.2f, a table each %.2f\n' \
    "$(echo "${sum[anker-one]} / ${sum[heap-one]}" | bc -l)" "$(echo "${sum[anker-same]} / ${sum[heap-same]}" | bc -l)" \
    "$(echo "${sum[anker-own]} / ${sum[heap-own]}" | bc -l)"
