#!/usr/bin/env bash
# Aborted in-place updates put back while VACUUM runs beside them: no
# committed row may vanish. Two races, each for a few seconds on 20,000
# rows, every one updated in place by every transaction:
#   1. rollbacks (the aborting backend puts its updates back at once)
#      against back-to-back VACUUMs: a row whose updater aborted after
#      VACUUM had looked for updates to put back was judged by its aborted
#      version, and vacated with the committed one below it;
#   2. ROLLBACK PREPARED (nobody puts the updates back at once) against
#      writers and VACUUM, which race to put the same updates back;
#   3. twins: two clients make the same random changes to an anker table
#      and its heap twin in READ COMMITTED transactions (in-place and
#      new-row-id updates, upserts, deletes, savepoints rolled back,
#      rollbacks, deadlocks retried) while a third VACUUMs the anker twin
#      and writes images; the twins must end identical;
#   4. rollbacks against back-to-back ANALYZEs of a table larger than
#      ANALYZE's sample: ANALYZE counts a row, and reads its values only
#      if it keeps it; a rolled-back update must never reach the
#      statistics (the committed values are 1 to 60,000, the rolled-back
#      ones negative: the histogram's first bound is the sample's least).
# Until 2026-11-29 the first lost about 50 to 130 of the 20,000 rows in
# 8 to 20 s (tests/twin_fuzz.sh found it, with autovacuum beside
# rollbacks). Afterwards every row is there with its committed values, the
# index agrees with the table, and so does the table loaded again from its
# log.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "lc_messages = 'C'" "autovacuum = off" \
    "max_prepared_transactions = 8" >/dev/null
q() { cluster_psql -Atc "$1"; }
fail() { echo "FAIL: $*"; cluster_log_tail 20; exit 1; }
q "CREATE EXTENSION anker; CREATE EXTENSION amcheck" >/dev/null
q "CREATE TABLE t (id int PRIMARY KEY, v int, w int) USING anker;
   INSERT INTO t SELECT g, 0, 0 FROM generate_series(1, 20000) g" >/dev/null
W=$(cluster_workdir)
SECONDS_EACH=${UNDO_RACES_SECONDS:-8}
run() { # script... : one client per script, all at once
    local pids=() f
    for f in "$@"; do
        cluster_pgbench -n -f "$W/$f" -c 1 -T "$SECONDS_EACH" postgres >"$W/$f.out" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || fail "pgbench failed: $(cat "$W"/*.out | tail -n 5)"; done
}
expect() { # when, committed w
    local got
    got=$(q "SELECT count(*) || ' ' || sum(v) || ' ' || sum(w) FROM t")
    [ "$got" = "20000 0 $2" ] || fail "$1: rows, sum(v), sum(w) are $got, expected 20000 0 $2"
    got=$(cluster_psql -At -c "SET enable_seqscan = off" -c "SET anker.enable_scan_node = off" -c "SELECT count(*) FROM t WHERE id > 0" | tail -1)
    [ "$got" = 20000 ] || fail "$1: an index scan finds $got rows"
    q "SELECT bt_index_check('t_pkey', true)" >/dev/null || fail "$1: the index disagrees with the table"
}

