-- Scans fill only the columns their query reads (extension/src/tam/projection.rs).
-- Restricted scans give heap's answers; where a relation's selectedCols may
-- not name every column read (row-level security, a child scanned through
-- a parent with policies, whole-row references) nothing is restricted.
CREATE FUNCTION counter(n text) RETURNS bigint LANGUAGE sql AS $$ SELECT value FROM anker.stats WHERE name = n $$;
CREATE TABLE proj (id int PRIMARY KEY, k int, secret int, note text, pad text DEFAULT repeat('x', 20)) USING anker;
INSERT INTO proj (id, k, secret, note) SELECT g, g % 10, g % 3, 'note ' || g FROM generate_series(1, 300) g;
CREATE TABLE proj_heap (LIKE proj INCLUDING ALL) USING heap;
INSERT INTO proj_heap SELECT * FROM proj;
ANALYZE proj, proj_heap;
CREATE FUNCTION proj_same() RETURNS boolean LANGUAGE sql AS $$
  SELECT (SELECT string_agg(p::text, ',' ORDER BY id) FROM proj p)
       = (SELECT string_agg(h::text, ',' ORDER BY id) FROM proj_heap h) $$;

-- A Seq Scan, an Index Scan and a Bitmap Heap Scan reading two or three of
-- five columns are restricted to them (PostgreSQL's Seq Scan: AnkerScan
-- has column lists of its own).
SET anker.enable_scan_node = off;
SELECT counter('column_restricted_scans') AS r0 \gset
SET enable_indexscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT note FROM proj WHERE k = 3 AND id < 40;
SELECT note FROM proj WHERE k = 3 AND id < 40;
RESET enable_bitmapscan;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT count(note) FROM proj WHERE id BETWEEN 10 AND 20;
SELECT count(note) FROM proj WHERE id BETWEEN 10 AND 20;
RESET enable_indexscan;
EXPLAIN (COSTS OFF) SELECT note FROM proj WHERE id = 7;
SELECT note FROM proj WHERE id = 7;
RESET enable_seqscan;
SELECT counter('column_restricted_scans') - :r0 AS restricted;

-- Updates found by restricted scans write whole rows: ModifyTable fetches
-- the old row by TID for the columns the update keeps.
SET enable_indexscan = off;
SET enable_bitmapscan = off;
UPDATE proj SET k = k + 100 WHERE id = 5 RETURNING *;
UPDATE proj_heap SET k = k + 100 WHERE id = 5 RETURNING *;
UPDATE proj SET note = note || '!' WHERE k = 1;
UPDATE proj_heap SET note = note || '!' WHERE k = 1;
DELETE FROM proj WHERE secret = 2 AND k = 2 RETURNING id, pad;
DELETE FROM proj_heap WHERE secret = 2 AND k = 2 RETURNING id, pad;
RESET enable_indexscan;
RESET enable_bitmapscan;
SELECT proj_same();

-- Assigning an element or a field reads the old value of a column the
-- query only updates (updatedCols, not selectedCols).
CREATE TYPE proj_pair AS (x int, y int);
CREATE TABLE proj_arr (id int, a int[], r proj_pair, j jsonb) USING anker;
INSERT INTO proj_arr VALUES (1, '{1,2,3}', (1, 2), '{"k": 1, "l": 2}');
UPDATE proj_arr SET a[2] = 22, r.y = 20, j['k'] = '10' WHERE id = 1;
SELECT * FROM proj_arr;
DROP TABLE proj_arr;
DROP TYPE proj_pair;

-- Whole-row references read every column, unrestricted.
SELECT counter('column_restricted_scans') AS r1 \gset
SELECT p FROM proj p WHERE id = 3;
SELECT counter('column_restricted_scans') - :r1 AS restricted_whole_row;

