-- Virtual snapshots: read-only scans run on column snapshots (cow by
-- default, memcpy, or none = the live columns); answers are the same.
-- (aggregates here exercise AnkerScan; AnkerAgg has its own suite)
SET anker.enable_agg_node = off;
-- dblink runs writers in other sessions (also when this suite runs alone, in the QEMU guest)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dblink;
RESET client_min_messages;
CREATE TABLE acc (id int PRIMARY KEY, bal numeric, owner text, pad text) USING anker;
INSERT INTO acc SELECT g, 100, 'owner ' || g, repeat('p', g % 30) FROM generate_series(1, 20000) g;
SET max_parallel_workers_per_gather = 0;
CREATE FUNCTION counter(n text) RETURNS bigint LANGUAGE sql AS $$ SELECT value FROM anker.stats WHERE name = n $$;

-- EXPLAIN shows the provider; EXPLAIN ANALYZE the snapshot used
EXPLAIN (COSTS OFF) SELECT sum(bal) FROM acc;
SELECT plan_of('SELECT sum(bal) FROM acc');
SET anker.snapshot_method = memcpy;
SELECT plan_of('SELECT sum(bal) FROM acc');
SET anker.snapshot_method = none;
SELECT plan_of('SELECT sum(bal) FROM acc');
RESET anker.snapshot_method;
-- tables below anker.snapshot_min_rows (0 in this suite) are read live
SET anker.snapshot_min_rows = 20001;
SELECT plan_of('SELECT sum(bal) FROM acc');
SET anker.snapshot_min_rows = 20000;
SELECT plan_of('SELECT sum(bal) FROM acc');
RESET anker.snapshot_min_rows;
-- statements that write or lock rows read the live columns
SELECT plan_of('SELECT id FROM acc WHERE id = 1 FOR UPDATE');
EXPLAIN (COSTS OFF) UPDATE acc SET bal = bal WHERE owner = 'nobody';
EXPLAIN (COSTS OFF) WITH d AS (DELETE FROM acc WHERE false RETURNING 1) SELECT count(*) FROM acc;
-- vm_snapshot is refused clearly, never silently replaced (snapshots_1.out:
-- a kernel with kernel-patch/0002, where it works)
SET anker.snapshot_method = vm_snapshot;
SHOW anker.snapshot_method;
RESET anker.snapshot_method;

-- every provider gives the same answers
CREATE TEMP TABLE answers (method text, q int, result text);
DO $$
DECLARE m text; r text; qs text[] := ARRAY[
  'SELECT sum(bal)::text FROM acc',
  'SELECT count(*)::text FROM acc WHERE pad LIKE ''ppp%''',
  'SELECT md5(string_agg(a::text, '','' ORDER BY id)) FROM acc a',
  'SELECT string_agg(owner, '','' ORDER BY id) FROM acc WHERE id % 5000 = 0'];
BEGIN
  FOREACH m IN ARRAY ARRAY['cow', 'memcpy', 'none', 'vm_snapshot'] LOOP
    BEGIN
      EXECUTE format('SET anker.snapshot_method = %s', m);
    EXCEPTION WHEN feature_not_supported THEN
      CONTINUE;  -- vm_snapshot without the kernel patches (refused above)
    END;
    FOR i IN 1..array_length(qs, 1) LOOP
      EXECUTE qs[i] INTO r;
      INSERT INTO answers VALUES (m, i, r);
    END LOOP;
  END LOOP;
  RESET anker.snapshot_method;
END $$;
SELECT q, count(DISTINCT result) AS distinct_answers FROM answers GROUP BY q ORDER BY q;

-- a cursor holds its snapshot while writers change the rows; its answer
-- is the state as of its snapshot; copy-on-write copies pages as needed
SELECT counter('snapshots_created') AS created0, counter('cow_page_copies') AS cow0,
       counter('snapshot_create_ns') AS create_ns0 \gset
BEGIN ISOLATION LEVEL REPEATABLE READ;
DECLARE c1 CURSOR FOR SELECT id, bal FROM acc WHERE id % 4000 = 1;
FETCH 1 FROM c1;
SELECT "table", method, columns, readers FROM anker.snapshots;
-- a second scan in the same transaction reuses the snapshot
DECLARE c2 CURSOR FOR SELECT sum(bal) FROM acc;
FETCH ALL FROM c2;
SELECT "table", readers FROM anker.snapshots;
SELECT counter('snapshots_created') - :created0 AS created,
       counter('snapshot_create_ns') > :create_ns0 AS creation_timed;
SELECT dblink_exec(format('dbname=%s port=%s host=%s', current_database(), current_setting('port'),
                          split_part(current_setting('unix_socket_directories'), ',', 1)),
                   'UPDATE acc SET bal = bal + 1 WHERE id % 2 = 0');
FETCH ALL FROM c1;
SELECT pages_copied > 0 AS writers_copied_pages FROM anker.snapshots;
CLOSE c1;
CLOSE c2;
COMMIT;
SELECT count(*) AS live_snapshots FROM anker.snapshots;
SELECT counter('cow_page_copies') > :cow0 AS copies_counted;
SELECT sum(bal) FROM acc;

-- a snapshot read stays consistent with in-place versions of its own
-- transaction and of concurrent ones
SET enable_indexscan = off;
SET enable_bitmapscan = off;
BEGIN;
UPDATE acc SET bal = 0 WHERE id <= 10;
SELECT sum(bal) FROM acc WHERE id <= 20;
SELECT plan_of('SELECT sum(bal) FROM acc WHERE id <= 20');
ROLLBACK;
SELECT sum(bal) FROM acc WHERE id <= 20;
RESET enable_indexscan;
RESET enable_bitmapscan;

-- an error or cancel in the middle of a scan releases its snapshot
SELECT count(*) FROM acc WHERE 1 / (id - 15000) > -1;
SELECT count(*) AS live_snapshots FROM anker.snapshots;
-- (the SQLSTATE alone: with parallel workers the cancel may be reported as
-- the leader's timeout or as a worker's cancel, both 57014)
SET statement_timeout = '1ms';
\set VERBOSITY sqlstate
SELECT count(*) FROM acc a, acc b WHERE a.id = b.id + 1 AND a.pad = b.pad;
\set VERBOSITY default
RESET statement_timeout;
SELECT count(*) AS live_snapshots FROM anker.snapshots;
-- ... and so does rolling back to a savepoint, before the transaction ends
BEGIN;
SAVEPOINT s;
SELECT count(*) FROM acc WHERE 1 / (id - 15000) > -1;
ROLLBACK TO s;
SELECT count(*) AS live_snapshots FROM anker.snapshots;
COMMIT;

-- parallel workers share the leader's snapshot
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT plan_of('SELECT count(*), sum(bal) FROM acc');
SELECT count(*), sum(bal) FROM acc;
RESET max_parallel_workers_per_gather;

DROP TABLE acc;
DROP FUNCTION counter;
