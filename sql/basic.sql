-- Writes, scans, transactions and the storage life cycle of anker tables.
-- (aggregates here exercise AnkerScan; AnkerAgg has its own suite)
SET anker.enable_agg_node = off;
CREATE TABLE items (id int, name text, price numeric(10,2), tags text[]) USING anker;
SELECT amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.relname = 'items';

-- single-row, multi-row, INSERT ... SELECT, COPY
INSERT INTO items VALUES (1, 'apple', 0.5, '{fruit}');
INSERT INTO items VALUES (2, 'bread', 2.25, '{bakery,daily}'), (3, NULL, NULL, NULL);
INSERT INTO items SELECT g, 'item ' || g, g * 1.5, ARRAY['bulk'] FROM generate_series(4, 1000) g;
COPY items FROM stdin;
1001	copied	9.99	{copy}
1002	\N	\N	\N
\.
SELECT count(*), sum(id), count(name), sum(price) FROM items;
SELECT * FROM items WHERE id <= 3 OR id > 1000 ORDER BY id;

-- ctid follows the row-id mapping: block = row / 256, offset = row % 256 + 1
SELECT ctid, id FROM items WHERE id IN (1, 256, 257, 1002) ORDER BY id;
SELECT count(DISTINCT ctid) = count(*) AS unique_ctids, max(ctid) FROM items;
SELECT tableoid::regclass, count(*) FROM items GROUP BY 1;
-- TID scan and TID range scan
EXPLAIN (COSTS OFF) SELECT id FROM items WHERE ctid = '(1,1)';
SELECT id FROM items WHERE ctid = '(1,1)';
SELECT id FROM items WHERE ctid = '(99,1)';
EXPLAIN (COSTS OFF) SELECT count(*) FROM items WHERE ctid >= '(1,0)' AND ctid < '(2,0)';
SELECT count(*), min(id), max(id) FROM items WHERE ctid >= '(1,0)' AND ctid < '(2,0)';
SELECT count(*) FROM items WHERE ctid > '(3,200)';

-- CREATE TABLE ... USING anker AS SELECT
CREATE TABLE items_copy USING anker AS SELECT * FROM items WHERE id % 2 = 0;
SELECT count(*), sum(id) FROM items_copy;
CREATE TABLE items_into USING anker AS SELECT id, name FROM items WITH NO DATA;
SELECT count(*) FROM items_into;
SELECT INTO items_select_into FROM items;  -- uses default_table_access_method (heap)
SET default_table_access_method = anker;
CREATE TABLE items_default (a int);
SELECT amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.relname = 'items_default';
RESET default_table_access_method;

-- command ids: a statement does not see its own inserts
CREATE TABLE dbl (x int) USING anker;
INSERT INTO dbl SELECT generate_series(1, 1000);
INSERT INTO dbl SELECT * FROM dbl;
INSERT INTO dbl SELECT * FROM dbl;
SELECT count(*), sum(x) FROM dbl;
-- a cursor opened earlier in a transaction keeps its snapshot
BEGIN;
DECLARE c CURSOR FOR SELECT count(*) FROM dbl;
INSERT INTO dbl VALUES (-1);
FETCH c;
SELECT count(*) FROM dbl;
ROLLBACK;

-- aborted transactions and rolled-back savepoints leave nothing visible
BEGIN;
INSERT INTO dbl VALUES (-2);
SELECT count(*) FROM dbl WHERE x = -2;
ROLLBACK;
SELECT count(*) FROM dbl WHERE x < 0;
BEGIN;
INSERT INTO dbl VALUES (-3);
SAVEPOINT s1;
INSERT INTO dbl VALUES (-4);
SAVEPOINT s2;
INSERT INTO dbl VALUES (-5);
ROLLBACK TO s2;
INSERT INTO dbl VALUES (-6);
RELEASE s1;
SELECT x FROM dbl WHERE x < 0 ORDER BY x;
COMMIT;
SELECT x FROM dbl WHERE x < 0 ORDER BY x;
-- an error rolls back the failed statement's rows
INSERT INTO dbl SELECT CASE WHEN g < 500 THEN g ELSE 1 / (g - g) END FROM generate_series(1, 1000) g;
SELECT count(*) FROM dbl;

-- backward scans through a scrollable cursor
BEGIN;
DECLARE sc SCROLL CURSOR FOR SELECT x FROM dbl WHERE x < 0;
FETCH ALL sc;
FETCH BACKWARD 2 sc;
FETCH FIRST sc;
FETCH LAST sc;
CLOSE sc;
COMMIT;

