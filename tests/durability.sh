#!/usr/bin/env bash
# anker tables are as durable as heap tables: a heap twin is the oracle.
# Every transaction of the workload makes the same change to an anker table
# and to an identical heap table (in-place updates, updates of an indexed
# column, inserts, deletes, ON CONFLICT, rolled-back savepoints); after a
# clean restart, an immediate shutdown, a kill -9 of the postmaster during
# pgbench and a backend crash (crash-restart), the twins must be identical
# and every index must agree with its table (amcheck, heapallindexed). Also:
# a prepared transaction survives a crash and commits after it; rows that
# aborted in-place updates left behind survive rewrites and index builds; unlogged
# tables come back empty after a crash and whole after a clean restart;
# databases copied from a template and tablespace moves survive a crash;
# temporary tables write no WAL; pg_dump and pg_restore round-trip; crash
# recovery leaves no file of a rolled-back transaction behind.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
[ "${KEEP:-0}" = 1 ] && export CLUSTER_KEEP=1
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '1GB'" "lc_messages = 'C'" \
    "restart_after_crash = on" "max_prepared_transactions = 4" "checkpoint_timeout = 30s" >/dev/null

q() { cluster_psql -Atc "$1"; }
fail() { echo "FAIL: $*"; cluster_log_tail 30; exit 1; }

wait_ready() { cluster_wait_ready || fail "server did not come back"; }

cluster_psql -c "CREATE EXTENSION anker" -c "CREATE EXTENSION amcheck" >/dev/null
for am in anker heap; do
    t=t_$am
    cluster_psql >/dev/null <<SQL
CREATE TABLE $t (id int PRIMARY KEY, grp int, v bigint, note text, n numeric(12,2), tag char(24)) USING $am;
CREATE INDEX ${t}_grp ON $t (grp);
INSERT INTO $t SELECT g, g % 50, g, 'note ' || g, g * 1.25, 'tag ' || g FROM generate_series(1, 3000) g;
INSERT INTO $t VALUES (200000, 0, 0, 'the prepared transaction updates me', 0);
CREATE UNLOGGED TABLE u_$am (a int PRIMARY KEY, b text) USING $am;
INSERT INTO u_$am SELECT g, 'u' || g FROM generate_series(1, 500) g;
SQL
done

# The twin workload: one transaction, the same change to both tables.
WORK=$(cluster_workdir)
cat > "$WORK/twins.sql" <<'SQL'
\set id random(1, 3000)
\set id2 random(1, 3000)
\set id3 random(1, 6000)
\set d random(1, 10)
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE t_anker SET v = v + :d, note = note || '.', tag = repeat(chr(96 + :d), 2 * :d) WHERE id = :id;
UPDATE t_heap SET v = v + :d, note = note || '.', tag = repeat(chr(96 + :d), 2 * :d) WHERE id = :id;
UPDATE t_anker SET grp = grp + 1 WHERE id = :id2;
UPDATE t_heap SET grp = grp + 1 WHERE id = :id2;
INSERT INTO t_anker VALUES (:id3, 0, :d, 'new', 0) ON CONFLICT (id) DO UPDATE SET n = t_anker.n + 1;
INSERT INTO t_heap VALUES (:id3, 0, :d, 'new', 0) ON CONFLICT (id) DO UPDATE SET n = t_heap.n + 1;
SAVEPOINT s;
DELETE FROM t_anker WHERE id = :id2;
DELETE FROM t_heap WHERE id = :id2;
ROLLBACK TO s;
DELETE FROM t_anker WHERE id = :id3 AND :d = 1;
DELETE FROM t_heap WHERE id = :id3 AND :d = 1;
COMMIT;
SQL
chown postgres "$WORK/twins.sql"

