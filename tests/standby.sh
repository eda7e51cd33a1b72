#!/usr/bin/env bash
# Replicas and backups of anker tables, with heap twins as the oracle:
# a hot standby built with pg_basebackup -R -X stream replays a pgbench run
# with compactions (a table its backends loaded before the run gets the
# changes through redo; one first read afterwards is loaded from its
# replayed fork, image and log) and answers
# like the primary, through index scans, snapshot scans and AnkerAgg;
# restarted up to eight times, it loads a table while redo appends large rows to
# it, compacts it and grows its file, and ends with the primary's rows; it is
# promoted and takes writes. Then point-in-time recovery of a base backup
# plus archived WAL to a recovery_target_xid restores the tables as they
# were at that transaction, and pg_rewind takes the old primary, which went
# on writing, back to that point as a standby of the recovered cluster.
# Also: remote_apply reads its writes on the standby; a standby query keeps
# the rows VACUUM and images remove on the primary (replay waits, or
# cancels it, as for heap); dropped tables leave
# the standby's memory; a standby's load streams the log, and redo passes a
# loading table's changes without waiting (a switch waits for the load);
# transactions whose commit or abort removes files they changed replay.
# The primary has data checksums, and so every copy of it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
STANDBY_PID=
cleanup() {
    for d in "${EXTRA_DATA[@]:-}"; do
        [ -n "$d" ] && [ -f "$d/postmaster.pid" ] && runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D "$d" -m immediate -w stop >/dev/null 2>&1 || true
    done
    cluster_cleanup
}
EXTRA_DATA=()
trap cleanup EXIT
CLUSTER_INITDB_ARGS=--data-checksums cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '1GB'" "lc_messages = 'C'" \
    "wal_level = replica" "archive_mode = on" "anker.snapshot_min_rows = 0" "wal_log_hints = on" >/dev/null
mkdir -p "$CLUSTER_DIR/archive" && chown postgres "$CLUSTER_DIR/archive"
cluster_psql -c "ALTER SYSTEM SET archive_command = 'cp %p $CLUSTER_DIR/archive/%f'" -c "SELECT pg_reload_conf()" >/dev/null

q() { cluster_psql -Atc "$1"; }
fail() { echo "FAIL: $*"; cluster_log_tail 20; for d in "${EXTRA_DATA[@]:-}"; do [ -f "$d/../$(basename "$d").log" ] && tail -n 20 "$d/../$(basename "$d").log"; done; exit 1; }
pg_ctl_as() { runuser -u postgres -- "$PG_BINDIR/pg_ctl" "$@" >/dev/null; }
# psql on another cluster of this directory (same socket directory, own port)
qp() { cluster_psql_port "$1" -Atc "$2"; }
catch_up() { cluster_catch_up "$SB_PORT" || fail "the standby did not catch up"; }
wait_ready() { cluster_wait_ready "$1" || fail "server on port $1 did not come up"; }

cluster_psql -c "CREATE EXTENSION anker" -c "CREATE EXTENSION amcheck" >/dev/null
for am in anker heap; do
    cluster_psql >/dev/null <<SQL
CREATE TABLE t_$am (id int PRIMARY KEY, grp int, v bigint, note text) USING $am;
CREATE INDEX t_${am}_grp ON t_$am (grp);
INSERT INTO t_$am SELECT g, g % 20, g, 'n' || g FROM generate_series(1, 20000) g;
CREATE TABLE later_$am (a int, b text) USING $am;
INSERT INTO later_$am SELECT g, 'b' || g FROM generate_series(1, 5000) g;
SQL
done

WORK=$(cluster_workdir)
cat > "$WORK/twins.sql" <<'SQL'
\set id random(1, 20000)
\set id2 random(1, 40000)
\set d random(1, 10)
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE t_anker SET v = v + :d, note = note || '.' WHERE id = :id;
UPDATE t_heap SET v = v + :d, note = note || '.' WHERE id = :id;
UPDATE t_anker SET grp = grp + 1 WHERE id = :id2;
UPDATE t_heap SET grp = grp + 1 WHERE id = :id2;
INSERT INTO t_anker VALUES (:id2, 0, :d, 'new') ON CONFLICT (id) DO UPDATE SET v = t_anker.v - 1;
INSERT INTO t_heap VALUES (:id2, 0, :d, 'new') ON CONFLICT (id) DO UPDATE SET v = t_heap.v - 1;
UPDATE later_anker SET b = b || 'x' WHERE a = :id % 5000;
UPDATE later_heap SET b = b || 'x' WHERE a = :id % 5000;
DELETE FROM t_anker WHERE id = :id2 AND :d = 1;
DELETE FROM t_heap WHERE id = :id2 AND :d = 1;
COMMIT;
SQL
chown postgres "$WORK/twins.sql"
workload() { cluster_pgbench -n -f "$WORK/twins.sql" --max-tries=1000 -c 2 -T "$1" postgres >/dev/null 2>&1 || fail "pgbench failed"; }

