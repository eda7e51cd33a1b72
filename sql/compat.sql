-- Behaviour PostgreSQL's own suites check that anker once got wrong; each
-- block is compared with heap where the answer is not obvious.

-- ON CONFLICT DO UPDATE affecting a row twice: SQLSTATE 21000, whether the
-- row was inserted by the same command or updated by it
CREATE TABLE oc (k int PRIMARY KEY, v text) USING anker;
\set VERBOSITY sqlstate
INSERT INTO oc VALUES (1, 'a'), (1, 'b') ON CONFLICT (k) DO UPDATE SET v = excluded.v;
INSERT INTO oc VALUES (1, 'a');
INSERT INTO oc VALUES (1, 'b'), (1, 'c') ON CONFLICT (k) DO UPDATE SET v = excluded.v;
\set VERBOSITY default
INSERT INTO oc VALUES (1, 'b'), (2, 'c') ON CONFLICT (k) DO UPDATE SET v = excluded.v;
SELECT * FROM oc ORDER BY k;

-- RETURNING system columns of new and updated rows
INSERT INTO oc VALUES (3, 'd') RETURNING k, xmin = xid(pg_current_xact_id()) AS own, cmin;
UPDATE oc SET v = 'e' WHERE k = 3 RETURNING k, xmin = xid(pg_current_xact_id()) AS own, xmax;
INSERT INTO oc VALUES (3, 'f') ON CONFLICT (k) DO UPDATE SET v = excluded.v
  RETURNING k, v, xmin = xid(pg_current_xact_id()) AS own;
-- the upsert idiom: xmax = 0 for an inserted row, not for an updated one
INSERT INTO oc VALUES (3, 'g'), (4, 'h') ON CONFLICT (k) DO UPDATE SET v = excluded.v
  RETURNING k, v, xmax = 0 AS inserted;

-- OLD TABLE of a statement trigger holds the rows as they were before an
-- in-place UPDATE, also when the trigger sits on a partitioned parent
CREATE FUNCTION show_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE 'old: %, new: %',
    (SELECT string_agg(o::text, ' ' ORDER BY o) FROM old_rows o),
    (SELECT string_agg(n::text, ' ' ORDER BY n) FROM new_rows n);
  RETURN NULL;
END $$;
CREATE TABLE tr (id int PRIMARY KEY, v int) USING anker;
INSERT INTO tr VALUES (1, 10), (2, 20);
CREATE TRIGGER tr_show AFTER UPDATE ON tr REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION show_transition();
UPDATE tr SET v = v + 1;
CREATE TABLE trp (id int, v int) PARTITION BY RANGE (id);
CREATE TABLE trp1 PARTITION OF trp FOR VALUES FROM (0) TO (100) USING anker;
INSERT INTO trp VALUES (1, 10), (2, 20);
CREATE TRIGGER trp_show AFTER UPDATE ON trp REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION show_transition();
UPDATE trp SET v = v * 2;
SELECT * FROM trp ORDER BY id;

-- cursors scan backward, and WHERE CURRENT OF works on SCROLL cursors
CREATE TABLE cur (id int, v text) USING anker;
INSERT INTO cur SELECT g, 'v' || g FROM generate_series(1, 5) g;
BEGIN;
DECLARE c1 CURSOR FOR SELECT id FROM cur;
FETCH 3 FROM c1;
FETCH BACKWARD 2 FROM c1;
DECLARE c2 SCROLL CURSOR FOR SELECT id, v FROM cur;
FETCH LAST FROM c2;
FETCH PRIOR FROM c2;
UPDATE cur SET v = 'updated' WHERE CURRENT OF c2;
SELECT is_scrollable FROM pg_cursors WHERE name = 'c1';
COMMIT;
SELECT * FROM cur ORDER BY id;

-- sequential scans count in pg_stat_*_tables
CREATE TABLE st (a int) USING anker;
INSERT INTO st SELECT generate_series(1, 100);
SELECT pg_stat_force_next_flush();
SELECT count(*) FROM st;
SELECT sum(a) FROM st WHERE a > 90;
SELECT * FROM st WHERE a = 50;
SELECT pg_stat_force_next_flush();
SELECT seq_scan, seq_tup_read FROM pg_stat_user_tables WHERE relname = 'st';

-- an error raised by user code keeps its CONTEXT: in a WHERE clause (of
-- AnkerScan and of AnkerAgg) and in an index expression
CREATE FUNCTION boom(x int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN 1 / (x - 3); END';
SELECT * FROM st WHERE boom(a) > 0;
SELECT count(*) FROM st WHERE boom(a) > 0;
CREATE INDEX ON st (boom(a));
-- and in the planner (it evaluates stable functions for its estimates), in
-- EXPLAIN, in executor start-up (initial partition pruning of a generic
-- plan) and in EXPLAIN ANALYZE: for any query of the cluster, anker's or not
CREATE FUNCTION boom_at(x int) RETURNS int LANGUAGE plpgsql STABLE AS 'BEGIN RAISE EXCEPTION ''boom %'', x; END';
CREATE TABLE pp (k int, v text) PARTITION BY LIST (k);
CREATE TABLE pp1 PARTITION OF pp FOR VALUES IN (1) USING anker;
CREATE TABLE pp2 PARTITION OF pp FOR VALUES IN (2) USING heap;
INSERT INTO pp VALUES (1, 'one');
SELECT * FROM pp WHERE k = boom_at(1);
EXPLAIN (COSTS OFF) SELECT * FROM pp WHERE k = boom_at(2);
SET plan_cache_mode = force_generic_plan;
PREPARE prune(int) AS SELECT * FROM pp WHERE k = boom_at($1);
EXECUTE prune(3);
DEALLOCATE prune;
RESET plan_cache_mode;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT boom_at(k) FROM pp;

-- two-phase commit of transactions that create, truncate and drop anker
-- tables: the storage follows COMMIT/ROLLBACK PREPARED
SELECT count(*) AS tables_before FROM anker.tables \gset
BEGIN;
CREATE TABLE px1 (a int) USING anker;
INSERT INTO px1 VALUES (1), (2);
PREPARE TRANSACTION 'px_create';
BEGIN;
CREATE TABLE px2 (a int) USING anker;
INSERT INTO px2 VALUES (3);
PREPARE TRANSACTION 'px_rollback';
COMMIT PREPARED 'px_create';
ROLLBACK PREPARED 'px_rollback';
SELECT * FROM px1 ORDER BY a;
SELECT count(*) - :tables_before AS tables_added FROM anker.tables;
BEGIN;
TRUNCATE px1;
INSERT INTO px1 VALUES (9);
PREPARE TRANSACTION 'px_truncate';
ROLLBACK PREPARED 'px_truncate';
SELECT * FROM px1 ORDER BY a;
BEGIN;
TRUNCATE px1;
INSERT INTO px1 VALUES (9);
PREPARE TRANSACTION 'px_truncate';
COMMIT PREPARED 'px_truncate';
SELECT * FROM px1 ORDER BY a;
SELECT count(*) - :tables_before AS tables_added FROM anker.tables;
BEGIN;
DROP TABLE px1;
PREPARE TRANSACTION 'px_drop';
COMMIT PREPARED 'px_drop';
SELECT count(*) - :tables_before AS tables_added FROM anker.tables;

-- PREPARE TRANSACTION on a temporary anker table: PostgreSQL's own error
BEGIN;
CREATE TEMP TABLE tmp_px (a int) USING anker;
PREPARE TRANSACTION 'px';
DROP TABLE oc, tr, trp, cur, st, pp;
DROP FUNCTION show_transition(), boom(int), boom_at(int);