printf 'BEGIN;\nUPDATE t SET v = v + 1;\nROLLBACK;\n' >"$W/rollback.sql"
printf 'VACUUM t;\n' >"$W/vacuum.sql"
printf 'BEGIN;\nUPDATE t SET v = v + 1;\nPREPARE TRANSACTION '"'"'race'"'"';\nROLLBACK PREPARED '"'"'race'"'"';\n' >"$W/prepared.sql"
printf '\\set id random(1, 20000)\nUPDATE t SET w = w + 1 WHERE id = :id;\n' >"$W/writer.sql"
chmod a+r "$W"/*.sql

run rollback.sql vacuum.sql
expect "rollbacks against VACUUM" 0
echo "ok: rollbacks against VACUUM: every row is there"

run prepared.sql writer.sql vacuum.sql
w=$(awk '/number of transactions actually processed/ {print $NF}' "$W/writer.sql.out" | cut -d/ -f1)
expect "ROLLBACK PREPARED against writers and VACUUM" "$w"
echo "ok: ROLLBACK PREPARED against writers and VACUUM: every row is there, with the writers' $w updates"

q "CREATE TABLE ta (id int PRIMARY KEY, k int, v int, s text) USING anker;
   CREATE TABLE th (id int PRIMARY KEY, k int, v int, s text) USING heap;
   CREATE INDEX ta_k ON ta (k); CREATE INDEX th_k ON th (k);
   INSERT INTO ta SELECT g, g % 100, 0, 's' FROM generate_series(1, 3000) g;
   INSERT INTO th SELECT g, g % 100, 0, 's' FROM generate_series(1, 3000) g" >/dev/null
cat >"$W/twins.sql" <<'SQL'
\set id random(1, 3000)
\set id2 random(1, 3000)
\set r random(1, 10)
BEGIN;
UPDATE ta SET v = v + 1, s = s || 'x' WHERE id = :id;
UPDATE th SET v = v + 1, s = s || 'x' WHERE id = :id;
SAVEPOINT sp;
UPDATE ta SET v = v + 100 WHERE id = :id2;
UPDATE th SET v = v + 100 WHERE id = :id2;
\if :r <= 3
ROLLBACK TO sp;
\endif
UPDATE ta SET k = k + 1 WHERE id = :id2;
UPDATE th SET k = k + 1 WHERE id = :id2;
INSERT INTO ta VALUES (:id2 + 3000, 0, 0, 'n') ON CONFLICT (id) DO UPDATE SET v = ta.v + 1;
INSERT INTO th VALUES (:id2 + 3000, 0, 0, 'n') ON CONFLICT (id) DO UPDATE SET v = th.v + 1;
\if :r = 10
DELETE FROM ta WHERE id = :id;
DELETE FROM th WHERE id = :id;
\endif
\if :r <= 2
ROLLBACK;
\else
COMMIT;
\endif
SQL
printf 'VACUUM ta;\nSELECT pg_sleep(0.2);\nSELECT count(*) FROM anker.compact('"'"'ta'"'"');\n' >"$W/vacuum_ta.sql"
chmod a+r "$W"/*.sql
twins() { # when
    local diff
    diff=$(q "SELECT count(*) FROM ((TABLE ta EXCEPT ALL TABLE th) UNION ALL (TABLE th EXCEPT ALL TABLE ta)) x")
    [ "$diff" = 0 ] || fail "$1: the twins differ in $diff rows:
$(cluster_psql -c "TABLE ta EXCEPT ALL TABLE th" -c "TABLE th EXCEPT ALL TABLE ta" | head -n 20)"
    q "SELECT bt_index_check('ta_pkey', true), bt_index_check('ta_k', true)" >/dev/null || fail "$1: an index of ta disagrees with it"
}
pids=()
for c in 1 2; do
    cluster_pgbench -n -f "$W/twins.sql" --max-tries=1000 -c 1 -T "$SECONDS_EACH" postgres >"$W/twins$c.out" 2>&1 &
    pids+=($!)
done
cluster_pgbench -n -f "$W/vacuum_ta.sql" -c 1 -T "$SECONDS_EACH" postgres >"$W/vacuum_ta.out" 2>&1 &
pids+=($!)
for p in "${pids[@]}"; do wait "$p" || fail "pgbench failed: $(tail -n 5 "$W"/twins*.out "$W/vacuum_ta.out")"; done
twins "twins under concurrency"
echo "ok: twins under concurrency, VACUUM and images: identical ($(q "SELECT count(*) FROM ta") rows), indexes agree"

cluster_run "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DATA" -l "$CLUSTER_LOG" -w -t 120 restart >/dev/null
expect "after a restart" "$w"
twins "twins after a restart"
echo "ok: the same after a restart (the tables loaded from their logs)"

q "CREATE TABLE s (id int, v int) USING anker; INSERT INTO s SELECT g, g FROM generate_series(1, 60000) g" >/dev/null
printf 'BEGIN;\nUPDATE s SET v = -v;\nROLLBACK;\n' >"$W/rollback_s.sql"
cat >"$W/analyze_s.sql" <<'SQL'
ANALYZE s;
SELECT coalesce((SELECT (histogram_bounds::text::int[])[1] < 0 FROM pg_stats WHERE tablename = 's' AND attname = 'v'), false) AS leaked \gset
\if :leaked
SELECT 'ANALYZE saw a value no transaction committed' :: int;
\endif
SQL
chmod a+r "$W"/*.sql
run rollback_s.sql analyze_s.sql
analyzed=$(awk '/number of transactions actually processed/ {print $NF}' "$W/analyze_s.sql.out" | cut -d/ -f1)
q "ANALYZE s" >/dev/null
[ "$(q "SELECT (histogram_bounds::text::int[])[1] > 0 AND n_distinct = -1 AND reltuples = 60000 FROM pg_stats, pg_class WHERE tablename = 's' AND attname = 'v' AND relname = 's'")" = t ] ||
    fail "the statistics of s are wrong"
echo "ok: rollbacks against ANALYZE: $analyzed ANALYZEs saw only committed values"