# What a cluster answers: the same figures must come from heap and anker,
# primary and standby. Plans vary: index scan, AnkerScan on a snapshot,
# AnkerAgg.
answers() { # port table-suffix
    local s=$2
    qp "$1" "SELECT md5(string_agg(t::text, ',' ORDER BY id)) FROM t_$s t"
    qp "$1" "SET enable_seqscan = off; SET anker.enable_scan_node = off; SELECT sum(v), count(*) FROM t_$s WHERE id > 0" | tail -1
    qp "$1" "SELECT string_agg(x::text, ',' ORDER BY grp) FROM (SELECT grp, count(*), sum(v) FROM t_$s GROUP BY grp) x"
    qp "$1" "SELECT md5(string_agg(l::text, ',' ORDER BY a)) FROM later_$s l"
}
same_answers() { # what port
    local a h
    a=$(answers "$2" anker)
    h=$(answers "$2" heap)
    [ "$a" = "$h" ] || fail "$1: anker and heap twins differ"
    echo "$a"
}

# ---- hot standby -----------------------------------------------------------
SB=$CLUSTER_DIR/standby
SB_PORT=$((CLUSTER_PORT + 1))
EXTRA_DATA+=("$SB")
cluster_standby_start "$SB" "$SB_PORT" "archive_mode = off"
wait_ready "$SB_PORT"
[ "$(qp "$SB_PORT" "SELECT pg_is_in_recovery()")" = t ] || fail "the standby is not in recovery"
# loaded on the standby before the run: redo keeps it up to date in memory
qp "$SB_PORT" "SELECT count(*) FROM t_anker" >/dev/null

# compactions on the primary while it runs: the standby redoes images and
# switches under a table its backends have loaded, and loads one afterwards
workload 15 &
bench=$!
for _ in 1 2 3; do
    sleep 4
    q "SELECT anker.compact('t_anker'), anker.compact('later_anker')" >/dev/null
done
wait "$bench"
catch_up
primary=$(same_answers "primary" "$CLUSTER_PORT")
standby=$(same_answers "standby" "$SB_PORT")
[ "$primary" = "$standby" ] || fail "the standby answers differently from the primary"
qp "$SB_PORT" "EXPLAIN SELECT grp, count(*), sum(v) FROM t_anker GROUP BY grp" | grep -q AnkerAgg \
    || fail "no AnkerAgg plan on the standby"
qp "$SB_PORT" "SELECT bt_index_check('t_anker_pkey', true), bt_index_check('t_anker_grp', true)" >/dev/null \
    || fail "a standby index disagrees with its table"
echo "ok: hot standby replays the run and answers like the primary ($(q "SELECT count(*) FROM t_anker") rows)"
err=$(cluster_psql_port "$SB_PORT" -Atc "\\set VERBOSITY verbose" -c "SELECT anker.compact('t_anker')" 2>&1 || true)
grep -q "25006: cannot execute anker.compact() during recovery" <<< "$err" ||
    fail "anker.compact on a standby did not refuse with SQLSTATE 25006: $err"
