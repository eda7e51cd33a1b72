#!/usr/bin/env bash
# Images keep an anker table's relation file proportional to its data
# (docs/durability.md, "Images"): compactions run while writers go on,
# every row keeps its row id (ctid) and value, the file stops growing under
# a steady update load, a crash after compactions recovers the table from
# image plus log (a heap twin is the oracle), VACUUM compacts by itself once
# the log outgrows the image (autovacuum too, for a table updated only in
# place, also when its first report was lost; its VACUUM is logged as
# heap's, and VACUUM (VERBOSE) reports), an image is paced as VACUUM
# is and can be cancelled, and pg_walinspect shows the image records (and
# the recovery-conflict horizons VACUUM and images write); VACUUM shows its
# progress in pg_stat_progress_vacuum and is held back by vacuum_cost_delay.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '1GB'" "lc_messages = 'C'" \
    "autovacuum_naptime = 1" >/dev/null
q() { cluster_psql -Atc "$1"; }
fail() { echo "FAIL: $*"; cluster_log_tail 30; exit 1; }
cluster_psql -c "CREATE EXTENSION anker" -c "CREATE EXTENSION amcheck" -c "CREATE EXTENSION pg_walinspect" >/dev/null
for am in anker heap; do
    cluster_psql >/dev/null <<SQL
CREATE TABLE c_$am (id int PRIMARY KEY, grp int, v bigint, note text) USING $am WITH (autovacuum_enabled = false);
INSERT INTO c_$am SELECT g, g % 10, g, repeat('n', g % 50) FROM generate_series(1, 20000) g;
SQL
done
WORK=$(cluster_workdir)
cat > "$WORK/twins.sql" <<'SQL'
\set id random(1, 20000)
\set id2 2 * random(1, 15000) - :client_id
\set d random(1, 9)
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE c_anker SET v = v + :d, note = left(note || :d, 60) WHERE id = :id;
UPDATE c_heap SET v = v + :d, note = left(note || :d, 60) WHERE id = :id;
UPDATE c_anker SET id = id + 100000 WHERE id = :id2 AND :d = 5 AND NOT EXISTS (SELECT FROM c_anker WHERE id = :id2 + 100000);
UPDATE c_heap SET id = id + 100000 WHERE id = :id2 AND :d = 5 AND NOT EXISTS (SELECT FROM c_heap WHERE id = :id2 + 100000);
DELETE FROM c_anker WHERE id = :id2 AND :d = 7;
DELETE FROM c_heap WHERE id = :id2 AND :d = 7;
INSERT INTO c_anker VALUES (:id2, 0, :d, 'new') ON CONFLICT (id) DO UPDATE SET grp = c_anker.grp + 1;
INSERT INTO c_heap VALUES (:id2, 0, :d, 'new') ON CONFLICT (id) DO UPDATE SET grp = c_heap.grp + 1;
COMMIT;
SQL
chown postgres "$WORK/twins.sql"

check_twins() { # when
    local diff
    diff=$(q "SELECT count(*) FROM ((TABLE c_anker EXCEPT ALL TABLE c_heap) UNION ALL (TABLE c_heap EXCEPT ALL TABLE c_anker)) x")
    [ "$diff" = 0 ] || fail "$1: twins differ in $diff rows"
    q "SELECT bt_index_check('c_anker_pkey', true)" >/dev/null || fail "$1: the index disagrees with its table"
    echo "ok: $1: twins identical ($(q "SELECT count(*) FROM c_anker") rows), index agrees"
}
ctids() { q "SELECT md5(string_agg(ctid::text || ':' || id || ':' || v || ':' || note, ',' ORDER BY ctid)) FROM c_anker"; }