check_twins() { # when
    local diff n_a n_h
    diff=$(q "SELECT count(*) FROM ((TABLE t_anker EXCEPT ALL TABLE t_heap) UNION ALL (TABLE t_heap EXCEPT ALL TABLE t_anker)) x")
    n_a=$(q "SELECT count(*) FROM t_anker")
    n_h=$(q "SELECT count(*) FROM t_heap")
    if [ "$diff" != 0 ] || [ "$n_a" != "$n_h" ]; then
        cluster_psql -c "(SELECT 'anker only' AS side, * FROM (TABLE t_anker EXCEPT ALL TABLE t_heap) a) UNION ALL (SELECT 'heap only', * FROM (TABLE t_heap EXCEPT ALL TABLE t_anker) h) ORDER BY 2, 1 LIMIT 20"
        fail "$1: twins differ ($diff rows; anker $n_a, heap $n_h)"
    fi
    q "SELECT bt_index_check('t_anker_pkey', true), bt_index_check('t_anker_grp', true)" >/dev/null \
        || fail "$1: an index disagrees with its table"
    # an index scan finds what a sequential scan finds
    local by_index
    by_index=$(cluster_psql -Atc "SET enable_seqscan = off; SET anker.enable_scan_node = off; SELECT sum(v) FROM t_anker WHERE id > 0" | tail -1)
    [ "$by_index" = "$(q "SELECT sum(v) FROM t_heap WHERE id > 0")" ] || fail "$1: index scan finds other rows"
    # DuckDB reads short numerics from the scaled value stored beside them, which redo
    # computes again from the logged varlena: it must agree with PostgreSQL's reading
    local duck
    duck=$(cluster_psql -At -c "SET anker.olap_engine = duckdb" -c "SET anker.olap_min_cost = 0" \
        -c "EXPLAIN (COSTS OFF) SELECT sum(n), min(n), max(n), count(*) FILTER (WHERE n > 100) FROM t_anker" \
        -c "SELECT sum(n), min(n), max(n), count(*) FILTER (WHERE n > 100) FROM t_anker")
    grep -q AnkerDuckDB <<<"$duck" || fail "$1: DuckDB did not take the sum: $duck"
    [ "$(tail -1 <<<"$duck")" = "$(q "SELECT sum(n), min(n), max(n), count(*) FILTER (WHERE n > 100) FROM t_heap")" ] \
        || fail "$1: DuckDB reads other numerics: $duck"
    echo "ok: $1: twins identical ($n_a rows), indexes agree, DuckDB reads the same numerics"
}

# An in-place update that aborts (undone eagerly, without WAL) and a later
# in-place update of another column of the same row: redo must put the
# aborted version back first, as the aborting backend did.
aborted_then_updated() { # row id
    cluster_psql >/dev/null <<SQL
BEGIN;
UPDATE t_anker SET note = 'aborted', n = n + 0.5 WHERE id = $1;
UPDATE t_heap SET note = 'aborted', n = n + 0.5 WHERE id = $1;
ROLLBACK;
UPDATE t_anker SET v = v + 1000 WHERE id = $1;
UPDATE t_heap SET v = v + 1000 WHERE id = $1;
SQL
}

run_workload() { # seconds
    cluster_pgbench -n -f "$WORK/twins.sql" --max-tries=1000 -c 2 -T "$1" postgres >/dev/null 2>&1 || true
}

# 1. clean restart
run_workload 5
aborted_then_updated 10
check_twins "before any restart"
cluster_pg_ctl restart
wait_ready
check_twins "after a clean restart"
[ "$(q "SELECT count(*) FROM u_anker")" = 500 ] || fail "unlogged table lost rows in a clean restart"
echo "ok: unlogged table whole after a clean restart"

