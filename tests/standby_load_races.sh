#!/usr/bin/env bash
# Loads on a hot standby racing replay: the primary moves money between
# accounts (the total never changes) and writes an image of the table every
# few tenths of a second, each ending in a switch of its log; the standby,
# with a short max_standby_streaming_delay, is restarted again and again and
# three sessions read the table at once (one loads it, two wait). Replay
# cancels loads that hold it back (a switch, a lock, a snapshot conflict);
# a reader then either gets heap's conflict error or the right total, never
# another, and the standby ends equal to the primary.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
ROWS=500000
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '1GB'" "lc_messages = 'C'" \
    "wal_level = replica" "max_wal_senders = 4" "hot_standby = on" "autovacuum = off"
q() { cluster_psql -Atc "$1"; }
cluster_psql -q -c "CREATE EXTENSION anker" \
    -c "CREATE TABLE acct (id int PRIMARY KEY, balance bigint, note text) USING anker" \
    -c "INSERT INTO acct SELECT g, 1000, 'account ' || g FROM generate_series(1, $ROWS) g"
WORK=$CLUSTER_DIR/work
mkdir -p "$WORK"
cp "$ROOT/tests/transfer.sql" "$WORK/"
chown -R "$CLUSTER_OWNER" "$WORK"
SB=$CLUSTER_DIR/standby
SB_PORT=$((CLUSTER_PORT + 1))
cluster_standby_start "$SB" "$SB_PORT" "max_standby_streaming_delay = 0"
cluster_wait_ready "$SB_PORT"
cluster_pgbench -n -c 2 -T 45 -f "$WORK/transfer.sql" postgres >"$WORK/pgbench.out" 2>&1 &
writer=$!
(while kill -0 "$writer" 2>/dev/null; do q "SELECT anker.compact('acct')" >/dev/null 2>&1 || true; sleep 0.3; done) &
compactor=$!
right=0 conflicts=0
for _ in $(seq 1 8); do
    _cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$SB" -l "$SB.log" -m fast -w -t 120 restart >/dev/null
    cluster_wait_ready "$SB_PORT"
    readers=()
    for r in 1 2 3; do
        cluster_psql_port "$SB_PORT" -Atc "SELECT sum(balance) || ' ' || count(*) FROM acct" >"$WORK/r$r.out" 2>&1 &
        readers+=($!)
    done
    wait "${readers[@]}" || true
    for r in 1 2 3; do
        got=$(cat "$WORK/r$r.out")
        if [ "$got" = "$((ROWS * 1000)) $ROWS" ]; then
            right=$((right + 1))
        elif grep -q "canceling statement due to conflict with recovery" <<< "$got"; then
            conflicts=$((conflicts + 1))
        else
            fail "a standby reader got: $got"
        fi
    done
done
wait "$writer" || fail "the primary's workload failed: $(tail -3 "$WORK/pgbench.out")"
wait "$compactor" || true
cluster_catch_up "$SB_PORT" || fail "the standby did not catch up"
[ "$(q "SELECT md5(string_agg(acct::text, ',' ORDER BY id)) FROM acct")" = \
  "$(cluster_psql_port "$SB_PORT" -Atc "SELECT md5(string_agg(acct::text, ',' ORDER BY id)) FROM acct")" ] \
    || fail "the standby differs from the primary"
if grep -E "PANIC|terminated by signal" "$CLUSTER_LOG" "$SB.log"; then fail "a crash"; fi
echo "ok: 24 standby readers racing images and switches: $right read the right total, $conflicts were cancelled by replay; the standby equals the primary"
echo "standby_load_races: all checks passed"