# 1. compactions while writers go on; the file stops growing
start=$(q "SELECT pg_current_wal_insert_lsn()")
sizes=()
for round in 1 2 3 4 5 6; do
    cluster_pgbench -n -f "$WORK/twins.sql" --max-tries=1000 -c 2 -T 4 postgres >/dev/null 2>&1 &
    bench=$!
    sleep 1
    out=$(q "SELECT rows, image_bytes, log_bytes_before, blocks_freed FROM anker.compact('c_anker')")
    wait "$bench" || fail "pgbench failed"
    # dead versions leave (their row ids are reused), as heap's pages are
    q "VACUUM c_anker" >/dev/null
    q "VACUUM c_heap" >/dev/null
    sizes+=("$(q "SELECT pg_relation_size('c_anker')")")
    echo "round $round: compaction rows|image bytes|log bytes before|blocks freed = $out; file ${sizes[-1]} bytes"
done
check_twins "after compactions under load"
# After the first rounds the file reuses freed blocks: it may not keep
# growing with the history of changes.
[ "${sizes[5]}" -le $(( sizes[2] * 3 / 2 )) ] || fail "the file keeps growing: ${sizes[*]}"
q "SELECT anker.compact('c_anker')" >/dev/null
image=$(q "SELECT image_bytes FROM anker.compact('c_anker')")
file=$(q "SELECT pg_relation_size('c_anker')")
[ "$file" -le $(( image * 4 + 1048576 )) ] || fail "file of $file bytes for an image of $image bytes"
echo "ok: file ${sizes[*]} bytes over the rounds; $file bytes for an image of $image bytes (heap twin: $(q "SELECT pg_relation_size('c_heap')") bytes)"
kinds=$(q "SELECT string_agg(DISTINCT record_type, ',' ORDER BY record_type) FROM pg_get_wal_records_info('$start', pg_current_wal_flush_lsn()) WHERE resource_manager = 'anker'")
# (HORIZON: VACUUM vacated rows and images left out pruned versions, which
# a hot standby's queries may still need)
[ "$kinds" = "APPEND,HORIZON,IMAGE,SWITCH" ] || fail "anker record kinds in the WAL: $kinds"
q "SELECT description FROM pg_get_wal_records_info('$start', pg_current_wal_flush_lsn()) WHERE resource_manager = 'anker' AND record_type = 'HORIZON'" |
    grep -Eq "^rel [0-9]+/[0-9]+/[0-9]+: conflicts with snapshots that may see xid [0-9]+ as running$" ||
    fail "pg_walinspect describes no HORIZON record as expected"
echo "ok: pg_walinspect shows anker records $kinds"

# 2. a crash after compactions and more changes
cluster_pgbench -n -f "$WORK/twins.sql" --max-tries=1000 -c 2 -T 3 postgres >/dev/null 2>&1
before=$(ctids)
cluster_run "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DATA" -m immediate -w stop >/dev/null
cluster_run "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DATA" -l "$CLUSTER_LOG" -w start >/dev/null
check_twins "after a crash"
[ "$(ctids)" = "$before" ] || fail "rows moved or changed in recovery from image plus log"
echo "ok: every row under its ctid after recovery from image plus log"

# 2b. an image is written at VACUUM's cost-based pace (autovacuum's by
# default; anker.compact's and a manual VACUUM's by vacuum_cost_delay), and
# its delay points take interrupts: an image cut short by a statement
# timeout leaves the table as it was, and the next one frees its blocks.
# (Unpaced, this image takes milliseconds; at this pace, half a minute.)
# An image first, so that the free chain holds the chain it replaced (an
# image and more): the next image then fits in freed blocks unless the
# one cut short leaked its own. (Without it the check depended on how much
# log the workload above had written into the free chain, and so on the
# machine's speed.)
q "SELECT anker.compact('c_anker')" >/dev/null
cut=$(cluster_psql -At 2>&1 <<'SQL' || true
SET vacuum_cost_delay = 100;
SET vacuum_cost_limit = 1;
SET statement_timeout = '1s';
SELECT anker.compact('c_anker');
SQL
)
case $cut in *"canceling statement due to statement timeout"*) ;; *) fail "a paced image was not cut short by a timeout: $cut" ;; esac
check_twins "after an image cut short"
[ "$(ctids)" = "$before" ] || fail "rows moved or changed under an image cut short"
size=$(q "SELECT pg_relation_size('c_anker')")
q "SELECT anker.compact('c_anker')" >/dev/null
cluster_run "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DATA" -w -m fast restart -l "$CLUSTER_LOG" >/dev/null
check_twins "after the next image and a restart"
[ "$(ctids)" = "$before" ] || fail "rows moved or changed after an image cut short, the next one and a restart"
[ "$(q "SELECT pg_relation_size('c_anker')")" -le "$size" ] || fail "the next image did not reuse the blocks of the one cut short"
echo "ok: an image paced by vacuum_cost_delay is cut short by a statement timeout; the next one frees its blocks"

