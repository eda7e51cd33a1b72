#!/usr/bin/env bash
# Random transactions on an anker table and its heap twin (tests/twin_fuzz.py:
# in-place and new-row-id updates, deletes, upserts, COPY, long values and
# NULLs, row locks, savepoints, two-phase commit rolled back and committed,
# images written in the middle of a transaction; VACUUM, VACUUM FULL,
# CLUSTER, REINDEX, images, ADD/DROP COLUMN, ALTER COLUMN TYPE and TRUNCATE
# between them); for each seed the twins must be identical, every index must
# agree with its table, a hot standby (which loads the table half way and
# replays the rest into it) must answer the same, and the primary must stay
# so across a kill -9 of the postmaster. This is how the rows that ROLLBACK
# PREPARED leaves to be put back were found to be lost by CLUSTER, and
# rows whose in-place update aborted beside autovacuum to be lost by VACUUM
# (tests/undo_races.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
SB=
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "lc_messages = 'C'" "max_prepared_transactions = 4" >/dev/null
q() { cluster_psql -Atc "$1"; }
fail() { echo "FAIL: $*"; cluster_log_tail 30; [ -n "$SB" ] && tail -n 20 "$SB.log" || true; exit 1; }
q "CREATE EXTENSION anker; CREATE EXTENSION amcheck" >/dev/null
W=$(cluster_workdir)

# the hot standby, on the same socket directory
SB=$CLUSTER_DIR/standby
SB_PORT=$((CLUSTER_PORT + 1))
cluster_standby_start "$SB" "$SB_PORT"
qs() { cluster_psql_port "$SB_PORT" -At "$@"; }
catch_up() { cluster_catch_up "$SB_PORT" || fail "the standby did not catch up"; }

state() { # [standby] -> twins' differences | rows | rows an index scan finds | fingerprint
    local run=cluster_psql
    [ "${1:-}" = standby ] && run=qs
    $run -At -c "SET enable_seqscan = off" -c "SET anker.enable_scan_node = off" -c "SELECT
        (SELECT count(*) FROM ((TABLE fa EXCEPT ALL TABLE fh) UNION ALL (TABLE fh EXCEPT ALL TABLE fa)) x)
        || '|' || (SELECT count(*) FROM fh) || '|' || (SELECT count(*) FROM fa WHERE k > -1000)
        || '|' || (SELECT md5(string_agg(f::text, ',' ORDER BY id)) FROM fa f)" | tail -1
}
check() { # seed, when, state
    local diff rows by_index
    IFS='|' read -r diff rows by_index _ <<<"$3"
    [ "$diff" = 0 ] || fail "seed $1, $2: the twins differ in $diff rows:
$(cluster_psql -c "TABLE fa EXCEPT ALL TABLE fh" -c "TABLE fh EXCEPT ALL TABLE fa" | cut -c1-200)"
    [ "$by_index" = "$rows" ] || fail "seed $1, $2: the index on k finds $by_index of $rows rows"
    q "SELECT bt_index_check('fa_pkey', true), bt_index_check('fa_k', true)" >/dev/null \
        || fail "seed $1, $2: an index disagrees with its table"
}
for seed in ${TWIN_FUZZ_SEEDS:-1 2 3 4 5 6}; do
    python3 "$ROOT/tests/twin_fuzz.py" "$seed" 400 >"$W/fuzz.sql"
    sed '/^-- half$/q' "$W/fuzz.sql" >"$W/first.sql"
    sed '1,/^-- half$/d' "$W/fuzz.sql" >"$W/second.sql"
    chmod a+r "$W"/*.sql
    # (statements that fail, as random ones do, abort their transaction for both twins)
    cluster_psql -v ON_ERROR_STOP=0 -f "$W/first.sql" >/dev/null 2>&1
    catch_up
    qs -c "SELECT count(*) FROM fa" >/dev/null || fail "seed $seed: the standby cannot read the table half way"
    cluster_psql -v ON_ERROR_STOP=0 -f "$W/second.sql" >/dev/null 2>&1
    [ "$(q "SELECT count(*) FROM pg_prepared_xacts")" = 0 ] || fail "seed $seed: a prepared transaction was left"
    before=$(state)
    check "$seed" "after the transactions" "$before"
    catch_up
    [ "$(state standby)" = "$before" ] || fail "seed $seed: the standby has $(state standby), the primary $before"
    qs -c "SELECT bt_index_check('fa_pkey', true), bt_index_check('fa_k', true)" >/dev/null \
        || fail "seed $seed: an index of the standby disagrees with its table"
    cluster_kill_postmaster
    cluster_pg_ctl start
    after=$(state)
    check "$seed" "after kill -9 of the postmaster" "$after"
    [ "$after" = "$before" ] || fail "seed $seed: the kill -9 changed the tables ($before, then $after)"
    echo "ok: seed $seed: twins identical ($(cut -d'|' -f2 <<<"$before") rows), indexes agree, the standby the same, the same after kill -9"
done
echo "twin fuzz: all checks passed"