# loading a large table logs its progress at log_startup_progress_interval
cluster_psql >/dev/null <<'SQL'
CREATE TABLE big_anker (id int, v int) USING anker;
INSERT INTO big_anker SELECT g, 0 FROM generate_series(1, 1000000) g;
-- a 3.2 MB value: one change too large for one WAL record, logged in pieces
CREATE TABLE huge_anker (id int, v text) USING anker;
INSERT INTO huge_anker VALUES (1, 'before'), (2, repeat(md5('x'), 100000)), (3, 'after');
UPDATE huge_anker SET v = v || 'more' WHERE id = 2;
ALTER SYSTEM SET log_startup_progress_interval = '1ms';
SQL
huge=$(q "SELECT string_agg(id || ':' || length(v) || ':' || md5(v), ',' ORDER BY id) FROM huge_anker")
# a table updated in place many times: its log holds every version, memory only
# the ones some snapshot needs, also after the log is replayed (pruning is not logged;
# a few arena pages of slack: the size classes of undo and retired records keep a page each)
q "CREATE TABLE churn_anker (id int PRIMARY KEY, v int) USING anker" >/dev/null
q "INSERT INTO churn_anker SELECT g, 0 FROM generate_series(1, 500) g" >/dev/null
for i in $(seq 1 30); do q "UPDATE churn_anker SET v = v + 1" >/dev/null; done
churn_bytes() { q "SELECT bytes FROM anker.table_storage() WHERE relfilenode = pg_relation_filenode('$1')"; }
cluster_pg_ctl restart
wait_ready
[ "$(q "SELECT sum(v) FROM churn_anker")" = 15000 ] || fail "updated rows came back wrong"
q "CREATE TABLE churn_copy USING anker AS SELECT * FROM churn_anker" >/dev/null
churn_after=$(churn_bytes churn_anker); churn_copy=$(churn_bytes churn_copy)
[ "$churn_after" -le $((churn_copy + 8 * 65536)) ] ||
    fail "replaying 15,000 in-place updates left their versions in memory: $churn_after bytes, a copy of the rows $churn_copy"
q "DROP TABLE churn_anker, churn_copy" >/dev/null
echo "ok: a table updated in place 30 times takes about as much memory after a restart ($churn_after bytes) as a copy of its rows ($churn_copy)"
# The backend that loads big_anker replays its log a page at a time: its
# private memory grows by far less than the log (until 2026-11-29 a load
# read the whole log into memory first).
cluster_psql -Atc "SELECT pg_sleep(0.6) /* loader */" -c "SELECT count(*) FROM big_anker" >"$WORK/load.out" &
loader=$!
sleep 0.3
pid=$(q "SELECT pid FROM pg_stat_activity WHERE query LIKE '%/* loader */%' AND pid <> pg_backend_pid()")
[ -n "$pid" ] || fail "the loading backend was not found"
growth=$(cluster_peak_anon_growth "$pid")
[ -n "$growth" ] || fail "the loading backend was not found"
wait "$loader" || fail "loading a large table failed"
[ "$(tail -n 1 "$WORK/load.out")" = 1000000 ] || fail "a large table lost rows in a clean restart"
log_kb=$(( $(q "SELECT pg_relation_size('big_anker')") / 1024 ))
[ "$growth" -lt $((log_kb / 4)) ] ||
    fail "loading a table with $log_kb kB of log took $growth kB of the backend's memory"
echo "ok: loading $log_kb kB of log took $growth kB of the loading backend's private memory"
[ "$(q "SELECT string_agg(id || ':' || length(v) || ':' || md5(v), ',' ORDER BY id) FROM huge_anker")" = "$huge" ] ||
    fail "a value logged in pieces came back different"
progress=$(cluster_log_tail 100 | grep -E "anker: loading relation file [0-9/]+, elapsed time: [0-9.]+ s, [0-9]+ kB of log replayed \(the file has [0-9]+ kB\), [0-9]+ rows from [0-9]+ changes so far" | tail -1) ||
    fail "no progress lines while a large table loaded"
q "ALTER SYSTEM RESET log_startup_progress_interval" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
q "DROP TABLE big_anker, huge_anker" >/dev/null
echo "ok: a 3.2 MB value logged in pieces is whole after a restart"
echo "ok: loading progress in the server log (${progress##*LOG:  })"