# synchronous_commit = remote_apply: a commit returns once the standby has
# applied it, to its tables in memory too, so a read on the standby right
# after sees the change (read-your-writes on a synchronous standby)
q "ALTER SYSTEM SET synchronous_standby_names = '*'" >/dev/null && q "SELECT pg_reload_conf()" >/dev/null
for _ in $(seq 1 100); do
    [ "$(q "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'")" = 1 ] && break
    sleep 0.1
done
[ "$(q "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'")" = 1 ] || fail "the standby did not become synchronous"
q "INSERT INTO t_anker VALUES (-100, 1, 0, 'start')" >/dev/null
for i in $(seq 1 20); do
    cluster_psql -q -c "SET synchronous_commit = remote_apply" \
        -c "UPDATE t_anker SET note = 'applied $i' WHERE id = -100; INSERT INTO t_anker VALUES (-100 - $i, 1, $i, 'remote apply')" >/dev/null
    [ "$(qp "$SB_PORT" "SELECT note FROM t_anker WHERE id = -100")" = "applied $i" ] &&
        [ "$(qp "$SB_PORT" "SELECT count(*) FROM t_anker WHERE id = -100 - $i")" = 1 ] ||
        fail "with remote_apply, the standby did not see commit $i right after it returned"
done
q "DELETE FROM t_anker WHERE id <= -100" >/dev/null
q "ALTER SYSTEM RESET synchronous_standby_names" >/dev/null && q "SELECT pg_reload_conf()" >/dev/null
echo "ok: with synchronous_commit = remote_apply, each commit is in the standby's table when it returns (20 of 20)"
# nobody writes or VACUUMs on a standby: redo prunes the versions in-place
# updates leave, or its memory would grow with every update it replays
q "CREATE TABLE churn (id int PRIMARY KEY, v int) USING anker; INSERT INTO churn SELECT g, 0 FROM generate_series(1, 2000) g" >/dev/null
catch_up
qp "$SB_PORT" "SELECT count(*) FROM churn" >/dev/null
for _ in $(seq 1 100); do q "UPDATE churn SET v = v + 1" >/dev/null; done
catch_up
[ "$(qp "$SB_PORT" "SELECT sum(v) FROM churn")" = 200000 ] || fail "the standby missed updates of churn"
mem() { qp "$1" "SELECT bytes FROM anker.table_storage() WHERE relfilenode = pg_relation_filenode('churn')"; }
mem_primary=$(mem "$CLUSTER_PORT"); mem_standby=$(mem "$SB_PORT")
[ "$mem_standby" -le $((mem_primary + 8 * 65536)) ] ||
    fail "after 200,000 in-place updates the standby holds $mem_standby bytes for the table, the primary $mem_primary"
echo "ok: after 200,000 in-place updates the standby's table takes $mem_standby bytes of memory, the primary's $mem_primary"
# ... but never a version a standby query still reads: a REPEATABLE READ
# transaction on the standby sees the same sum before and after the primary
# updates every row twenty times
seen=$CLUSTER_DIR/rr-reads
: > "$seen"; chown postgres "$seen"
cat > "$seen.sql" <<SQL
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT sum(v) FROM churn \g $seen
SELECT pg_sleep(10);
SELECT sum(v) FROM churn \g $seen.after
COMMIT;
SQL
cluster_psql_port "$SB_PORT" -At -f "$seen.sql" >/dev/null &
reader=$!
for _ in $(seq 1 50); do [ -s "$seen" ] && break; sleep 0.2; done
[ -s "$seen" ] || fail "the standby's reader did not start"
for _ in $(seq 1 20); do q "UPDATE churn SET v = v + 1" >/dev/null; done
catch_up
wait "$reader" || fail "the standby's REPEATABLE READ reader failed"
[ "$(cat "$seen")" = 200000 ] && [ "$(cat "$seen.after")" = 200000 ] ||
    fail "a standby snapshot lost the versions it reads: $(cat "$seen") then $(cat "$seen.after")"
[ "$(qp "$SB_PORT" "SELECT sum(v) FROM churn")" = 240000 ] || fail "the standby missed updates of churn"
q "DROP TABLE churn" >/dev/null
echo "ok: a standby REPEATABLE READ transaction reads its versions while redo prunes others"

# What the primary removes for good (VACUUM's dead rows, versions an image
# leaves out) waits for the standby's queries that may still see it, as
# heap's pruning does: redo resolves the recovery conflict first
# (durable::horizon). A REPEATABLE READ transaction on the standby reads the
# same rows before and after a DELETE and VACUUM on the primary, through a
# snapshot scan and through the index, as heap's does; replay waits for it
# (max_standby_streaming_delay, 30 s by default).
rr_reader() { # table, then the file each query writes to gets .1, .2, .3
    cat > "$seen.sql" <<SQL
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*), sum(id) FROM $1 \g $seen.1
SELECT pg_sleep(${2:-4});
SELECT count(*), sum(id) FROM $1 \g $seen.2
SET anker.snapshot_min_rows = 1000000000;
SET enable_seqscan = off;
SELECT count(*) FROM $1 WHERE id BETWEEN 1 AND 200 \g $seen.3
COMMIT;
SQL
    rm -f "$seen".[123]
    cluster_psql_port "$SB_PORT" -At -f "$seen.sql" > "$seen.out" 2>&1 &
    reader=$!
    for _ in $(seq 1 50); do [ -s "$seen.1" ] && break; sleep 0.2; done
    [ -s "$seen.1" ] || fail "the standby's reader of $1 did not start"
}
for am in anker heap; do
    q "CREATE TABLE gone_$am (id int PRIMARY KEY, v int) USING $am; INSERT INTO gone_$am SELECT g, 0 FROM generate_series(1, 1000) g" >/dev/null
done
catch_up
for am in anker heap; do
    rr_reader "gone_$am"
    q "DELETE FROM gone_$am WHERE id <= 100" >/dev/null
    q "VACUUM gone_$am" >/dev/null
    q "INSERT INTO gone_$am SELECT g, 1 FROM generate_series(2001, 2100) g" >/dev/null
    wait "$reader" || fail "the standby's reader of gone_$am failed: $(cat "$seen.out")"
    [ "$(cat "$seen.1")" = "1000|500500" ] && [ "$(cat "$seen.2")" = "1000|500500" ] && [ "$(cat "$seen.3")" = 200 ] ||
        fail "$am: a standby REPEATABLE READ transaction saw $(cat "$seen.1"), then $(cat "$seen.2") and $(cat "$seen.3") by the index, across a VACUUM on the primary"
done
catch_up
[ "$(qp "$SB_PORT" "SELECT count(*), sum(id) FROM gone_anker")" = "$(q "SELECT count(*), sum(id) FROM gone_heap")" ] ||
    fail "the standby's gone_anker differs from the primary's gone_heap once replay went on"
echo "ok: a standby REPEATABLE READ transaction keeps its rows across a DELETE and VACUUM on the primary (replay waits, as for heap)"
# With a short max_standby_streaming_delay the query is cancelled instead,
# with heap's error: after a VACUUM that vacates rows, after an image that
# leaves out versions pruning removed (two updates of every row, then a
# VACUUM that prunes the first's versions; neither conflicts with anything:
# pruning on the primary changes nothing on the standby), and after a
# VACUUM (FREEZE) that freezes a row inserted after the query's snapshot
# (frozen, it would look visible to it).
conflicts() { qp "$SB_PORT" "SELECT confl_snapshot FROM pg_stat_database_conflicts WHERE datname = 'postgres'"; }
qp "$SB_PORT" "ALTER SYSTEM SET max_standby_streaming_delay = '100ms'" >/dev/null
qp "$SB_PORT" "SELECT pg_reload_conf()" >/dev/null
cancelled() { # what
    wait "$reader" && fail "$1 did not cancel the standby's REPEATABLE READ reader"
    grep -q "canceling statement due to conflict with recovery" "$seen.out" ||
        fail "$1: the standby's reader failed otherwise: $(cat "$seen.out")"
}
before=$(conflicts)
rr_reader gone_anker 8
q "DELETE FROM gone_anker WHERE id <= 200" >/dev/null
q "VACUUM gone_anker" >/dev/null
cancelled "VACUUM on the primary"
rr_reader gone_anker 8
q "UPDATE gone_anker SET v = v + 1" >/dev/null
q "UPDATE gone_anker SET v = v + 1" >/dev/null
q "VACUUM gone_anker" >/dev/null
catch_up
kill -0 "$reader" 2>/dev/null || fail "updates on the primary cancelled the standby's reader: $(cat "$seen.out")"
q "SELECT anker.compact('gone_anker')" >/dev/null
cancelled "an image on the primary"
rr_reader gone_anker 8
q "INSERT INTO gone_anker VALUES (5000, 0)" >/dev/null
q "VACUUM (FREEZE) gone_anker" >/dev/null
cancelled "VACUUM (FREEZE) on the primary"
after=$(conflicts)
[ "$after" -ge $((before + 3)) ] || fail "pg_stat_database_conflicts counted $((after - before)) snapshot conflicts, not 3"
echo "ok: with max_standby_streaming_delay = 100ms, VACUUM, an image and VACUUM (FREEZE) on the primary cancel the standby's conflicting query ($((after - before)) snapshot conflicts)"
# With hot_standby_feedback the primary keeps what the standby's query may
# read: no conflict, no cancellation, the same rows.
qp "$SB_PORT" "ALTER SYSTEM SET hot_standby_feedback = on" >/dev/null
qp "$SB_PORT" "ALTER SYSTEM SET wal_receiver_status_interval = '1s'" >/dev/null
qp "$SB_PORT" "SELECT pg_reload_conf()" >/dev/null
catch_up
rr_reader gone_anker 6
first=$(cat "$seen.1")
xmin=
for _ in $(seq 1 50); do
    xmin=$(q "SELECT backend_xmin FROM pg_stat_replication")
    [ -n "$xmin" ] && break
    sleep 0.2
done
[ -n "$xmin" ] || fail "the standby's hot_standby_feedback did not reach the primary"
q "DELETE FROM gone_anker WHERE id <= 300" >/dev/null
q "VACUUM gone_anker" >/dev/null
q "SELECT anker.compact('gone_anker')" >/dev/null
wait "$reader" || fail "with hot_standby_feedback, the standby's reader failed: $(cat "$seen.out")"
[ "$(cat "$seen.2")" = "$first" ] || fail "with hot_standby_feedback, the standby's reader saw $first, then $(cat "$seen.2")"
[ "$(conflicts)" = "$after" ] || fail "with hot_standby_feedback, a snapshot conflict was counted"
for setting in max_standby_streaming_delay hot_standby_feedback wal_receiver_status_interval; do
    qp "$SB_PORT" "ALTER SYSTEM RESET $setting" >/dev/null
done
qp "$SB_PORT" "SELECT pg_reload_conf()" >/dev/null
catch_up
[ "$(qp "$SB_PORT" "SELECT count(*), sum(v) FROM gone_anker")" = "$(q "SELECT count(*), sum(v) FROM gone_anker")" ] ||
    fail "the standby's gone_anker differs from the primary's after the cancellations"
q "DROP TABLE gone_anker, gone_heap" >/dev/null
echo "ok: with hot_standby_feedback, a DELETE, VACUUM and image on the primary neither cancel the standby's query nor change what it reads"

# a table the standby loaded and the primary then drops is freed from the
# standby's memory by redo within seconds (it looks every 10 s while anker
# records come), or by the standby's next load, not kept until promotion
in_memory() { qp "$SB_PORT" "SELECT count(*) FROM anker.table_storage() WHERE relfilenode = $1"; }
q "CREATE TABLE busy (a int) USING anker; INSERT INTO busy VALUES (0)" >/dev/null
for t in dropped_later dropped_later2; do
    q "CREATE TABLE $t (a int) USING anker; INSERT INTO $t SELECT generate_series(1, 1000)" >/dev/null
done
file=$(q "SELECT relfilenode FROM pg_class WHERE relname = 'dropped_later'")
file2=$(q "SELECT relfilenode FROM pg_class WHERE relname = 'dropped_later2'")
catch_up
for t in dropped_later dropped_later2 busy; do
    [ "$(qp "$SB_PORT" "SELECT count(*) FROM $t")" -ge 1 ] || fail "the standby does not see the new table $t"
done
[ "$(in_memory "$file")" = 1 ] && [ "$(in_memory "$file2")" = 1 ] || fail "the standby did not load the new tables"
q "DROP TABLE dropped_later" >/dev/null
freed=
for i in $(seq 1 30); do
    q "UPDATE busy SET a = $i" >/dev/null
    catch_up
    [ "$(in_memory "$file")" = 0 ] && { freed=$i; break; }
    sleep 1
done
[ -n "$freed" ] || fail "a table dropped on the primary stays in the standby's memory while redo goes on"
echo "ok: a table dropped on the primary leaves the standby's memory while redo goes on (after ${freed} s)"
q "DROP TABLE dropped_later2; CREATE TABLE read_next (a int) USING anker; INSERT INTO read_next VALUES (1)" >/dev/null
catch_up
[ "$(qp "$SB_PORT" "SELECT count(*) FROM read_next")" = 1 ] || fail "the standby does not see the second new table"
[ "$(in_memory "$file2")" = 0 ] || fail "a table dropped on the primary stays in the standby's memory after a load"
q "DROP TABLE busy" >/dev/null
echo "ok: a table dropped on the primary leaves the standby's memory at its next load"

# Transactions whose end removes files they changed: a table created, or
# truncated (a new file), then updated in place and rolled back, whole or to
# a savepoint; a column added and the table then dropped, or rewritten, in
# one committed transaction. The abort's undo and the commit's settling of
# the added column run after the abort or commit record whose redo removes
# those files: logged, they reached redo after the file was gone (a PANIC,
# "WAL contains references to invalid pages", and the standby down for good).
cluster_psql >/dev/null <<'SQL'
CREATE TABLE keeps (a int PRIMARY KEY, b int) USING anker;
INSERT INTO keeps VALUES (1, 1), (2, 2);
BEGIN; CREATE TABLE gone (a int PRIMARY KEY, b int) USING anker; INSERT INTO gone VALUES (1, 1), (2, 2); UPDATE gone SET b = b + 10; ROLLBACK;
BEGIN; UPDATE keeps SET b = 3 WHERE a = 1; SAVEPOINT s; CREATE TABLE gone2 (a int, b int) USING anker; INSERT INTO gone2 VALUES (1, 1); UPDATE gone2 SET b = 5; ROLLBACK TO s; UPDATE keeps SET b = 4 WHERE a = 2; COMMIT;
BEGIN; UPDATE keeps SET b = 30 WHERE a = 1; TRUNCATE keeps; INSERT INTO keeps VALUES (7, 7); UPDATE keeps SET b = 8; ROLLBACK;
CREATE TABLE gone3 (a int) USING anker;
INSERT INTO gone3 VALUES (1);
BEGIN; ALTER TABLE gone3 ADD COLUMN c int DEFAULT 5; DROP TABLE gone3; COMMIT;
BEGIN; ALTER TABLE keeps ADD COLUMN c int DEFAULT 5; ALTER TABLE keeps ALTER COLUMN b TYPE bigint; COMMIT;
UPDATE keeps SET c = c + a;
SQL
catch_up
[ "$(qp "$SB_PORT" "SELECT pg_is_in_recovery()")" = t ] || fail "the standby is gone after transactions that removed files they changed"
want=$(q "SELECT string_agg(k::text, ',' ORDER BY a) FROM keeps k")
[ "$want" = "(1,3,6),(2,4,7)" ] || fail "the primary's table is $want after those transactions"
[ "$(qp "$SB_PORT" "SELECT string_agg(k::text, ',' ORDER BY a) FROM keeps k")" = "$want" ] \
    || fail "the standby's table differs from the primary's after transactions that removed files they changed"
q "DROP TABLE keeps" >/dev/null
echo "ok: the standby replays transactions whose commit or abort removes files they changed (rolled back, to a savepoint, dropped, rewritten)"

# a standby backend loads a table while redo goes on appending to its log
# (entries over several pages, new blocks), compacting it (switches) and
# growing its file: the load must read each record's pages all or none
# (tables are loaded once per server life: the standby is restarted each
# time, and the primary keeps WAL for the restarts, however far behind)
q "ALTER SYSTEM SET wal_keep_size = '2GB'" >/dev/null && q "SELECT pg_reload_conf()" >/dev/null
q "CREATE TABLE racing (id int PRIMARY KEY, v int, pad text) USING anker;
   INSERT INTO racing SELECT g, 0, repeat('r', 1500) FROM generate_series(1, 20000) g" >/dev/null
cat > "$WORK/racing.sql" <<'SQL'
\set id random(1, 24000)
\set n random(1500, 4000)
INSERT INTO racing VALUES (:id, 1, repeat('i', :n)) ON CONFLICT (id) DO UPDATE SET v = racing.v + 1, pad = repeat('u', :n);
SQL
chown postgres "$WORK/racing.sql"
cluster_pgbench -n -f "$WORK/racing.sql" -c 1 -T 12 postgres >/dev/null 2>&1 &
racer=$!
( while kill -0 "$racer" 2>/dev/null; do q "SELECT anker.compact('racing')" >/dev/null 2>&1 || true; sleep 1; done ) &
compactor=$!
loads=0
for _ in $(seq 1 8); do
    # (a restartpoint first, so that redo starts again from about here)
    q "CHECKPOINT" >/dev/null
    qp "$SB_PORT" "CHECKPOINT" >/dev/null
    pg_ctl_as -D "$SB" -m fast -w -t 120 restart -l "$SB.log"
    wait_ready "$SB_PORT"
    # (redo starts again from the last restartpoint: the table comes back
    # when its creation is replayed)
    for _ in $(seq 1 300); do
        [ "$(qp "$SB_PORT" "SELECT to_regclass('racing') IS NOT NULL")" = t ] && break
        sleep 0.1
    done
    qp "$SB_PORT" "SELECT count(*) FROM racing" >/dev/null || fail "a standby load racing redo failed"
    loads=$((loads + 1))
    kill -0 "$racer" 2>/dev/null || break
done
wait "$racer" "$compactor" || fail "the primary's workload failed"
catch_up
[ "$(q "SELECT md5(string_agg(r::text, ',' ORDER BY id)) FROM racing r")" = \
  "$(qp "$SB_PORT" "SELECT md5(string_agg(r::text, ',' ORDER BY id)) FROM racing r")" ] ||
    fail "a table loaded while redo appended and compacted differs from the primary's"
q "DROP TABLE racing" >/dev/null
echo "ok: $loads loads on the standby while redo appended to, compacted and grew the table's log"

# A standby backend replays the log a page at a time as it reads it, as on a
# primary: its private memory grows by far less than the log (until
# 2026-12-06 a standby's load read the whole log into memory first).
q "CREATE TABLE big_sb (id int, v text) USING anker;
   INSERT INTO big_sb SELECT g, md5(g::text) FROM generate_series(1, 400000) g" >/dev/null
catch_up
pg_ctl_as -D "$SB" -m fast -w -t 120 restart -l "$SB.log"
wait_ready "$SB_PORT"
catch_up
cluster_psql_port "$SB_PORT" -Atc "SELECT pg_sleep(0.6) /* loader */" -c "SELECT count(*) FROM big_sb" >"$WORK/sb_load.out" &
loader=$!
sleep 0.3
pid=$(qp "$SB_PORT" "SELECT pid FROM pg_stat_activity WHERE query LIKE '%/* loader */%' AND pid <> pg_backend_pid()")
[ -n "$pid" ] || fail "the standby's loading backend was not found"
growth=$(cluster_peak_anon_growth "$pid")
[ -n "$growth" ] || fail "the standby's loading backend was not found"
wait "$loader" || fail "loading a large table on the standby failed"
[ "$(tail -n 1 "$WORK/sb_load.out")" = 400000 ] || fail "the standby's load of a large table lost rows"
log_kb=$(( $(qp "$SB_PORT" "SELECT pg_relation_size('big_sb')") / 1024 ))
[ "$growth" -lt $((log_kb / 4)) ] ||
    fail "loading a table with $log_kb kB of log took $growth kB of the standby backend's memory"
q "DROP TABLE big_sb" >/dev/null
echo "ok: on the standby, loading $log_kb kB of log took $growth kB of the loading backend's private memory"

# Redo and a standby backend's load of a table: a table whose log is long
# (two million changes, about 0.7 s to load) and whose image would be short
# (20,000 rows); each case pauses replay while the primary writes, restarts
# the standby so that the table must be loaded, and resumes replay once a
# backend is loading it.
q "CREATE TABLE switched (id int PRIMARY KEY, v int) USING anker WITH (autovacuum_enabled = off);
   INSERT INTO switched SELECT g, 0 FROM generate_series(1, 20000) g" >/dev/null
for _ in $(seq 1 10); do
    cluster_psql -q -c "$(for _ in $(seq 1 10); do printf 'UPDATE switched SET v = v + 1; '; done)" >/dev/null
done
file=$(q "SELECT relfilenode FROM pg_class WHERE relname = 'switched'")
pause_replay() {
    qp "$SB_PORT" "SELECT pg_wal_replay_pause()" >/dev/null
    for _ in $(seq 1 100); do
        [ "$(qp "$SB_PORT" "SELECT pg_get_wal_replay_pause_state()")" = paused ] && return 0
        sleep 0.1
    done
    fail "the standby's replay did not pause"
}
received() { # wait until the standby has received the primary's WAL up to LSN $1
    for _ in $(seq 1 300); do
        [ "$(qp "$SB_PORT" "SELECT pg_last_wal_receive_lsn() >= '$1'")" = t ] && return 0
        sleep 0.1
    done
    fail "the standby did not receive WAL up to $1"
}
published() { # wait until a backend of the standby has begun to load the table
    for _ in $(seq 1 500); do
        [ "$(qp "$SB_PORT" "SELECT count(*) FROM anker.table_storage() WHERE relfilenode = $file")" = 1 ] && return 0
    done
    fail "the standby's backend did not begin to load the table"
}

# Redo does not wait for a load: replay paused, the primary changes rows of
# the table, and replay resumed while a backend loads it (about 0.7 s for
# two million changes) must pass those changes before the load is over;
# the loaded table then has them (the loader reads what redo wrote).
pg_ctl_as -D "$SB" -m fast -w -t 120 restart -l "$SB.log"
wait_ready "$SB_PORT"
catch_up
pause_replay
q "UPDATE switched SET v = v + 1000 WHERE id % 20 = 0" >/dev/null
q "CREATE TABLE replay_mark (a int)" >/dev/null
target=$(q "SELECT pg_current_wal_lsn()")
received "$target"
cluster_psql_port "$SB_PORT" -Atc "SELECT sum(v) /* loader2 */ FROM switched" >"$WORK/sb_load3.out" &
loader=$!
published
qp "$SB_PORT" "SELECT pg_wal_replay_resume()" >/dev/null
during=
for _ in $(seq 1 2000); do
    if [ "$(qp "$SB_PORT" "SELECT pg_last_wal_replay_lsn() >= '$target'")" = t ]; then
        during=$(qp "$SB_PORT" "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%/* loader2 */%' AND state = 'active' AND pid <> pg_backend_pid()")
        break
    fi
done
wait "$loader" || fail "a standby load while redo went on failed"
catch_up
[ "$(q "SELECT md5(string_agg(r::text, ',' ORDER BY id)) FROM switched r")" = \
  "$(qp "$SB_PORT" "SELECT md5(string_agg(r::text, ',' ORDER BY id)) FROM switched r")" ] ||
    fail "a table loaded while redo changed it differs from the primary's"
[ "$during" = 1 ] || fail "redo did not get past the table's changes while the table loaded (loads still running then: ${during:-none})"
q "DROP TABLE replay_mark" >/dev/null
echo "ok: redo replayed changes of a table a standby backend was loading without waiting for the load; the table then is the primary's"

# A switch to a new image that redo meets while a backend loads the table
# waits until the load is over (the loader walks the chain the switch
# replaces).
switched() { qp "$SB_PORT" "SELECT value FROM anker.counters() WHERE name = 'log_switches_after_standby_loads'"; }
pg_ctl_as -D "$SB" -m fast -w -t 120 restart -l "$SB.log"
wait_ready "$SB_PORT"
catch_up
pause_replay
q "SELECT anker.compact('switched')" >/dev/null
q "UPDATE switched SET v = -1 WHERE id % 1000 = 0" >/dev/null
received "$(q "SELECT pg_current_wal_lsn()")"
before=$(switched)
cluster_psql_port "$SB_PORT" -Atc "SELECT sum(v) FROM switched" >"$WORK/sb_load2.out" &
loader=$!
published
qp "$SB_PORT" "SELECT pg_wal_replay_resume()" >/dev/null
wait "$loader" || fail "a standby load while redo switched the table's log failed"
catch_up
[ "$(q "SELECT md5(string_agg(r::text, ',' ORDER BY id)) FROM switched r")" = \
  "$(qp "$SB_PORT" "SELECT md5(string_agg(r::text, ',' ORDER BY id)) FROM switched r")" ] ||
    fail "a table loaded while redo switched its log differs from the primary's"
after=$(switched)
[ "$after" -gt "$before" ] || fail "redo did not meet the switch while the table loaded (switches after loads: $before, then $after)"
q "DROP TABLE switched" >/dev/null
echo "ok: a switch redo met while a standby backend loaded the table waited for the load ($((after - before)) time(s)); the table then is the primary's"

# ---- promotion ---------------------------------------------------------------
cluster_stop
pg_ctl_as -D "$SB" -w promote
for _ in $(seq 1 60); do
    [ "$(qp "$SB_PORT" "SELECT pg_is_in_recovery()")" = f ] && break
    sleep 1
done
for s in anker heap; do
    qp "$SB_PORT" "INSERT INTO t_$s SELECT g, 1, g, 'promoted' FROM generate_series(50001, 50100) g" >/dev/null
    qp "$SB_PORT" "UPDATE t_$s SET v = v * 2 WHERE id % 7 = 0" >/dev/null
    qp "$SB_PORT" "UPDATE later_$s SET b = 'after promotion' WHERE a < 100" >/dev/null
done
same_answers "promoted" "$SB_PORT" >/dev/null
qp "$SB_PORT" "SELECT bt_index_check('t_anker_pkey', true)" >/dev/null || fail "index disagrees after promotion"
pg_ctl_as -D "$SB" -w -t 60 restart -l "$SB.log"
wait_ready "$SB_PORT"
same_answers "promoted, restarted" "$SB_PORT" >/dev/null
echo "ok: promoted standby takes writes and keeps them over a restart"
pg_ctl_as -D "$SB" -m fast -w stop

# ---- point-in-time recovery --------------------------------------------------
pg_ctl_as -D "$CLUSTER_DATA" -l "$CLUSTER_LOG" -w -t 120 start
wait_ready "$CLUSTER_PORT"
BK=$CLUSTER_DIR/backup
cluster_run "$PG_BINDIR/pg_basebackup" -D "$BK" -X none -c fast
workload 5
xid=$(cluster_psql -At <<'SQL' | tail -1
BEGIN;
INSERT INTO t_anker VALUES (-1, 0, 0, 'the target');
INSERT INTO t_heap VALUES (-1, 0, 0, 'the target');
SELECT txid_current();
COMMIT;
SQL
)
at_target=$(same_answers "at the target" "$CLUSTER_PORT")
workload 5
cluster_psql -c "TRUNCATE later_anker, later_heap" >/dev/null
q "SELECT pg_switch_wal()" >/dev/null
sleep 2
cluster_stop
PITR=$CLUSTER_DIR/pitr
PITR_PORT=$((CLUSTER_PORT + 2))
cp -a "$BK" "$PITR"
cat >> "$PITR/postgresql.conf" <<CONF
port = $PITR_PORT
archive_mode = off
restore_command = 'cp $CLUSTER_DIR/archive/%f %p'
recovery_target_xid = '$xid'
recovery_target_action = 'promote'
CONF
touch "$PITR/recovery.signal"
chown -R postgres "$PITR"
EXTRA_DATA+=("$PITR")
pg_ctl_as -D "$PITR" -l "$CLUSTER_DIR/pitr.log" -w -t 300 start
wait_ready "$PITR_PORT"
for _ in $(seq 1 60); do
    [ "$(qp "$PITR_PORT" "SELECT pg_is_in_recovery()")" = f ] && break
    sleep 1
done
restored=$(same_answers "after point-in-time recovery" "$PITR_PORT")
[ "$restored" = "$at_target" ] || fail "point-in-time recovery did not restore the tables as of xid $xid"
[ "$(qp "$PITR_PORT" "SELECT note FROM t_anker WHERE id = -1")" = "the target" ] || fail "PITR: the target transaction is missing"
echo "ok: point-in-time recovery to xid $xid restores anker tables as of that transaction"

# ---- pg_rewind ---------------------------------------------------------------
# The old primary went on after the target (a workload, a TRUNCATE) on the
# timeline the recovered cluster left: rewound and started as its standby,
# it forgets all of that, log blocks the rewind copies and truncates included.
qp "$PITR_PORT" "CHECKPOINT" >/dev/null   # (pg_rewind reads the new timeline from its control file)
# (the old primary's WAL since the last common checkpoint is in the archive)
echo "restore_command = 'cp $CLUSTER_DIR/archive/%f %p'" >> "$CLUSTER_DATA/postgresql.conf"
(cd "$CLUSTER_DIR" && runuser -u postgres -- "$PG_BINDIR/pg_rewind" --target-pgdata="$CLUSTER_DATA" -R --restore-target-wal \
    --source-server="host=$CLUSTER_SOCK port=$PITR_PORT user=postgres dbname=postgres" >"$CLUSTER_DIR/rewind.log" 2>&1) ||
    { cat "$CLUSTER_DIR/rewind.log"; fail "pg_rewind failed"; }
# (pg_rewind copied the recovered cluster's configuration: its port and target)
printf "port = %s\nrecovery_target_xid = ''\n" "$CLUSTER_PORT" >> "$CLUSTER_DATA/postgresql.conf"
pg_ctl_as -D "$CLUSTER_DATA" -l "$CLUSTER_LOG" -w -t 300 start || fail "the rewound primary does not start"
wait_ready "$CLUSTER_PORT"
[ "$(q "SELECT pg_is_in_recovery()")" = t ] || fail "the rewound primary is not a standby"
for s in anker heap; do
    qp "$PITR_PORT" "UPDATE t_$s SET v = v + 1000, note = 'after rewind' WHERE id % 11 = 0" >/dev/null
done
target=$(qp "$PITR_PORT" "SELECT pg_current_wal_lsn()")
for _ in $(seq 1 120); do
    [ "$(q "SELECT pg_last_wal_replay_lsn() >= '$target'")" = t ] && break
    sleep 1
done
[ "$(q "SELECT pg_last_wal_replay_lsn() >= '$target'")" = t ] || fail "the rewound primary did not catch up"
[ "$(same_answers "rewound" "$CLUSTER_PORT")" = "$(same_answers "recovered, written" "$PITR_PORT")" ] ||
    fail "the rewound primary answers differently from the cluster it follows"
[ "$(q "SELECT count(*) FROM later_anker")" = 5000 ] || fail "the rewound primary kept its TRUNCATE"
q "SELECT bt_index_check('t_anker_pkey', true), bt_index_check('t_anker_grp', true)" >/dev/null ||
    fail "an index of the rewound primary disagrees with its table"
echo "ok: pg_rewind takes the old primary back to the recovered timeline; as its standby it answers like it"
echo "standby: all checks passed"