-- parallel sequential scans return each row exactly once (PostgreSQL's own
-- Parallel Seq Scan here; scan_node tests anker's parallel AnkerScan)
SET anker.enable_scan_node = off;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
CREATE TABLE par (g int, pad text) USING anker;
INSERT INTO par SELECT g, repeat('p', g % 50) FROM generate_series(1, 100000) g;
ANALYZE par;
EXPLAIN (COSTS OFF) SELECT count(*), sum(g) FROM par;
SELECT count(*), sum(g), count(DISTINCT g) FROM par;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
RESET anker.enable_scan_node;

-- ANALYZE estimates
SELECT reltuples, relpages FROM pg_class WHERE relname = 'par';
SELECT most_common_vals IS NULL AS no_mcv, n_distinct FROM pg_stats WHERE tablename = 'par' AND attname = 'g';
EXPLAIN (COSTS OFF) SELECT * FROM par TABLESAMPLE SYSTEM (10);
SELECT count(*) > 0 AS sampled FROM par TABLESAMPLE BERNOULLI (10) REPEATABLE (42);
SELECT count(*) FROM par TABLESAMPLE SYSTEM (100);

-- indexes (full support arrives with UPDATE/DELETE): build, index and bitmap scans
CREATE INDEX par_g ON par (g);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM par WHERE g = 4242;
SELECT g, length(pad) FROM par WHERE g = 4242;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT g FROM par WHERE g BETWEEN 10 AND 12;
SELECT g FROM par WHERE g BETWEEN 10 AND 12;
RESET enable_seqscan;
RESET enable_bitmapscan;

-- ALTER TABLE: new columns get their default ("missing") value without a rewrite
ALTER TABLE items ADD COLUMN stock int DEFAULT 7;
ALTER TABLE items ADD COLUMN note text;
ALTER TABLE items ADD COLUMN label text DEFAULT 'a label that is longer than sixteen bytes';
SELECT id, stock, note, label FROM items WHERE id IN (1, 1002) ORDER BY id;
INSERT INTO items (id, stock, note) VALUES (2000, 1, 'new');
SELECT count(*), sum(stock), count(note), count(label) FROM items;
ALTER TABLE items DROP COLUMN tags;
SELECT * FROM items WHERE id IN (1, 2000) ORDER BY id;
BEGIN;
ALTER TABLE items ADD COLUMN temp_col bigint DEFAULT 1;
INSERT INTO items (id, temp_col) VALUES (3000, 5);
ROLLBACK;
ALTER TABLE items ADD COLUMN temp_col text DEFAULT 'x';
SELECT id, temp_col FROM items WHERE id IN (1, 2000) ORDER BY id;

-- TRUNCATE is transactional; storage is keyed by relfilenode
SELECT relfilenode AS old_node FROM pg_class WHERE relname = 'dbl' \gset
BEGIN;
TRUNCATE dbl;
SELECT count(*) FROM dbl;
SELECT relfilenode <> :old_node AS new_node FROM pg_class WHERE relname = 'dbl';
ROLLBACK;
SELECT count(*) FROM dbl;
SELECT relfilenode = :old_node AS same_node FROM pg_class WHERE relname = 'dbl';
BEGIN;
SAVEPOINT s;
TRUNCATE dbl;
ROLLBACK TO s;
SELECT count(*) FROM dbl;
COMMIT;
TRUNCATE dbl;
SELECT count(*) FROM dbl;
SELECT count(*) FROM anker.tables WHERE relation = 'dbl'::regclass;
-- TRUNCATE of a table created in the same transaction
BEGIN;
CREATE TABLE fresh (a int) USING anker;
INSERT INTO fresh VALUES (1), (2);
TRUNCATE fresh;
INSERT INTO fresh VALUES (3);
SELECT * FROM fresh;
COMMIT;
SELECT * FROM fresh;

-- DROP TABLE returns the table's memory
SELECT used_bytes AS before_bytes FROM anker.memory \gset
CREATE TABLE big (a bigint, b text) USING anker;
INSERT INTO big SELECT g, repeat('x', 100) FROM generate_series(1, 200000) g;
SELECT used_bytes > :before_bytes + 20000000 AS grew FROM anker.memory;
SELECT bytes > 20000000 AS big_table FROM anker.tables WHERE relation = 'big'::regclass;
DROP TABLE big;
SELECT used_bytes = :before_bytes AS returned FROM anker.memory;
-- a rolled-back CREATE frees its storage, a rolled-back DROP keeps it
BEGIN;
CREATE TABLE gone (a int) USING anker;
INSERT INTO gone SELECT generate_series(1, 100000);
ROLLBACK;
SELECT used_bytes = :before_bytes AS returned FROM anker.memory;
BEGIN;
DROP TABLE dbl;
ROLLBACK;
INSERT INTO dbl VALUES (1);
SELECT count(*) FROM dbl;

-- temporary tables and materialized views
CREATE TEMP TABLE tmp_anker (a int) USING anker;
INSERT INTO tmp_anker SELECT generate_series(1, 10);
SELECT sum(a) FROM tmp_anker;
CREATE MATERIALIZED VIEW mv USING anker AS SELECT id, price FROM items WHERE id < 10;
SELECT count(*) FROM mv;
REFRESH MATERIALIZED VIEW mv;
SELECT count(*) FROM mv;

DROP MATERIALIZED VIEW mv;
DROP TABLE items, items_copy, items_into, items_select_into, items_default, dbl, par, fresh, tmp_anker;