# 3. VACUUM compacts once the log outgrows the image
cluster_psql >/dev/null <<'SQL'
CREATE TABLE grow (id int PRIMARY KEY, v int) USING anker WITH (autovacuum_enabled = false);
INSERT INTO grow SELECT g, 0 FROM generate_series(1, 10000) g;
SQL
for _ in 1 2 3 4 5 6 7 8 9 10; do q "UPDATE grow SET v = v + 1" >/dev/null; done
q "VACUUM grow" >/dev/null
grep -q 'anker: wrote an image of "grow"' <<< "$(cluster_log_tail 20)" || fail "VACUUM wrote no image of a table whose log outgrew it"
sum=$(q "SELECT sum(v) FROM grow")
cluster_run "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DATA" -w -m fast restart -l "$CLUSTER_LOG" >/dev/null
[ "$(q "SELECT sum(v) FROM grow")" = "$sum" ] || fail "the vacuumed table changed over a restart"
echo "ok: VACUUM wrote an image when due; the table is whole after a restart"
# 3b. ... but not while the log is mostly inserts of rows the table still
# holds: an image would only copy the table. The mark is what an image of the
# table would take now (the last image's bytes per row times the rows now).
images_of() { grep -c "anker: wrote an image of \"$1\"" "$CLUSTER_LOG" || true; }
cluster_psql >/dev/null <<'SQL'
CREATE TABLE appendonly (id int PRIMARY KEY, pad text) USING anker WITH (autovacuum_enabled = false);
INSERT INTO appendonly SELECT g, repeat('a', 40) FROM generate_series(1, 40000) g;
VACUUM appendonly;
SQL
[ "$(images_of appendonly)" = 1 ] || fail "VACUUM wrote no first image of a loaded table"
q "INSERT INTO appendonly SELECT g, repeat('a', 40) FROM generate_series(40001, 120000) g" >/dev/null
# (each VACUUM in a checkpoint cycle of its own, where the mark is not doubled: see 3c)
q "CHECKPOINT" >/dev/null
q "VACUUM appendonly" >/dev/null
[ "$(images_of appendonly)" = 1 ] || fail "VACUUM imaged a table whose log since its image is inserts of rows it holds"
q "UPDATE appendonly SET pad = repeat('b', 40)" >/dev/null
q "UPDATE appendonly SET pad = repeat('c', 40)" >/dev/null
q "CHECKPOINT" >/dev/null
q "VACUUM appendonly" >/dev/null
[ "$(images_of appendonly)" = 2 ] || fail "VACUUM wrote no image once updates made the log outgrow the table"
[ "$(q "SELECT count(*) FILTER (WHERE pad = repeat('c', 40)) FROM appendonly")" = 120000 ] || fail "appendonly changed"
echo "ok: a log of inserts of the table's rows is not imaged again; one of updates is"
# 3c. a table imaged since the last checkpoint began is imaged again only
# when its log reaches twice the mark (images follow checkpoints, as heap's
# full-page images do): count the updates of every row it takes before
# VACUUM writes an image, in the cycle of an image, then in a new cycle.
# Each count starts right after a CHECKPOINT, which also restarts the
# timer of the next one (minutes away), so no checkpoint falls in a count.
cluster_psql >/dev/null <<'SQL'
CREATE TABLE cycles (id int PRIMARY KEY, v int, pad text) USING anker WITH (autovacuum_enabled = false);
INSERT INTO cycles SELECT g, 0, repeat('p', 40) FROM generate_series(1, 20000) g;
SQL
updates_until_imaged() { # -> updates of every row until VACUUM imaged cycles
    local before n
    before=$(images_of cycles)
    for n in $(seq 1 40); do
        q "UPDATE cycles SET v = v + 1" >/dev/null
        q "VACUUM cycles" >/dev/null
        [ "$(images_of cycles)" = "$before" ] || { echo "$n"; return; }
    done
    fail "40 updates of every row of cycles and no image"
}
mark() { q "SELECT image_mark_bytes FROM anker.table_storage() WHERE relfilenode = pg_relation_filenode('cycles')"; }
q "CHECKPOINT" >/dev/null
q "SELECT count(*) FROM anker.compact('cycles')" >/dev/null
mark_same=$(mark)
q "CHECKPOINT" >/dev/null
mark_new=$(mark)
[ "$mark_same" = $((2 * mark_new)) ] || fail "image mark $mark_same in the cycle of the image, $mark_new after a checkpoint"
q "SELECT count(*) FROM anker.compact('cycles')" >/dev/null
same_cycle=$(updates_until_imaged)
q "CHECKPOINT" >/dev/null
new_cycle=$(updates_until_imaged)
# (about twice as many; 1.5 times leaves room for images of slightly different sizes)
[ $((2 * same_cycle)) -ge $((3 * new_cycle)) ] || fail "imaged after $same_cycle updates in the cycle of the last image, $new_cycle in a new one (want about twice as many)"
[ "$(q "SELECT sum(v) FROM cycles")" = $((20000 * (same_cycle + new_cycle))) ] || fail "cycles changed"
echo "ok: image mark $mark_same bytes in the cycle of an image, $mark_new after a checkpoint; imaged again after $same_cycle updates of every row in the cycle of its last image, $new_cycle in a new cycle"
# 4. autovacuum compacts a table that is only ever updated in place (it has
# no dead tuples of its own to draw autovacuum)
cluster_psql >/dev/null <<'SQL'
CREATE TABLE inplace (id int PRIMARY KEY, v int, pad text) USING anker
    WITH (autovacuum_vacuum_insert_threshold = -1,  -- inserts alone must not draw autovacuum
          log_autovacuum_min_duration = 0);