# 2. immediate shutdown after a checkpoint and more work, DDL included:
# rewrites, ADD COLUMN with a default, VACUUM (vacated row ids), VACUUM
# FULL, TRUNCATE, and a table created, filled and dropped (its records are
# redone onto a file that is dropped later in the WAL), SET UNLOGGED and
# SET LOGGED, CREATE DATABASE from a template, SET TABLESPACE
q "CHECKPOINT" >/dev/null
aborted_then_updated 11
run_workload 5
cluster_psql >/dev/null <<'SQL'
CREATE TABLE gone (a int, b text) USING anker;
INSERT INTO gone SELECT g, 'x' FROM generate_series(1, 1000) g;
DROP TABLE gone;
ALTER TABLE t_anker ALTER COLUMN n TYPE numeric(20,4);
ALTER TABLE t_heap ALTER COLUMN n TYPE numeric(20,4);
ALTER TABLE t_anker ADD COLUMN extra int DEFAULT 7;
ALTER TABLE t_heap ADD COLUMN extra int DEFAULT 7;
CREATE TABLE side (a int PRIMARY KEY, b text) USING anker;
INSERT INTO side SELECT g, 'first' FROM generate_series(1, 300) g;
TRUNCATE side;
INSERT INTO side SELECT g, 'second ' || g FROM generate_series(1, 600) g;
DELETE FROM side WHERE a % 3 = 0;
VACUUM side;
INSERT INTO side SELECT g * 3, 'reused' FROM generate_series(1, 50) g;
-- persistence changed both ways (each a rewrite into a new file)
CREATE TABLE relogged (id int PRIMARY KEY, v text) USING anker;
INSERT INTO relogged SELECT g, 'logged ' || g FROM generate_series(1, 1000) g;
ALTER TABLE relogged SET UNLOGGED;
INSERT INTO relogged SELECT g, 'unlogged ' || g FROM generate_series(1001, 2000) g;
ALTER TABLE relogged SET LOGGED;
UPDATE relogged SET v = v || '!' WHERE id % 10 = 0;
CREATE TABLE unlogged_later (id int PRIMARY KEY, v text) USING anker;
INSERT INTO unlogged_later SELECT g, 'x' FROM generate_series(1, 1000) g;
ALTER TABLE unlogged_later SET UNLOGGED;
INSERT INTO unlogged_later VALUES (5000, 'unlogged');
SQL
relogged_before=$(q "SELECT md5(string_agg(r::text, ',' ORDER BY id)) FROM relogged r")
# databases copied from a template that holds an anker table, by both of
# CREATE DATABASE's strategies (WAL_LOG copies the file's pages through WAL,
# FILE_COPY copies the files), one moved to another tablespace, and a table
# moved there; each copy then changed on its own
qd() { cluster_psql -d "$1" -Atc "$2"; }
TS=$(cluster_workdir)/ts
mkdir -p "$TS" && chown postgres "$TS"
q "CREATE TABLESPACE ts LOCATION '$TS'" >/dev/null
q "CREATE DATABASE tmpl" >/dev/null
qd tmpl "CREATE EXTENSION anker; CREATE EXTENSION amcheck;
    CREATE TABLE c (id int PRIMARY KEY, v text) USING anker;
    INSERT INTO c SELECT g, 'v' || g FROM generate_series(1, 20000) g;
    UPDATE c SET v = v || '!' WHERE id % 3 = 0; DELETE FROM c WHERE id % 7 = 0" >/dev/null
q "CREATE DATABASE copy_wal TEMPLATE tmpl STRATEGY wal_log" >/dev/null
q "CREATE DATABASE copy_file TEMPLATE tmpl STRATEGY file_copy" >/dev/null
q "CREATE DATABASE moved TEMPLATE tmpl" >/dev/null
q "ALTER DATABASE moved SET TABLESPACE ts" >/dev/null
for d in copy_wal copy_file moved; do
    qd "$d" "UPDATE c SET v = v || '$d' WHERE id % 5 = 0; INSERT INTO c VALUES (100001, '$d')" >/dev/null
