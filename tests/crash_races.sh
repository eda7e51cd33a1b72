#!/usr/bin/env bash
# Crashes in the middle of concurrent work: two clients make the same random
# READ COMMITTED changes to an anker table and its heap twin (in-place and
# new-row-id updates, upserts, deletes, long values, savepoints and whole
# transactions rolled back, deadlocks retried, prepared transactions
# committed and rolled back), a third VACUUMs the anker twin and writes
# images, a fourth takes checkpoints, and autovacuum runs every second. Each
# cycle ends in a crash of one kind, chosen in turn: kill -9 of the
# postmaster and its children, kill -9 of one backend (the postmaster resets
# shared memory and recovers), an immediate shutdown. After recovery the
# twins must be identical (a transaction changed both or neither), every
# index must agree with its table, and a scan through each index must find
# exactly the rows a sequential scan finds. The last cycle ends in a clean
# restart. A hot standby replays all of it, its primary's crashes included,
# and must then hold what the primary holds.
# CRASH_RACES_CYCLES (default 4) and CRASH_RACES_SECONDS (the longest run of
# a cycle, default 6) make it longer.
# The cluster has data checksums: every page read back after a crash is verified.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
SB=
trap cluster_cleanup EXIT
CLUSTER_INITDB_ARGS=--data-checksums cluster_start "shared_preload_libraries = 'anker'" "lc_messages = 'C'" "restart_after_crash = on" \
    "max_prepared_transactions = 8" "autovacuum_naptime = 1" "autovacuum_vacuum_threshold = 20" \
    "autovacuum_vacuum_scale_factor = 0.01" "checkpoint_timeout = 30s" "wal_keep_size = '4GB'" \
    "wal_compression = lz4" >/dev/null