INSERT INTO inplace SELECT g, 0, repeat('p', 20) FROM generate_series(1, 20000) g;
ANALYZE inplace;
SQL
imaged() { grep -q "anker: wrote an image of \"$1\"" <<< "$(cluster_log_tail 200)"; }
imaged_within_a_minute() { # table
    for _ in $(seq 1 60); do
        imaged "$1" && return 0
        sleep 1
    done
    imaged "$1"
}
for _ in $(seq 1 12); do q "UPDATE inplace SET v = v + 1" >/dev/null; done
imaged_within_a_minute inplace || fail "autovacuum did not compact a table updated in place"
[ "$(q "SELECT sum(v) FROM inplace")" = 240000 ] || fail "inplace changed"
echo "ok: autovacuum compacted a table updated only in place"
# ... and logged that VACUUM as heap's are (log_autovacuum_min_duration), and
# VACUUM (VERBOSE) reports as heap's does
logged_vacuum() { grep -q 'system usage: CPU: user: ' <<< "$(cluster_log_tail 200 | grep -A3 'automatic vacuum of table "postgres.public.inplace": index scans: ')"; }
for _ in $(seq 1 10); do logged_vacuum && break; sleep 1; done
logged_vacuum || fail "autovacuum's VACUUM of inplace was not logged"
verbose=$(cluster_psql -c "VACUUM (VERBOSE) inplace" 2>&1)
grep -q '^INFO:  vacuuming "postgres.public.inplace"$' <<< "$verbose" || fail "VACUUM (VERBOSE) said: $verbose"
grep -q '^INFO:  finished vacuuming "postgres.public.inplace": index scans: 0$' <<< "$verbose" || fail "VACUUM (VERBOSE) said: $verbose"
grep -q '^rows: 0 removed, 20000 remain, ' <<< "$verbose" || fail "VACUUM (VERBOSE) said: $verbose"
echo "ok: autovacuum's VACUUM logged, VACUUM (VERBOSE) reports"
# 5. a report autovacuum never acted on is not the last: here autovacuum is
# off for the table when the log passes the mark, and the report is lost with
# the table's statistics (as in a crash); the log's further growth reports again
cluster_psql >/dev/null <<'SQL'
CREATE TABLE renudge (id int PRIMARY KEY, v int, pad text) USING anker
    WITH (autovacuum_enabled = false, autovacuum_vacuum_insert_threshold = -1);
