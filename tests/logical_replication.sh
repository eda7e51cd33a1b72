#!/usr/bin/env bash
# Logical replication of anker tables, with heap twins as the oracle: a
# publication of anker and heap tables in one database, a subscription in
# another database of the same cluster (tables of both access methods on
# that side too). The initial copy, a pgbench run of updates (in place and
# of key columns), inserts, deletes, rollbacks and savepoints, a `kill -9`
# of the postmaster in the middle of it (decoding resumes from replayed
# WAL), a table added to the publication later, REPLICA IDENTITY FULL on a
# table without a key: afterwards every subscribed table equals its
# publisher's table, and each anker table its heap twin.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
cluster_start "shared_preload_libraries = 'anker'" "anker.memory_limit = '1GB'" "lc_messages = 'C'" \
    "wal_level = logical" "max_replication_slots = 10" "max_wal_senders = 10" \
    "max_logical_replication_workers = 8" "max_worker_processes = 16" >/dev/null

q() { local db=$1; shift; cluster_psql -d "$db" -Atc "$1"; }
fail() { echo "FAIL: $*"; cluster_log_tail 30; exit 1; }
wait_ready() { cluster_wait_ready || fail "the server did not come back"; }

for db in pub sub; do
    q postgres "CREATE DATABASE $db" >/dev/null
    q "$db" "CREATE EXTENSION anker" >/dev/null
done
# Same tables in both databases. On the subscriber, `acct` and `wide` are
# anker tables and their twins heap; `events` is heap there: an anker
# publisher feeds either kind.
schema() { # db, access method of the subscriber-only choice
    cluster_psql -d "$1" >/dev/null <<SQL
CREATE TABLE acct_anker (id int PRIMARY KEY, bal bigint NOT NULL, note text) USING anker;
CREATE TABLE acct_heap (id int PRIMARY KEY, bal bigint NOT NULL, note text) USING heap;
CREATE TABLE wide_anker (k int, v text, n numeric) USING anker;
CREATE TABLE wide_heap (k int, v text, n numeric) USING heap;
ALTER TABLE wide_anker REPLICA IDENTITY FULL;
ALTER TABLE wide_heap REPLICA IDENTITY FULL;
CREATE TABLE events (id bigint PRIMARY KEY, aid int, delta int) USING $2;
CREATE TABLE later_anker (id int PRIMARY KEY, v text) USING anker;
SQL
}
schema pub anker
schema sub heap
cluster_psql -d pub >/dev/null <<'SQL'
INSERT INTO acct_anker SELECT g, 0, 'acct ' || g FROM generate_series(1, 2000) g;
INSERT INTO acct_heap SELECT * FROM acct_anker;
INSERT INTO wide_anker SELECT g % 100, repeat('w', g % 3000), g / 7.0 FROM generate_series(1, 500) g;
INSERT INTO wide_heap SELECT * FROM wide_anker;
CREATE SEQUENCE event_ids;
ALTER TABLE events ALTER COLUMN id SET DEFAULT nextval('event_ids');
INSERT INTO later_anker SELECT g, 'later ' || g FROM generate_series(1, 300) g;
CREATE PUBLICATION p FOR TABLE acct_anker, acct_heap, wide_anker, wide_heap, events;
SELECT 'slot' FROM pg_create_logical_replication_slot('sub', 'pgoutput');
SQL
# A subscription in the same cluster cannot create its slot itself.
q sub "CREATE SUBSCRIPTION s CONNECTION 'host=$CLUSTER_SOCK port=$CLUSTER_PORT dbname=pub user=postgres' PUBLICATION p WITH (create_slot = false, slot_name = 'sub')" >/dev/null

synced() { q sub "SELECT count(*) = 0 FROM pg_subscription_rel WHERE srsubstate <> 'r'"; }
caught_up() { # the subscriber has applied everything the publisher has written so far
    local target
    target=$(q pub "SELECT pg_current_wal_lsn()")
    for _ in $(seq 1 180); do
        if [ "$(synced)" = t ] &&
           [ "$(q pub "SELECT coalesce(bool_and(confirmed_flush_lsn >= '$target'), false) FROM pg_replication_slots WHERE slot_name = 'sub'")" = t ]; then
            return 0
        fi
        sleep 1
    done
    fail "the subscription did not catch up (tables: $(q sub "SELECT string_agg(srrelid::regclass::text || '=' || srsubstate, ' ') FROM pg_subscription_rel"))"
}
digest() { # db, table: the rows, in one md5
    q "$1" "SELECT count(*) || ' ' || coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '-') FROM $2 t"
}
compare() { # what: every table on both sides, and the anker/heap twins
    local t a b
    for t in acct_anker acct_heap wide_anker wide_heap events "$@"; do
        a=$(digest pub "$t"); b=$(digest sub "$t")
        [ "$a" = "$b" ] || fail "$t differs between publisher ($a) and subscriber ($b)"
    done
    for t in acct wide; do
        [ "$(digest pub ${t}_anker)" = "$(digest pub ${t}_heap)" ] || fail "${t}_anker differs from its heap twin on the publisher"
    done
}
caught_up
compare
echo "initial copy: $(digest sub acct_anker | cut -d' ' -f1) accounts, $(digest sub wide_anker | cut -d' ' -f1) wide rows on the subscriber"