q() { cluster_psql -Atc "$1"; }
fail() { echo "FAIL: $*"; cluster_log_tail 30; for f in "${W:-/nonexistent}"/*.out; do [ -f "$f" ] && { echo "== $f"; tail -n 5 "$f"; }; done; [ -n "$SB" ] && tail -n 20 "$SB.log" || true; exit 1; }
wait_ready() { cluster_wait_ready || fail "the server did not come back after the crash"; }
CYCLES=${CRASH_RACES_CYCLES:-4}
LONGEST=${CRASH_RACES_SECONDS:-6}
q "CREATE EXTENSION anker; CREATE EXTENSION amcheck" >/dev/null
for am in anker heap; do
    t=t_$am
    q "CREATE TABLE $t (id int PRIMARY KEY, k int, v int, s text) USING $am;
       CREATE INDEX ${t}_k ON $t (k);
       INSERT INTO $t SELECT g, g % 100, 0, 's' FROM generate_series(1, 4000) g" >/dev/null
done
# the hot standby, on the same socket directory
SB=$CLUSTER_DIR/standby
SB_PORT=$((CLUSTER_PORT + 1))
cluster_standby_start "$SB" "$SB_PORT"
# loaded on the standby now, so that redo applies the run to it in memory
cluster_catch_up "$SB_PORT" && cluster_psql_port "$SB_PORT" -Atc "SELECT count(*) FROM t_anker" >/dev/null ||
    fail "the standby cannot read t_anker"
W=$(cluster_workdir)
# The same change to both twins in each transaction; pgbench retries
# deadlocks (the twins are locked in the same order by every client).
cat >"$W/twins.sql" <<'SQL'
\set id random(1, 4000)
\set id2 random(1, 4000)
\set r random(1, 20)
\set len random(1, 3000)
BEGIN;
UPDATE t_anker SET v = v + 1, s = left(s || 'x', 40) WHERE id = :id;
UPDATE t_heap SET v = v + 1, s = left(s || 'x', 40) WHERE id = :id;
SAVEPOINT sp;
UPDATE t_anker SET v = v + 100 WHERE id = :id2;
UPDATE t_heap SET v = v + 100 WHERE id = :id2;
\if :r <= 6
ROLLBACK TO sp;
\endif
UPDATE t_anker SET k = k + 1 WHERE id = :id2;
UPDATE t_heap SET k = k + 1 WHERE id = :id2;
INSERT INTO t_anker VALUES (:id2 + 4000, 0, 0, repeat('n', :len)) ON CONFLICT (id) DO UPDATE SET v = t_anker.v + 1;
INSERT INTO t_heap VALUES (:id2 + 4000, 0, 0, repeat('n', :len)) ON CONFLICT (id) DO UPDATE SET v = t_heap.v + 1;
\if :r = 20
DELETE FROM t_anker WHERE id = :id;
DELETE FROM t_heap WHERE id = :id;
\endif
\if :r <= 3
ROLLBACK;
\elif :r = 4
PREPARE TRANSACTION 'p:c';
COMMIT PREPARED 'p:c';
\elif :r = 5
PREPARE TRANSACTION 'p:c';
ROLLBACK PREPARED 'p:c';
\else
COMMIT;
\endif
SQL
printf 'VACUUM t_anker;\nSELECT count(*) FROM anker.compact('"'"'t_anker'"'"');\nSELECT pg_sleep(0.3);\n' >"$W/vacuum.sql"
printf 'SELECT pg_sleep(1.5);\nCHECKPOINT;\n' >"$W/checkpoint.sql"
chmod a+r "$W"/*.sql
check() { # when
    local diff n_seq n_idx
    # prepared transactions a crash left behind are decided first: they hold
    # row locks, and commit or roll back both twins alike
    for g in $(q "SELECT gid FROM pg_prepared_xacts"); do q "ROLLBACK PREPARED '$g'" >/dev/null; done
    diff=$(q "SELECT count(*) FROM ((TABLE t_anker EXCEPT ALL TABLE t_heap) UNION ALL (TABLE t_heap EXCEPT ALL TABLE t_anker)) x")
    [ "$diff" = 0 ] || fail "$1: the twins differ in $diff rows:
$(cluster_psql -c "TABLE t_anker EXCEPT ALL TABLE t_heap" -c "TABLE t_heap EXCEPT ALL TABLE t_anker" | head -n 20)"
    q "SELECT bt_index_check('t_anker_pkey', true), bt_index_check('t_anker_k', true)" >/dev/null ||
        fail "$1: an index of t_anker disagrees with it"
    # every row through each index, once: an entry left pointing at a row id
    # that VACUUM gave up and an insert took again would return a row twice
    # or under a key it does not have (amcheck does not look for those)
    local rows='md5(string_agg(t::text, '"','"' ORDER BY t::text)) || count(*)'
    n_seq=$(q "SELECT $rows FROM t_anker t")
    for col in id k; do
        n_idx=$(cluster_psql -At -c "SET enable_seqscan = off" -c "SET anker.enable_scan_node = off" \
            -c "SET enable_bitmapscan = off" -c "SELECT $rows FROM t_anker t WHERE $col > -2147483648" | tail -1)
        [ "$n_seq" = "$n_idx" ] || fail "$1: an index scan on $col finds other rows than a sequential scan"
    done
}
crash() { # kind
    local victim seen
    case $1 in
        postmaster)
            cluster_kill_postmaster
            cluster_pg_ctl start ;;
        backend) # the postmaster resets shared memory and recovers by itself
            for _ in $(seq 1 50); do
                victim=$(q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'
                            AND pid <> pg_backend_pid() AND query ~ 't_(anker|heap)|VACUUM|compact' LIMIT 1")
                [ -n "$victim" ] && break
                sleep 0.1
            done
            [ -n "$victim" ] || fail "no client backend to kill"
            seen=$(grep -c "terminated by signal 9" "$CLUSTER_LOG" || true)
            kill -9 "$victim"
            while kill -0 "$victim" 2>/dev/null; do sleep 0.1; done
            sleep 1
            [ "$(grep -c "terminated by signal 9" "$CLUSTER_LOG" || true)" -gt "$seen" ] ||
                fail "the postmaster did not notice the crash" ;;
        immediate)
            cluster_pg_ctl stop -m immediate
            cluster_pg_ctl start ;;
        clean)
            cluster_pg_ctl restart ;;
    esac
}
kinds=(postmaster backend immediate)
for cycle in $(seq 1 "$CYCLES"); do
    before=$(q "SELECT coalesce(max(xmin::text::bigint), 0) FROM t_heap")
    pids=()
    for c in 1 2; do
        cluster_pgbench -n -f "$W/twins.sql" -D c="$c" --max-tries=1000 -c 1 -T 60 postgres >"$W/twins$c.out" 2>&1 &
        pids+=($!)
    done
    for f in vacuum checkpoint; do
        cluster_pgbench -n -f "$W/$f.sql" -c 1 -T 60 postgres >"$W/$f.out" 2>&1 &
        pids+=($!)
    done
    sleep $((2 + RANDOM % (LONGEST > 2 ? LONGEST - 1 : 1)))
    kind=clean
    [ "$cycle" -lt "$CYCLES" ] && kind=${kinds[$(((cycle - 1) % 3))]}
    if [ "$kind" = clean ]; then
        for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    fi
    crash "$kind"
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    wait_ready
    [ "$(q "SELECT coalesce(max(xmin::text::bigint), 0) FROM t_heap")" -gt "$before" ] || fail "cycle $cycle: no transaction committed before the crash"
    check "cycle $cycle, after a crash ($kind)"
    echo "ok: cycle $cycle: after a crash ($kind) the twins are identical ($(q "SELECT count(*) FROM t_anker") rows), indexes agree"
done
cluster_catch_up "$SB_PORT" || fail "the standby did not catch up"
sum() { echo "SELECT md5(string_agg(t::text, ',' ORDER BY id)) FROM $1 t"; }
primary=$(q "$(sum t_anker)")
[ "$(cluster_psql_port "$SB_PORT" -Atc "$(sum t_anker)")" = "$primary" ] &&
    [ "$(cluster_psql_port "$SB_PORT" -Atc "$(sum t_heap)")" = "$primary" ] ||
    fail "the standby's twins differ from the primary's"
cluster_psql_port "$SB_PORT" -Atc "SELECT bt_index_check('t_anker_pkey', true), bt_index_check('t_anker_k', true)" >/dev/null ||
    fail "an index of t_anker on the standby disagrees with it"
echo "ok: the standby, which replayed the primary's crashes, holds what the primary holds"
echo "crash races: all checks passed"