INSERT INTO renudge SELECT g, 0, repeat('p', 20) FROM generate_series(1, 20000) g;
ANALYZE renudge;
SQL
for _ in $(seq 1 6); do q "UPDATE renudge SET v = v + 1" >/dev/null; done
q "SELECT pg_stat_reset_single_table_counters('renudge'::regclass)" >/dev/null
q "ALTER TABLE renudge SET (autovacuum_enabled = true)" >/dev/null
imaged renudge && fail "renudge was compacted too early for this test"
for _ in $(seq 1 6); do q "UPDATE renudge SET v = v + 1" >/dev/null; done
imaged_within_a_minute renudge || fail "autovacuum never compacted a table whose first report was lost"
[ "$(q "SELECT sum(v) FROM renudge")" = 240000 ] || fail "renudge changed"
echo "ok: autovacuum compacted a table whose first report was lost"
# 6. VACUUM shows its progress in pg_stat_progress_vacuum, as heap's does, and
# vacuum_cost_delay holds it back (a page hit for each 8 kB of stamps it
# reads: 8 every 4096 rows, at a limit of 1 a 40 ms sleep each, about 4 s
# over these 1,563 blocks)
q "CREATE TABLE prog (id int PRIMARY KEY, v int) USING anker WITH (autovacuum_enabled = false);
   INSERT INTO prog SELECT g, g FROM generate_series(1, 400000) g; DELETE FROM prog WHERE id % 2 = 0" >/dev/null
cluster_psql -c "SET vacuum_cost_delay = '10ms'" -c "SET vacuum_cost_limit = 1" -c "VACUUM prog" >/dev/null &
vacuum_pid=$!
seen=
for _ in $(seq 1 200); do
    p=$(q "SELECT phase || ',' || heap_blks_total || ',' || heap_blks_scanned || ',' || max_dead_tuples
             FROM pg_stat_progress_vacuum WHERE relid = 'prog'::regclass")
    IFS=, read -r phase total scanned max_dead <<<"${p:-,,,}"
    if [ "$phase" = "scanning heap" ] && [ "$total" = 1563 ] && [ "$max_dead" = 400000 ] && [ "$scanned" -gt 0 ] && [ "$scanned" -lt 1563 ]; then
        seen=$p
        break
    fi
    sleep 0.05
done
wait "$vacuum_pid" || fail "VACUUM prog failed"
[ -n "$seen" ] || fail "pg_stat_progress_vacuum never showed VACUUM prog scanning (last: '$p')"
[ -z "$(q "SELECT relid FROM pg_stat_progress_vacuum")" ] || fail "pg_stat_progress_vacuum still shows a VACUUM"
[ "$(q "SELECT count(*) FROM prog")" = 200000 ] || fail "VACUUM prog lost rows"
echo "ok: pg_stat_progress_vacuum showed VACUUM prog scanning ($seen)"
echo "compaction: all checks passed"
