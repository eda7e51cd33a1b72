#!/usr/bin/env bash
# Loading an anker table from its log (its first use after a start) takes
# interrupts, and a load that fails leaves nothing behind: the next reader
# loads the table again.
#   1. a statement timeout and a cancel stop a load; the table is not left
#      half in memory, and a session waiting for the load takes it over;
#   2. a terminated loader and a fast shutdown during a load;
#   3. memory running out during a load is not final: once memory is freed,
#      the next read loads the table, without a restart;
#   4. on a hot standby, replay cancels a load that conflicts with it (a lock,
#      a switch to a new image) instead of waiting for the load to finish.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
# autovacuum off: it would load tables by itself
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '160MB'" "lc_messages = 'C'" \
    "autovacuum = off" "wal_level = replica" "max_wal_senders = 4" "hot_standby = on" \
    "max_standby_streaming_delay = '100ms'" "log_startup_progress_interval = 0"
q() { cluster_psql -Atc "$1"; }
qp() { cluster_psql_port "$1" -Atc "$2"; }
WORK=$CLUSTER_DIR

cluster_psql >/dev/null <<'SQL'
CREATE EXTENSION anker;
CREATE EXTENSION amcheck;
CREATE TABLE big (id int PRIMARY KEY, v text) USING anker;
INSERT INTO big SELECT g, repeat('x', 50) || g FROM generate_series(1, 1000000) g;
SQL
want=$(q "SELECT count(*) || ' ' || sum(length(v)) FROM big")
in_memory() { qp "$1" "SELECT count(*) FROM anker.tables WHERE relation = '${2:-big}'::regclass"; }
used_mb() { qp "$1" "SELECT used_bytes >> 20 FROM anker.memory"; }
loaded_mb=$(used_mb "$CLUSTER_PORT")
published() { # port, table: wait until a backend has begun to load the table
    local file
    file=$(q "SELECT relfilenode FROM pg_class WHERE relname = '$2'")
    for _ in $(seq 1 1000); do
        [ "$(qp "$1" "SELECT count(*) FROM anker.table_storage() WHERE relfilenode = $file")" = 1 ] && return 0
    done
    fail "no backend began to load $2"
}
restart() { cluster_pg_ctl restart -m fast; cluster_wait_ready "$CLUSTER_PORT"; }

# 1. a statement timeout cancels the load
restart
base_mb=$(used_mb "$CLUSTER_PORT")
t0=$(date +%s%N)
err=$(cluster_psql -Atc "SET statement_timeout = '50ms'" -c "SELECT count(*) FROM big" 2>&1 || true)
ms=$((($(date +%s%N) - t0) / 1000000))
grep -q "canceling statement due to statement timeout" <<< "$err" || fail "the timeout did not cancel the load: $err"
[ "$(in_memory "$CLUSTER_PORT")" = 0 ] || fail "a cancelled load left the table in memory"
[ "$(used_mb "$CLUSTER_PORT")" -le $((base_mb + 1)) ] || fail "a cancelled load kept its memory ($(used_mb "$CLUSTER_PORT") MB, ${base_mb} MB before)"
t0=$(date +%s%N)
[ "$(q "SELECT count(*) || ' ' || sum(length(v)) FROM big")" = "$want" ] || fail "the load after a cancelled one lost rows"
full_ms=$((($(date +%s%N) - t0) / 1000000))
q "SELECT bt_index_check('big_pkey', true)" >/dev/null
echo "ok: a 50 ms statement timeout stopped the load after $ms ms (a whole load: $full_ms ms, ${loaded_mb} MB); nothing was left in memory; the next read loaded the table whole"

