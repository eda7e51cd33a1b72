-- anker.snapshot_method = vm_snapshot on a kernel with kernel-patch/0002
-- (run by kernel-patch/run-tests.sh in the QEMU guest only; elsewhere the
-- setting is refused, see snapshots.sql): a scan reads a kernel snapshot of
-- the shared arena, frozen while writers in other backends go on.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dblink;
RESET client_min_messages;
CREATE TABLE vacc (id int PRIMARY KEY, bal bigint, owner text) USING anker;
INSERT INTO vacc SELECT g, 100, 'owner ' || g FROM generate_series(1, 20000) g;
SET max_parallel_workers_per_gather = 0;
SET anker.enable_agg_node = off;
SET anker.snapshot_method = vm_snapshot;
CREATE FUNCTION writer(q text) RETURNS text LANGUAGE sql AS $$
  SELECT dblink_exec(format('dbname=%s port=%s host=%s', current_database(), current_setting('port'),
                            split_part(current_setting('unix_socket_directories'), ',', 1)), q) $$;

-- the provider shows in EXPLAIN; answers equal cow's
SELECT plan_of('SELECT sum(bal) FROM vacc');
SELECT sum(bal), count(*), max(owner) FROM vacc;
SET anker.snapshot_method = cow;
SELECT sum(bal), count(*), max(owner) FROM vacc;
SET anker.snapshot_method = vm_snapshot;

-- a cursor's snapshot stays as it was while another backend updates,
-- inserts and deletes rows, and VACUUM frees and reuses pages
BEGIN ISOLATION LEVEL REPEATABLE READ;
DECLARE c1 CURSOR FOR SELECT id, bal, owner FROM vacc WHERE id % 2000 = 1;
FETCH 2 FROM c1;
SELECT "table", method, readers, columns FROM anker.snapshots;
SELECT writer('UPDATE vacc SET bal = bal + 7, owner = owner || ''!''');
SELECT writer('DELETE FROM vacc WHERE id > 19000');
SELECT writer('INSERT INTO vacc SELECT g, 1, ''new'' FROM generate_series(20001, 30000) g');
SELECT writer('VACUUM vacc');
FETCH ALL FROM c1;
-- a second scan in the transaction reuses the snapshot: the same rows
DECLARE c2 CURSOR FOR SELECT sum(bal), count(*) FROM vacc;
FETCH ALL FROM c2;
CLOSE c1;
CLOSE c2;
COMMIT;
SELECT count(*) AS live_snapshots FROM anker.snapshots;
SELECT sum(bal), count(*) FROM vacc;

-- snapshots are this backend's mappings: another backend takes its own
BEGIN ISOLATION LEVEL REPEATABLE READ;
DECLARE c3 CURSOR FOR SELECT sum(bal) FROM vacc;
FETCH ALL FROM c3;
SELECT writer('DO $x$ BEGIN SET LOCAL anker.snapshot_method = vm_snapshot; PERFORM sum(bal) FROM vacc; END $x$');
SELECT writer('UPDATE vacc SET bal = bal - 1 WHERE id <= 100');
CLOSE c3;
DECLARE c4 CURSOR FOR SELECT sum(bal) FROM vacc;
FETCH ALL FROM c4;
COMMIT;

-- parallel workers cannot read the leader's mapping: they read the live
-- columns, with the same answer
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT count(*), sum(bal) FROM vacc;
RESET max_parallel_workers_per_gather;

-- DuckDB reads the same snapshot
SET anker.olap_engine = duckdb;
SET anker.olap_min_cost = 0;
SELECT sum(bal), count(*) FROM vacc;
RESET anker.olap_engine;
RESET anker.olap_min_cost;

-- errors release the snapshot (and unmap it)
SELECT count(*) FROM vacc WHERE 1 / (id - 15000) > -1;
SELECT count(*) AS live_snapshots FROM anker.snapshots;

DROP TABLE vacc;
DROP FUNCTION writer;