done
qd tmpl "ALTER TABLE c SET TABLESPACE ts" >/dev/null
qd tmpl "UPDATE c SET v = v || '+' WHERE id % 2 = 0" >/dev/null
copies() {
    local d
    for d in tmpl copy_wal copy_file moved; do
        qd "$d" "SELECT '$d', count(*), md5(string_agg(id || v, ',' ORDER BY id)) FROM c"
        qd "$d" "SELECT bt_index_check('c_pkey', true)" >/dev/null || fail "the index of $d's copy disagrees with its table"
    done
}
copies_before=$(copies)
[ "$(echo "$copies_before" | cut -d'|' -f3 | sort -u | wc -l)" = 4 ] || fail "the copies are not each changed on their own: $copies_before"
q "VACUUM FULL t_anker" >/dev/null
q "VACUUM FULL t_heap" >/dev/null
run_workload 3
side_before=$(q "SELECT md5(string_agg(ctid::text || a || b, ',' ORDER BY a)) FROM side")
check_twins "after DDL and more work, before an immediate shutdown"
# files a rolled-back transaction created and changed (undone at the abort);
# recovery replays it (unless a checkpoint begins in the few ms before the
# shutdown) and removes them again
gone_files=$(cluster_psql -At <<'SQL'
BEGIN;
CREATE TABLE gone (a int PRIMARY KEY, b int) USING anker;
INSERT INTO gone VALUES (1, 1), (2, 2);
UPDATE gone SET b = b + 10;
SELECT pg_relation_filepath('gone');
SAVEPOINT s;
TRUNCATE gone;
INSERT INTO gone VALUES (3, 3);
UPDATE gone SET b = 4;
SELECT pg_relation_filepath('gone');
ROLLBACK;
SQL
)
[ "$(echo "$gone_files" | wc -l)" = 2 ] || fail "no file paths of the rolled-back table: $gone_files"
# a commit that writes WAL flushes the abort record before the crash
q "CREATE TABLE after_rollback (a int)" >/dev/null
cluster_pg_ctl -m immediate stop
cluster_pg_ctl start
wait_ready
check_twins "after an immediate shutdown"
[ "$(q "SELECT md5(string_agg(ctid::text || a || b, ',' ORDER BY a)) FROM side")" = "$side_before" ] \
    || fail "a truncated, vacuumed and refilled table changed (or its rows moved) in crash recovery"
q "SELECT bt_index_check('side_pkey', true)" >/dev/null || fail "side's index disagrees after recovery"
echo "ok: rows keep their ctids after recovery (TRUNCATE, VACUUM, reused row ids)"
for f in $gone_files; do
    [ ! -e "$CLUSTER_DATA/$f" ] || fail "crash recovery left $f behind, a file a rolled-back transaction created"
done
echo "ok: crash recovery leaves no file of a rolled-back transaction behind"
[ "$(q "SELECT count(*) FROM u_anker")" = 0 ] || fail "unlogged table not emptied by crash recovery"
[ "$(q "SELECT count(*) FROM u_heap")" = 0 ] || fail "heap's unlogged table not emptied (test setup)"
q "INSERT INTO u_anker VALUES (1, 'again')" >/dev/null
echo "ok: unlogged table empty after a crash, usable again"
[ "$(q "SELECT md5(string_agg(r::text, ',' ORDER BY id)) FROM relogged r")" = "$relogged_before" ] \
    || fail "a table set UNLOGGED and LOGGED again changed in crash recovery"
[ "$(q "SELECT count(*) FROM unlogged_later")" = 0 ] || fail "a table set UNLOGGED was not emptied by crash recovery"
q "SELECT bt_index_check('relogged_pkey', true), bt_index_check('unlogged_later_pkey', true)" >/dev/null \
    || fail "an index of a table whose persistence changed disagrees after recovery"
q "DROP TABLE relogged, unlogged_later" >/dev/null
echo "ok: ALTER TABLE SET UNLOGGED and SET LOGGED: the logged table whole after a crash, the unlogged one empty"
[ "$(copies)" = "$copies_before" ] || fail "databases copied from a template or moved changed in crash recovery: $(copies)"
for d in copy_wal copy_file moved tmpl; do q "DROP DATABASE $d" >/dev/null; done
q "DROP TABLESPACE ts" >/dev/null
echo "ok: databases copied from a template (WAL_LOG and FILE_COPY) or moved to another tablespace, and a table moved there, whole after a crash"

# 3. kill -9 of the postmaster while pgbench runs
run_workload 30 &
bench=$!
sleep 6
cluster_kill_postmaster
wait "$bench" || true
cluster_pg_ctl start
wait_ready
check_twins "after kill -9 of the postmaster during pgbench"