WORK=$(cluster_workdir)
cat > "$WORK/logical.sql" <<'SQL'
\set id random(1, 2000)
\set d random(-100, 100)
\set w random(0, 99)
BEGIN;
UPDATE acct_anker SET bal = bal + :d WHERE abs(id) = :id;
UPDATE acct_heap SET bal = bal + :d WHERE abs(id) = :id;
INSERT INTO events (aid, delta) VALUES (:id, :d);
UPDATE wide_anker SET n = n + 1, v = v || 'u' WHERE k = :w;
UPDATE wide_heap SET n = n + 1, v = v || 'u' WHERE k = :w;
END;
BEGIN;
UPDATE acct_anker SET id = -id, note = 'moved' WHERE abs(id) = :w + 1;
UPDATE acct_heap SET id = -id, note = 'moved' WHERE abs(id) = :w + 1;
SAVEPOINT s;
DELETE FROM acct_anker WHERE abs(id) = :id;
DELETE FROM acct_heap WHERE abs(id) = :id;
ROLLBACK TO SAVEPOINT s;
DELETE FROM events WHERE aid = :w AND delta < 0;
END;
BEGIN;
INSERT INTO wide_anker VALUES (:w, 'rolled back', 0);
INSERT INTO wide_heap VALUES (:w, 'rolled back', 0);
ROLLBACK;
BEGIN;
DELETE FROM wide_anker WHERE k = :w AND n > 80;
DELETE FROM wide_heap WHERE k = :w AND n > 80;
INSERT INTO acct_anker VALUES (:id + 10000, :d, 'new') ON CONFLICT (id) DO UPDATE SET bal = acct_anker.bal + 1;
INSERT INTO acct_heap VALUES (:id + 10000, :d, 'new') ON CONFLICT (id) DO UPDATE SET bal = acct_heap.bal + 1;
END;
SQL
chown postgres "$WORK/logical.sql"
bench() { (cd "$WORK" && cluster_pgbench -n -c 2 -j 2 -T "$1" -f logical.sql pub >"$WORK/pgbench.log" 2>&1) || true; }
bench 20 &
BENCH=$!
sleep 10
kill -9 "$(head -n1 "$CLUSTER_DATA/postmaster.pid")"
wait "$BENCH" || true
for _ in $(seq 1 60); do pgrep -u postgres -x postgres >/dev/null || break; sleep 0.5; done
cluster_pg_ctl start
wait_ready
bench 10
grep -q "number of failed transactions: 0" "$WORK/pgbench.log" || { cat "$WORK/pgbench.log"; fail "pgbench after the crash"; }
echo "after the crash: $(grep -Eo 'number of transactions actually processed: [0-9]+' "$WORK/pgbench.log")"
caught_up
compare
echo "pgbench with a crash: every table equal on both sides, twins equal"

# A table joins the publication later: initial copy, then its changes.
q pub "ALTER PUBLICATION p ADD TABLE later_anker" >/dev/null
q sub "ALTER SUBSCRIPTION s REFRESH PUBLICATION" >/dev/null
cluster_psql -d pub >/dev/null <<'SQL'
UPDATE later_anker SET v = v || ' updated' WHERE id % 3 = 0;
DELETE FROM later_anker WHERE id % 5 = 0;
UPDATE later_anker SET id = id + 1000 WHERE id % 7 = 0;
INSERT INTO later_anker SELECT g, 'late ' || g FROM generate_series(2001, 2100) g;
SQL
caught_up
compare later_anker
[ "$(q sub "SELECT count(*) FROM later_anker WHERE v LIKE '% updated'")" -gt 0 ] || fail "later_anker's updates did not arrive"
echo "a table added to the publication: copied, then its changes"
echo "logical_replication: ok"