-- Two scans of one table reading different columns, a correlated subplan,
-- a view whose filter column the outer query does not name.
SELECT a.note, b.pad FROM proj a JOIN proj b ON a.id = b.id + 1 WHERE a.id < 10 ORDER BY 1;
SELECT a.note, b.pad FROM proj_heap a JOIN proj_heap b ON a.id = b.id + 1 WHERE a.id < 10 ORDER BY 1;
SELECT id, (SELECT max(note) FROM proj q WHERE q.k = p.k) FROM proj p WHERE id <= 3 ORDER BY id;
SELECT id, (SELECT max(note) FROM proj_heap q WHERE q.k = p.k) FROM proj_heap p WHERE id <= 3 ORDER BY id;
CREATE VIEW proj_v AS SELECT id, note FROM proj WHERE secret = 1;
SELECT note FROM proj_v WHERE id < 12 ORDER BY id;

-- A cursor's scan begins at its first FETCH: a row the transaction
-- inserted after DECLARE stays invisible to it, as with heap.
BEGIN;
SET LOCAL enable_indexscan = off;
SET LOCAL enable_bitmapscan = off;
DECLARE c CURSOR FOR SELECT note FROM proj WHERE k = 9 AND id > 270;
INSERT INTO proj (id, k, secret, note) VALUES (1000, 9, 0, 'late');
FETCH ALL FROM c;
COMMIT;
DELETE FROM proj WHERE id = 1000;

-- Scans begin on their node's first call, as with heap: the inner side of a
-- nested loop whose outer side is empty counts no scan; a scan that runs
-- counts one.
BEGIN;
SET LOCAL enable_hashjoin = off;
SET LOCAL enable_mergejoin = off;
SET LOCAL enable_indexscan = off;
SET LOCAL enable_bitmapscan = off;
SET LOCAL enable_material = off;
EXPLAIN (COSTS OFF) SELECT p.note FROM proj_heap h JOIN proj p ON p.k = h.k WHERE h.id < 0;
SELECT pg_stat_get_xact_numscans('proj'::regclass) AS scans0 \gset
SELECT p.note FROM proj_heap h JOIN proj p ON p.k = h.k WHERE h.id < 0;
SELECT pg_stat_get_xact_numscans('proj'::regclass) - :scans0 AS scans_of_idle_inner;
SELECT count(note) FROM proj WHERE k = 3;
SELECT pg_stat_get_xact_numscans('proj'::regclass) - :scans0 AS scans_after_one_run;
COMMIT;

-- A column added with a default reads as the default where not stored.
ALTER TABLE proj ADD COLUMN extra int DEFAULT 42;
SELECT id, extra FROM proj WHERE id IN (1, 2) ORDER BY id;

-- Row-level security: the policy's column is not among the columns the
-- query selects, so the scan is not restricted.
CREATE ROLE proj_reader;
GRANT SELECT (id, note) ON proj TO proj_reader;
ALTER TABLE proj ENABLE ROW LEVEL SECURITY;
CREATE POLICY proj_policy ON proj FOR SELECT USING (secret = 0);
SELECT counter('column_restricted_scans') AS r2 \gset
SET ROLE proj_reader;
SELECT count(*), min(id), max(id) FROM proj WHERE id < 30;
RESET ROLE;
SELECT counter('column_restricted_scans') - :r2 AS restricted_with_policy;

-- A child scanned through a parent with a policy: the parent's policy
-- applies to the child's rows, and its column is not selected either.
CREATE TABLE proj_parent (id int, secret int, note text) USING anker;
CREATE TABLE proj_child () INHERITS (proj_parent) USING anker;
INSERT INTO proj_child SELECT g, g % 2, 'c' || g FROM generate_series(1, 10) g;
ALTER TABLE proj_parent ENABLE ROW LEVEL SECURITY;
CREATE POLICY proj_parent_policy ON proj_parent USING (secret = 1);
GRANT SELECT (id, note) ON proj_parent TO proj_reader;
SET ROLE proj_reader;
SELECT string_agg(note, ',' ORDER BY id) FROM proj_parent;
RESET ROLE;

RESET anker.enable_scan_node;

DROP TABLE proj_child, proj_parent;
DROP VIEW proj_v;
DROP TABLE proj, proj_heap;
DROP ROLE proj_reader;
DROP FUNCTION proj_same, counter;