# 4. a prepared transaction survives a crash-restart (backend crash)
cluster_psql >/dev/null <<'SQL'
BEGIN;
UPDATE t_anker SET v = -1 WHERE id = 200000;
UPDATE t_heap SET v = -1 WHERE id = 200000;
INSERT INTO t_anker VALUES (100001, 1, 1, 'prepared', 1);
INSERT INTO t_heap VALUES (100001, 1, 1, 'prepared', 1);
PREPARE TRANSACTION 'twins';
SQL
run_workload 3
cluster_psql -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
sleep 1
victim=$(q "SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%' AND pid <> pg_backend_pid()")
kill -9 "$victim"
wait || true
wait_ready
grep -q "all server processes terminated; reinitializing" <<< "$(cluster_log_tail 60)" || fail "no crash-restart happened"
q "COMMIT PREPARED 'twins'" >/dev/null
check_twins "after a crash-restart with a prepared transaction"
[ "$(q "SELECT v FROM t_anker WHERE id = 200000")" = -1 ] || fail "the prepared update was lost"

# 5. rows an aborted in-place update left behind (ROLLBACK PREPARED and a crash leave
# them: no backend undoes them, readers read through them) keep their committed values
# through CLUSTER, VACUUM FULL, CREATE INDEX [CONCURRENTLY] and ANALYZE (CLUSTER dropped
# them; index builds left them out)
left_behind() {
    cluster_psql >/dev/null <<'SQL'
BEGIN;
UPDATE t_anker SET note = 'rolled back', n = n + 0.5 WHERE id <= 300;
UPDATE t_heap SET note = 'rolled back', n = n + 0.5 WHERE id <= 300;
PREPARE TRANSACTION 'left_behind';
ROLLBACK PREPARED 'left_behind';
SQL
}
index_agrees() { # index, column, when
    q "SELECT bt_index_check('$1', true)" >/dev/null || fail "$3: $1 disagrees with its table"
    local by_index
    by_index=$(cluster_psql -Atc "SET enable_seqscan = off; SET enable_bitmapscan = off; SET anker.enable_scan_node = off; SELECT count(*) FROM t_anker WHERE $2 IS NOT NULL" | tail -1)
    [ "$by_index" = "$(q "SELECT count(*) FROM t_heap WHERE $2 IS NOT NULL")" ] || fail "$3: $1 finds $by_index rows"
}
left_behind
q "CLUSTER t_anker USING t_anker_pkey" >/dev/null
check_twins "CLUSTER over rows a rolled-back prepared transaction updated"
left_behind
q "VACUUM FULL t_anker" >/dev/null
check_twins "VACUUM FULL over such rows"
left_behind
q "CREATE INDEX t_anker_note ON t_anker (note)" >/dev/null
index_agrees t_anker_note note "CREATE INDEX over such rows"
q "DROP INDEX t_anker_note" >/dev/null
left_behind
q "CREATE INDEX CONCURRENTLY t_anker_note ON t_anker (note)" >/dev/null
index_agrees t_anker_note note "CREATE INDEX CONCURRENTLY over such rows"
q "DROP INDEX t_anker_note" >/dev/null
left_behind
live=$(cluster_psql -c "ANALYZE VERBOSE t_anker" 2>&1 | sed -n 's/.*containing \([0-9]*\) live rows.*/\1/p')
[ "$live" = "$(q "SELECT count(*) FROM t_anker")" ] || fail "ANALYZE found $live live rows (those an aborted update left count as dead)"
check_twins "ANALYZE over such rows"
echo "ok: rows a rolled-back prepared transaction updated in place survive CLUSTER, VACUUM FULL, index builds and ANALYZE"

# 6. pg_walinspect names anker's records and describes them
cluster_psql -c "CREATE EXTENSION IF NOT EXISTS pg_walinspect" >/dev/null
start=$(q "SELECT pg_current_wal_insert_lsn()")
cluster_psql >/dev/null <<'SQL'
INSERT INTO t_anker VALUES (300000, 1, 1, 'walinspect', 1);
UPDATE t_anker SET v = 2 WHERE id = 300000;
DELETE FROM t_anker WHERE id = 300000;
SQL
desc=$(q "SELECT string_agg(record_type || ': ' || description, E'\n') FROM pg_get_wal_records_info('$start', pg_current_wal_flush_lsn()) WHERE resource_manager = 'anker'")
for want in "APPEND: rel .* insert row [0-9]+ by [0-9]+, [0-9]+ values" "update row [0-9]+ in place" "modify row [0-9]+: xmax"; do
    echo "$desc" | grep -Eq "$want" || { echo "$desc"; fail "pg_walinspect shows no anker record matching '$want'"; }
