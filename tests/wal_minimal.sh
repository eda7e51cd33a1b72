#!/usr/bin/env bash
# anker tables under `wal_level = minimal`, where PostgreSQL skips WAL for a
# relation file created in the same transaction and, at commit, either
# WAL-logs its pages whole or fsyncs it (below `wal_skip_threshold` the
# first, above it the second). Bulk loads use that path: CREATE TABLE and
# COPY, CREATE TABLE AS, TRUNCATE and refill, ALTER TABLE rewrites. anker
# skips its records there too; this checks that the large loads write no
# more WAL than heap's and that nothing is lost: each case gets a heap twin,
# and after a kill -9 of the postmaster and crash recovery the twins must be
# identical and every index must agree with its table; tables imaged in their creating
# transaction must come back as they were. Small files (WAL-logged at commit) and
# large ones (fsynced at commit) are both covered. Also run with data
# checksums, which verify every page read back.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
[ "${KEEP:-0}" = 1 ] && export CLUSTER_KEEP=1
CLUSTER_INITDB_ARGS=--data-checksums cluster_start "shared_preload_libraries = 'anker'" "lc_messages = 'C'" \
    "wal_level = minimal" "max_wal_senders = 0" "wal_skip_threshold = '256kB'" "checkpoint_timeout = 30min" >/dev/null
q() { cluster_psql -Atc "$1"; }
fail() { echo "FAIL: $*"; cluster_log_tail 30; exit 1; }
wait_ready() { cluster_wait_ready || fail "server did not come back"; }
[ "$(q "SHOW wal_level")" = minimal ] || fail "wal_level is not minimal"
[ "$(q "SHOW data_checksums")" = on ] || fail "data checksums are off"
q "CREATE EXTENSION anker; CREATE EXTENSION amcheck" >/dev/null