# ... and a cancel from another session, with a second session waiting for the load;
# meanwhile anker.loads shows the load, and pg_stat_activity the waiter's wait
restart
cluster_psql -Atc "SELECT count(*) FROM big /* cancel me */" >"$WORK/cancel.out" 2>&1 &
loader=$!
published "$CLUSTER_PORT" big
cluster_psql -Atc "SELECT count(*) || ' ' || sum(length(v)) FROM big /* waiter */" >"$WORK/waiter2.out" 2>&1 &
waiter=$!
loader_pid=$(q "SELECT pid FROM pg_stat_activity WHERE query LIKE '%cancel me%' AND pid <> pg_backend_pid()")
shown=$(q "SELECT pid || ' ' || (relation = 'big'::regclass) || ' ' || datname || ' ' || (bytes_total > 0 AND bytes_read <= bytes_total)
             || ' ' || (rows_loaded <= 1000000) || ' ' || (elapsed >= '0'::interval) FROM anker.loads")
[ "$shown" = "$loader_pid true $(q "SELECT current_database()") true true true" ] || fail "anker.loads showed '$shown' for the load of backend $loader_pid"
for _ in $(seq 1 100); do
    waiting=$(q "SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity WHERE query LIKE '%/* waiter */%' AND pid <> pg_backend_pid()")
    [ "$waiting" = Extension/Extension ] && break
done
[ "$waiting" = Extension/Extension ] || fail "a session waiting for a load showed the wait event '$waiting'"
q "SELECT pg_cancel_backend($loader_pid)" >/dev/null
wait "$loader" && fail "the load finished before the cancel arrived"
grep -q "canceling statement due to user request" "$WORK/cancel.out" || fail "the cancelled load failed otherwise: $(cat "$WORK/cancel.out")"
wait "$waiter" || fail "the session waiting for a cancelled load failed: $(cat "$WORK/waiter2.out")"
[ "$(cat "$WORK/waiter2.out")" = "$want" ] || fail "the session waiting for a cancelled load read $(cat "$WORK/waiter2.out")"
[ "$(q "SELECT count(*) FROM anker.loads")" = 0 ] || fail "anker.loads shows a load after all loads ended"
echo "ok: pg_cancel_backend stops a load; anker.loads showed it (pid, relation, bytes read of the file's), and the waiting session the wait event Extension"

# 2. a loader terminated with pg_terminate_backend: the next reader neither waits for
# it forever nor finds a half-loaded table
restart
cluster_psql -Atc "SELECT count(*) FROM big /* terminate me */" >"$WORK/term.out" 2>&1 &
loader=$!
published "$CLUSTER_PORT" big
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%terminate me%' AND pid <> pg_backend_pid()" >/dev/null
wait "$loader" && fail "the load finished before the backend was terminated"
grep -q "terminating connection due to administrator command" "$WORK/term.out" \
    || fail "the terminated loader failed otherwise: $(cat "$WORK/term.out")"
[ "$(in_memory "$CLUSTER_PORT")" = 0 ] || fail "a terminated load left the table in memory"
# (a reader waiting for a load takes interrupts: the timeout ends a wait that would not end)
got=$(cluster_psql -Atc "SET statement_timeout = '60s'" -c "SELECT count(*) || ' ' || sum(length(v)) FROM big") \
    || fail "the read after a terminated load hung or failed"
[ "$got" = "$want" ] || fail "the load after a terminated one read $got"
q "SELECT bt_index_check('big_pkey', true)" >/dev/null
echo "ok: a terminated loader leaves the table to the next reader"

# ... and a fast shutdown during a load
restart
cluster_psql -Atc "SELECT count(*) FROM big" >/dev/null 2>&1 &
loader=$!
published "$CLUSTER_PORT" big
cluster_pg_ctl stop -m fast
wait "$loader" || true
cluster_pg_ctl start
cluster_wait_ready "$CLUSTER_PORT"
[ "$(q "SELECT count(*) || ' ' || sum(length(v)) FROM big")" = "$want" ] || fail "the table lost rows after a shutdown during its load"
grep -q "terminated by signal" "$CLUSTER_LOG" && fail "a backend crashed: $(grep "terminated by signal" "$CLUSTER_LOG" | head -1)"
echo "ok: a fast shutdown during a load"

# 3. memory runs out: loading a second large table fails while the first is in
# memory, fails again when retried, and succeeds once the first is dropped
# (anker.memory_limit holds one of them; big is not in memory after the restart)
restart
cluster_psql >/dev/null <<'SQL'
CREATE TABLE big2 (id int PRIMARY KEY, v text) USING anker;
INSERT INTO big2 SELECT g, repeat('x', 50) || g FROM generate_series(1, 1000000) g;
SQL
restart
q "SELECT count(*) FROM big" >/dev/null
for try in 1 2; do
    err=$(cluster_psql -Atc "SELECT count(*) FROM big2" 2>&1 || true)
    grep -q "anker.memory_limit" <<< "$err" || fail "loading big2 with big in memory (try $try): $err"
done
q "DROP TABLE big"
[ "$(q "SELECT count(*) || ' ' || sum(length(v)) FROM big2")" = "$want" ] || fail "big2 did not load once memory was freed"
q "SELECT bt_index_check('big2_pkey', true)" >/dev/null
echo "ok: out of memory during a load, twice, then the load succeeds once memory is freed, without a restart"

# 4. a hot standby: replay cancels a load that holds a lock it needs. The table: small,
# with a long log (two million changes), so that it loads far longer than the delay
# (and, below, than its image takes to replay)
q "CREATE TABLE switched (id int PRIMARY KEY, v int) USING anker;
   INSERT INTO switched SELECT g, 0 FROM generate_series(1, 20000) g" >/dev/null
for _ in $(seq 1 10); do
    cluster_psql -c "$(for _ in $(seq 1 10); do printf 'UPDATE switched SET v = v + 1; '; done)" >/dev/null
done
SB=$CLUSTER_DIR/standby
SB_PORT=$((CLUSTER_PORT + 1))
cluster_standby_start "$SB" "$SB_PORT"
cluster_wait_ready "$SB_PORT"
cluster_catch_up "$SB_PORT"
_cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$SB" -l "$SB.log" -m fast -w -t 120 restart >/dev/null
cluster_wait_ready "$SB_PORT"
cluster_psql_port "$SB_PORT" -Atc "SELECT count(*) FROM switched" >"$WORK/sb.out" 2>&1 &
loader=$!
published "$SB_PORT" switched
q "ALTER TABLE switched ADD COLUMN w int DEFAULT 7" >/dev/null
wait "$loader" && fail "the standby's load finished before the conflict"
grep -q "canceling statement due to conflict with recovery" "$WORK/sb.out" || fail "the standby's load failed otherwise: $(cat "$WORK/sb.out")"
[ "$(in_memory "$SB_PORT" switched)" = 0 ] || fail "replay waited for the standby's load to finish"
cluster_catch_up "$SB_PORT" || fail "the standby did not catch up"
[ "$(qp "$SB_PORT" "SELECT count(*) || ' ' || sum(v) || ' ' || sum(w) FROM switched")" = "20000 2000000 140000" ] \
    || fail "the standby's table differs after the conflict"
echo "ok: on a standby, replay cancelled a load that held a lock it needed"
# ... and replay that reaches a switch to a new image of a table a backend is loading
# cancels the load once max_standby_streaming_delay has passed, instead of waiting
# for it (the switch replaces the log the loader reads). Replay is paused while the
# primary writes the image, so that it meets the switch while the load runs: a
# small table with a long log (two million changes) loads far longer than its
# image takes to replay.
_cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$SB" -l "$SB.log" -m fast -w -t 120 restart >/dev/null
cluster_wait_ready "$SB_PORT"
cluster_catch_up "$SB_PORT"
qp "$SB_PORT" "SELECT pg_wal_replay_pause()" >/dev/null
until [ "$(qp "$SB_PORT" "SELECT pg_get_wal_replay_pause_state()")" = paused ]; do sleep 0.1; done
q "SELECT anker.compact('switched')" >/dev/null
lsn=$(q "SELECT pg_current_wal_lsn()")
until [ "$(qp "$SB_PORT" "SELECT pg_last_wal_receive_lsn() >= '$lsn'")" = t ]; do sleep 0.1; done
conflicts() { qp "$SB_PORT" "SELECT confl_snapshot FROM pg_stat_database_conflicts WHERE datname = current_database()"; }
switches() { qp "$SB_PORT" "SELECT value FROM anker.counters() WHERE name = 'log_switches_after_standby_loads'"; }
before=$(conflicts)
switches_before=$(switches)
cluster_psql_port "$SB_PORT" -Atc "SELECT count(*) FROM switched" >"$WORK/sb2.out" 2>&1 &
loader=$!
published "$SB_PORT" switched
qp "$SB_PORT" "SELECT pg_wal_replay_resume()" >/dev/null
wait "$loader" && fail "the standby's load finished before replay reached the switch"
grep -q "canceling statement due to conflict with recovery" "$WORK/sb2.out" || fail "the standby's load failed otherwise: $(cat "$WORK/sb2.out")"
[ "$(conflicts)" -gt "$before" ] || fail "the cancelled load was not counted as a snapshot conflict"
[ "$(switches)" -gt "$switches_before" ] || fail "the load was cancelled by something other than the switch"
cluster_catch_up "$SB_PORT" || fail "the standby did not catch up"
[ "$(qp "$SB_PORT" "SELECT count(*) || ' ' || sum(v) || ' ' || sum(w) FROM switched")" = "20000 2000000 140000" ] \
    || fail "the standby's table differs after the switch"
echo "ok: on a standby, replay reaching a switch cancelled the load of the table after max_standby_streaming_delay"
grep -q "terminated by signal\|PANIC" "$CLUSTER_LOG" && fail "a crash: $(grep "terminated by signal\|PANIC" "$CLUSTER_LOG" | head -1)"
echo "load_interrupts: all checks passed"