done
# (a row change's record leaves its xid out: redo and the description put back the record's)
wrong=$(q "SELECT string_agg(description, '; ') FROM pg_get_wal_records_info('$start', pg_current_wal_flush_lsn()) WHERE resource_manager = 'anker' AND description ~ '( by |xmax )[0-9]' AND substring(description FROM '(?: by |xmax )([0-9]+)') <> xid::text")
[ -z "$wrong" ] || fail "anker records whose changes name another xid than the record's: $wrong"
echo "ok: pg_walinspect describes anker records ($(echo "$desc" | wc -l) for an insert, an update and a delete), each change by its record's xid"

# 7. temporary tables write no WAL
before=$(q "SELECT pg_current_wal_insert_lsn()")
cluster_psql -Atc "CREATE TEMP TABLE tmp (a int, b text) USING anker; INSERT INTO tmp SELECT g, repeat('x', 100) FROM generate_series(1, 20000) g;" >/dev/null
wal=$(q "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$before')")
[ "$wal" -lt 200000 ] || fail "a temporary table wrote $wal bytes of WAL"
echo "ok: temporary table: $wal bytes of WAL for 2 MB of rows (catalog only)"

# 8. pg_dump / pg_restore round trip
dump="$WORK/db.dump"
cluster_run "$PG_BINDIR/pg_dump" -Fc -f "$dump" postgres
cluster_psql -c "CREATE DATABASE restored TEMPLATE template0" >/dev/null
cluster_run "$PG_BINDIR/pg_restore" -d restored --no-owner --exit-on-error "$dump" 2>"$WORK/restore.err" \
    || { cat "$WORK/restore.err"; fail "pg_restore failed"; }
for tbl in t_anker t_heap; do
    a=$(q "SELECT md5(string_agg(t::text, ',' ORDER BY id)) FROM $tbl t")
    b=$(cluster_psql -d restored -Atc "SELECT md5(string_agg(t::text, ',' ORDER BY id)) FROM $tbl t")
    [ "$a" = "$b" ] || fail "pg_restore changed $tbl"
done
[ "$(cluster_psql -d restored -Atc "SELECT amname FROM pg_class c JOIN pg_am m ON m.oid = c.relam WHERE relname = 't_anker'")" = anker ] \
    || fail "pg_restore lost the access method"
cluster_psql -d restored -Atc "SELECT bt_index_check('t_anker_pkey', true)" >/dev/null || fail "restored index disagrees"
echo "ok: pg_dump / pg_restore round trip"
# 9. a damaged relation file is refused, not loaded in part
cluster_psql >/dev/null <<'SQL'
CREATE TABLE dmg (a int, b text) USING anker;
INSERT INTO dmg SELECT g, repeat('d', 40) FROM generate_series(1, 2000) g;
SQL
file="$CLUSTER_DATA/$(q "SELECT pg_relation_filepath('dmg')")"
cluster_pg_ctl stop -m fast
# a byte in the middle of the log's second page (inside an entry), every bit flipped (writing
# a fixed value changed nothing when the byte already had it)
at=$((2 * 8192 + 4000))
byte=$(od -An -tu1 -j "$at" -N1 "$file" | tr -d ' ')
printf "\\$(printf '%03o' $((byte ^ 255)))" | dd of="$file" bs=1 seek="$at" conv=notrunc status=none
[ "$(od -An -tu1 -j "$at" -N1 "$file" | tr -d ' ')" = $((byte ^ 255)) ] || fail "the damage was not written"
cluster_pg_ctl start
wait_ready
err=$(cluster_psql -Atc "SELECT count(*) FROM dmg" 2>&1 || true)
grep -q "cannot load relation file .*: its log is damaged: block 2 does not match its checksum" <<< "$err" || fail "a damaged log was not refused: $err"
[ "$(q "SELECT count(*) FROM t_anker")" -gt 0 ] || fail "other tables suffered"
echo "ok: a damaged log is refused with a clear error ($(echo "$err" | head -1 | cut -c1-110)...)"
echo "durability: all checks passed"