# Each case as SQL with @AM@ for the access method and @T@ for the table's
# name; run once per engine.
cases=(
    # created and filled in one transaction, small (WAL-logged whole at commit)
    "small|BEGIN; CREATE TABLE @T@ (id int PRIMARY KEY, v text) USING @AM@;
     INSERT INTO @T@ SELECT g, 'v' || g FROM generate_series(1, 500) g; COMMIT;"
    # created and filled by COPY in one transaction, large (fsynced at commit)
    "copied|BEGIN; CREATE TABLE @T@ (id int PRIMARY KEY, v text) USING @AM@;
     COPY @T@ FROM PROGRAM 'seq 1 60000 | sed \"s/.*/&\t&-copied/\"'; COMMIT;"
    # CREATE TABLE AS, large
    "ctas|CREATE TABLE @T@ USING @AM@ AS SELECT g AS id, repeat('x', g % 50) AS v FROM generate_series(1, 60000) g;
     ALTER TABLE @T@ ADD PRIMARY KEY (id);"
    # an existing table truncated and refilled in one transaction (a new relation file)
    "refilled|CREATE TABLE @T@ (id int PRIMARY KEY, v text) USING @AM@;
     INSERT INTO @T@ SELECT g, 'old' FROM generate_series(1, 1000) g;
     BEGIN; TRUNCATE @T@; INSERT INTO @T@ SELECT g, 'new' || g FROM generate_series(1, 40000) g;
     UPDATE @T@ SET v = v || '!' WHERE id % 7 = 0; DELETE FROM @T@ WHERE id % 11 = 0; COMMIT;"
    # created in one transaction, truncated in the same one (TRUNCATE in place, which logs no
    # truncation under minimal) and refilled with fewer rows; small at commit, then large
    "truncated_new|BEGIN; CREATE TABLE @T@ (id int PRIMARY KEY, v text) USING @AM@;
     INSERT INTO @T@ SELECT g, 'a' FROM generate_series(1, 40000) g; TRUNCATE @T@;
     INSERT INTO @T@ SELECT g, 'b' || g FROM generate_series(1, 3000) g; COMMIT;"
    "truncated_new_large|BEGIN; CREATE TABLE @T@ (id int PRIMARY KEY, v text) USING @AM@;
     INSERT INTO @T@ SELECT g, 'a' FROM generate_series(1, 90000) g; TRUNCATE @T@;
     INSERT INTO @T@ SELECT g, 'b' || g FROM generate_series(1, 30000) g; COMMIT;"
    # a rewrite (ALTER COLUMN TYPE) of a table with rows, then changes in the same transaction
    "rewritten|CREATE TABLE @T@ (id int PRIMARY KEY, v text, n int) USING @AM@;
     INSERT INTO @T@ SELECT g, 'r' || g, g FROM generate_series(1, 30000) g;
     BEGIN; ALTER TABLE @T@ ALTER COLUMN n TYPE bigint; UPDATE @T@ SET n = n * 3 WHERE id % 5 = 0;
     INSERT INTO @T@ VALUES (100000, 'after the rewrite', 1); COMMIT;"
    # created and filled, with a subtransaction's changes undone before the commit (the undo
    # is written to the log outside any statement on the table)
    "savepoint|BEGIN; CREATE TABLE @T@ (id int PRIMARY KEY, v text) USING @AM@;
     INSERT INTO @T@ SELECT g, 's' || g FROM generate_series(1, 40000) g; SAVEPOINT s;
     UPDATE @T@ SET v = 'undone' WHERE id % 3 = 0; DELETE FROM @T@ WHERE id % 5 = 0;
     INSERT INTO @T@ SELECT g, 'undone' FROM generate_series(40001, 41000) g; ROLLBACK TO s;
     UPDATE @T@ SET v = v || '!' WHERE id % 4 = 0; COMMIT;"
    # refilled, updated by a released subtransaction, rolled back: the abort's undo is written
    # (and logged) after the abort record that drops the new file
    "undone|CREATE TABLE @T@ (id int PRIMARY KEY, v text) USING @AM@;
     INSERT INTO @T@ SELECT g, 'kept' FROM generate_series(1, 100) g;
     BEGIN; TRUNCATE @T@; INSERT INTO @T@ SELECT g, 'gone' FROM generate_series(1, 20000) g;
     SAVEPOINT s; UPDATE @T@ SET v = 'undone' WHERE id % 2 = 0; RELEASE s; ROLLBACK;
     UPDATE @T@ SET v = 'kept!' WHERE id % 10 = 0;"
    # created and filled, then rolled back: nothing may come back
    "rolled_back|CREATE TABLE @T@ (id int PRIMARY KEY, v text) USING @AM@;
     BEGIN; TRUNCATE @T@; INSERT INTO @T@ SELECT g, 'gone' FROM generate_series(1, 20000) g; ROLLBACK;
     INSERT INTO @T@ VALUES (1, 'kept');"
)
declare -A wal
for c in "${cases[@]}"; do
    name=${c%%|*}
    sql=${c#*|}
    for am in anker heap; do
        s=${sql//@AM@/$am}
        before=$(q "SELECT pg_current_wal_insert_lsn()")
        # (from standard input: each statement in a transaction of its own unless in BEGIN … COMMIT)
        cluster_psql -q <<<"${s//@T@/${name}_$am}" >/dev/null || fail "$name on $am"
        wal[${name}_$am]=$(q "SELECT pg_current_wal_insert_lsn() - '$before'")
    done
done
# A file created in the loading transaction and fsynced at its commit (the
# large cases) needs no WAL for its contents, and anker writes none for it,
# as heap: a few kB of catalog and commit records, not the table's size.
for name in copied ctas truncated_new_large; do
    [ "${wal[${name}_anker]}" -le $(( ${wal[${name}_heap]} * 2 + 65536 )) ] ||
        fail "$name: anker wrote ${wal[${name}_anker]} bytes of WAL for a bulk load, heap ${wal[${name}_heap]}"
done
echo "ok: bulk loads into files created in their transaction write no table WAL: anker/heap bytes copied ${wal[copied_anker]}/${wal[copied_heap]}, ctas ${wal[ctas_anker]}/${wal[ctas_heap]}, truncated_new_large ${wal[truncated_new_large_anker]}/${wal[truncated_new_large_heap]}"
# Later work on the same tables, logged as usual, so that recovery replays
# both kinds.
for am in anker heap; do
    q "UPDATE small_$am SET v = v || '+' WHERE id <= 100; DELETE FROM copied_$am WHERE id % 13 = 0" >/dev/null
done

check() { # when
    local c name diff n idx
    for c in "${cases[@]}"; do
        name=${c%%|*}
        diff=$(q "SELECT count(*) FROM ((TABLE ${name}_anker EXCEPT ALL TABLE ${name}_heap) UNION ALL (TABLE ${name}_heap EXCEPT ALL TABLE ${name}_anker)) x")
        n=$(q "SELECT count(*) FROM ${name}_anker")
        [ "$diff" = 0 ] || fail "$1: ${name}: the twins differ by $diff rows"
        for idx in $(q "SELECT indexrelid::regclass FROM pg_index WHERE indrelid = '${name}_anker'::regclass"); do
            q "SELECT bt_index_check('$idx', true)" >/dev/null || fail "$1: ${name}: index $idx disagrees with its table"
        done
        [ "$(q "SELECT count(*) FROM ${name}_anker WHERE id > 0")" = "$n" ] || fail "$1: ${name}: a Seq Scan and a count disagree"
    done
}
# Images written in the creating transaction (anker alone: no twin), small and large at commit
for n in 500 50000; do
    cluster_psql -q >/dev/null <<SQL || fail "imaged_$n"
BEGIN; CREATE TABLE imaged_$n (id int PRIMARY KEY, v text) USING anker;
INSERT INTO imaged_$n SELECT g, 'v' || g FROM generate_series(1, $n) g;
UPDATE imaged_$n SET v = v || '!' WHERE id % 2 = 0; SELECT anker.compact('imaged_$n');
DELETE FROM imaged_$n WHERE id % 7 = 0; SELECT anker.compact('imaged_$n');
INSERT INTO imaged_$n VALUES (-1, 'after the images'); COMMIT;
UPDATE imaged_$n SET v = 'later' WHERE id % 5 = 0;
SQL
done
imaged() { q "SELECT (SELECT count(*) || md5(string_agg(i::text, ',' ORDER BY id)) FROM imaged_500 i) || (SELECT count(*) || md5(string_agg(i::text, ',' ORDER BY id)) FROM imaged_50000 i)"; }
imaged_before=$(imaged)
check "before the crash"
echo "ok: bulk loads under wal_level = minimal, before a crash: twins identical"

cluster_kill_postmaster
cluster_pg_ctl start
wait_ready
check "after kill -9 of the postmaster"
[ "$(imaged)" = "$imaged_before" ] || fail "tables imaged in their creating transaction changed in the crash"
q "SELECT bt_index_check('imaged_500_pkey', true), bt_index_check('imaged_50000_pkey', true)" >/dev/null || fail "imaged: an index disagrees"
echo "ok: after kill -9 of the postmaster and crash recovery: twins identical, indexes agree ($(q "SELECT count(*) FROM copied_anker") rows copied, $(q "SELECT count(*) FROM refilled_anker") refilled)"
cluster_pg_ctl restart -m fast
wait_ready
check "after a clean restart"
echo "ok: after a clean restart: twins identical"

# Loads racing logged transfers and a crash: while pgbench moves money
# between accounts of a logged table (the total never changes), sessions
# create and fill tables in one transaction each, the last of them killed
# with the postmaster at a random moment. After recovery the total holds,
# each committed load is whole, and the one in flight is whole or absent.
q "CREATE TABLE acct (id int PRIMARY KEY, balance bigint, note text) USING anker;
   INSERT INTO acct SELECT g, 1000, 'account ' || g FROM generate_series(1, 20000) g" >/dev/null
WORK=$(cluster_workdir)
cp "$ROOT/tests/transfer.sql" "$WORK/"
chmod 644 "$WORK/transfer.sql"
for round in 1 2 3; do
    cluster_pgbench -n -c 2 -T 60 -f "$WORK/transfer.sql" postgres >/dev/null 2>&1 &
    transfers=$!
    for k in 1 2 3; do
        q "BEGIN; CREATE TABLE load_${round}_$k (id int PRIMARY KEY, v text) USING anker;
           INSERT INTO load_${round}_$k SELECT g, 'v' || g FROM generate_series(1, 20000 * $k) g;
           UPDATE load_${round}_$k SET v = 'u' WHERE id % 3 = 0; COMMIT" >/dev/null || fail "load_${round}_$k"
    done
    q "BEGIN; CREATE TABLE inflight_$round (id int PRIMARY KEY, v text) USING anker;
       INSERT INTO inflight_$round SELECT g, 'x' FROM generate_series(1, 1000000) g; COMMIT" >/dev/null 2>&1 &
    inflight=$!
    pause="$((RANDOM % 3)).$((RANDOM % 9 + 1))"
    sleep "$pause"
    cluster_kill_postmaster
    wait "$transfers" "$inflight" 2>/dev/null || true
    cluster_pg_ctl start
    wait_ready
    [ "$(q "SELECT sum(balance) || ' ' || count(*) FROM acct")" = "20000000 20000" ] || fail "round $round: the transfers' total changed"
    for k in 1 2 3; do
        [ "$(q "SELECT count(*) || ' ' || count(*) FILTER (WHERE v = 'u') FROM load_${round}_$k")" = "$((20000 * k)) $((20000 * k / 3))" ] ||
            fail "round $round: committed load_${round}_$k is not whole"
        q "SELECT bt_index_check('load_${round}_${k}_pkey', true)" >/dev/null || fail "round $round: load_${round}_$k's index disagrees"
    done
    n=$(q "SELECT count(*) FROM pg_class WHERE relname = 'inflight_$round'")
    if [ "$n" = 1 ]; then
        [ "$(q "SELECT count(*) FROM inflight_$round")" = 1000000 ] || fail "round $round: the load in flight came back in part"
        state="committed"
    else
        state="gone"
    fi
    q "SELECT bt_index_check('acct_pkey', true)" >/dev/null || fail "round $round: acct's index disagrees"
    echo "ok: round $round: loads racing transfers and a crash: total kept, committed loads whole, the one in flight $state (crash after ${pause} s)"
done
echo "wal_minimal: all checks passed"
