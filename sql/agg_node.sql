-- AnkerAgg: count/sum/avg (optionally grouped by integer-like columns)
-- computed inside the scan of one anker table. Every result is compared
-- with the same query on an identical heap table.
SET max_parallel_workers_per_gather = 0;
CREATE TABLE agg_a (g int2, k int, b bool, d date, ts timestamp,
                    i2 int2, i4 int, i8 bigint, n numeric, t text) USING anker;
-- 20,000 rows: several 4,096-row blocks, so later scans read clean blocks
-- straight from column pages; NULLs, negative values, numerics of mixed
-- scales, long numerics (stored out of line), NaN and infinities.
INSERT INTO agg_a
SELECT i % 7, CASE WHEN i % 11 = 0 THEN NULL ELSE i % 13 - 6 END, i % 3 = 0,
       date '2020-01-01' + i % 5, timestamp '2020-01-01' + (i % 4) * interval '1 hour',
       (i % 300 - 150)::int2, CASE WHEN i % 17 = 0 THEN NULL ELSE i * 7919 % 100003 - 50000 END,
       i::bigint * 1000003 * CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END,
       CASE WHEN i % 19 = 0 THEN NULL
            WHEN i % 5 = 0 THEN (i * 31 % 1000 - 500)::numeric / 100
            WHEN i % 5 = 1 THEN (i * 7 % 10000)::numeric / 1000000
            WHEN i % 5 = 2 THEN i::numeric * 123456789012345678901234567890
            ELSE -(i % 97)::numeric END,
       'x' || i
FROM generate_series(1, 20000) i;
CREATE TABLE agg_h (LIKE agg_a) USING heap;
INSERT INTO agg_h SELECT * FROM agg_a;

-- A dimension for joins: duplicate, NULL and unmatched join keys.
CREATE TABLE agg_dim_h (id int, region int, name text) USING heap;
INSERT INTO agg_dim_h SELECT i, i % 3, 'd' || i FROM generate_series(-7, 12) i;
INSERT INTO agg_dim_h VALUES (5, 9, 'dup'), (NULL, 1, 'null key'), (1000, 2, 'no partner');
CREATE TABLE agg_dim_a (LIKE agg_dim_h) USING anker;
INSERT INTO agg_dim_a SELECT * FROM agg_dim_h;
ANALYZE agg_a, agg_h, agg_dim_a, agg_dim_h;

-- Compare one query on both tables (TBL and DIM stand for the anker or
-- the heap tables); prints the row count, raises on any difference.
CREATE FUNCTION agg_same(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  a text[];
  h text[];
BEGIN
  EXECUTE format('SELECT coalesce(array_agg(r::text ORDER BY r::text), ''{}'') FROM (%s) r',
                 replace(replace(q, 'TBL', 'agg_a'), 'DIM', 'agg_dim_a')) INTO a;
  EXECUTE format('SELECT coalesce(array_agg(r::text ORDER BY r::text), ''{}'') FROM (%s) r',
                 replace(replace(q, 'TBL', 'agg_h'), 'DIM', 'agg_dim_h')) INTO h;
  IF a IS DISTINCT FROM h THEN
    RAISE EXCEPTION 'anker and heap differ for %: % vs %', q, a, h;
  END IF;
  RETURN cardinality(a);
END $$;

-- The plan shapes AnkerAgg takes.
EXPLAIN (COSTS OFF) SELECT g, count(*), sum(i4), avg(n) FROM agg_a GROUP BY g;
EXPLAIN (COSTS OFF) SELECT count(*) FROM agg_a WHERE i4 > 0;
EXPLAIN (COSTS OFF) SELECT k, sum(n) / count(*) FROM agg_a GROUP BY k ORDER BY k;
EXPLAIN (VERBOSE, COSTS OFF) SELECT g, avg(i8) FROM agg_a GROUP BY g;
-- ... and those it leaves to PostgreSQL.
EXPLAIN (COSTS OFF) SELECT g, count(*) FROM agg_a GROUP BY g HAVING count(*) > 1;
EXPLAIN (COSTS OFF) SELECT g, count(DISTINCT k) FROM agg_a GROUP BY g;
EXPLAIN (COSTS OFF) SELECT g, max(i4) FROM agg_a GROUP BY g;
EXPLAIN (COSTS OFF) SELECT t, count(*) FROM agg_a GROUP BY t;
EXPLAIN (COSTS OFF) SELECT sum(i4 + 1) FROM agg_a;
EXPLAIN (COSTS OFF) SELECT count(*) FILTER (WHERE b) FROM agg_a;
EXPLAIN (COSTS OFF) SELECT g, count(*) FROM agg_a GROUP BY ROLLUP (g);
EXPLAIN (COSTS OFF) SELECT count(*) FROM agg_a WHERE k IN (SELECT k FROM agg_h WHERE i4 > 0);
EXPLAIN (COSTS OFF) SELECT d.region, count(*) FROM agg_dim_a d LEFT JOIN agg_a f ON f.k = d.id GROUP BY d.region;
EXPLAIN (COSTS OFF) SELECT d.region, sum(d.id) FROM agg_dim_a d JOIN agg_a f ON f.k = d.id GROUP BY d.region;
EXPLAIN (COSTS OFF) SELECT count(*) FROM agg_dim_a d JOIN agg_a f ON f.k = d.id AND f.g = d.region;
SET anker.enable_agg_node = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM agg_a;
RESET anker.enable_agg_node;
-- Aggregation below a join: the anker table is grouped by its join column
-- in the scan, the other relation's plan runs as the node's child.
EXPLAIN (COSTS OFF) SELECT d.id, count(*) FROM agg_dim_h d, agg_a f WHERE d.id = f.k GROUP BY d.id;
EXPLAIN (COSTS OFF)
  SELECT d.region, count(*), sum(f.n) FROM agg_dim_a d JOIN agg_a f ON f.k = d.id
  WHERE d.name <> 'd3' AND f.i4 > 0 GROUP BY d.region;

-- Results equal heap's, twice: the first scan reads blocks with visibility
-- checks (and marks them clean), the second reads clean blocks directly.
SELECT agg_same(q) FROM (VALUES
  ('SELECT count(*), count(k), count(n), sum(i2), sum(i4), sum(i8), avg(i2), avg(i4), avg(i8), sum(n), avg(n) FROM TBL'),
  ('SELECT g, count(*), sum(i4), avg(i4), sum(n), avg(n) FROM TBL GROUP BY g'),
  ('SELECT k, b, count(*), sum(i8), avg(i8), avg(i2) FROM TBL GROUP BY k, b'),
  -- keys from -150 to 149, and up to 50,000: groups found by direct index and hashed
  ('SELECT i2, count(*), sum(i4), avg(i4), sum(n), avg(n) FROM TBL GROUP BY i2'),
  ('SELECT i4, count(*), avg(i8) FROM TBL GROUP BY i4'),
  ('SELECT d, ts, g, b, count(i4), sum(n) FROM TBL GROUP BY d, ts, g, b'),
  ('SELECT k, sum(n) / count(*) AS ratio, count(*) + 1 AS more FROM TBL GROUP BY k'),
  ('SELECT count(*), sum(n), avg(i4) FROM TBL WHERE i4 > 0 AND n < 100'),
  ('SELECT g, avg(n) FROM TBL WHERE n IS NOT NULL AND i2 % 5 <> 2 GROUP BY g'),
  ('SELECT 1 AS one, count(*) FROM TBL GROUP BY g'),
  ('SELECT g, count(*), sum(n) FROM TBL WHERE ts >= ''2020-01-01 01:00'' AND d < ''2020-01-04'' AND 3 <= i2 AND k <> 2 GROUP BY g'),
  ('SELECT count(*), avg(i8) FROM TBL WHERE i8 > 0 AND b = true AND g = 3'),
  ('SELECT k FROM TBL GROUP BY k'),
  ('SELECT d.id, count(*) FROM DIM d, TBL f WHERE d.id = f.k GROUP BY d.id'),
  ('SELECT d.region, d.id, count(*), count(f.n), sum(f.n), avg(f.i8), sum(f.i2) FROM DIM d JOIN TBL f ON f.k = d.id GROUP BY d.region, d.id'),
  ('SELECT f.k, count(*), avg(f.n) FROM agg_dim_h d JOIN TBL f ON d.id = f.k GROUP BY f.k'),
  ('SELECT count(*), sum(f.i4) FROM DIM d JOIN TBL f ON f.k = d.id WHERE d.name <> ''d3'' AND f.i4 > 0'),
  ('SELECT d.region, count(*) FROM DIM d JOIN TBL f ON f.k = d.id WHERE d.id > 100 GROUP BY d.region'),
  ('SELECT count(*), sum(f.n) FROM DIM d JOIN TBL f ON f.k = d.id WHERE d.id > 100')) AS v(q), generate_series(1, 2) AS pass(i);
SELECT plan_verbose_of('SELECT g, avg(n) FROM agg_a GROUP BY g');
SELECT plan_verbose_of('SELECT i4, count(*), avg(i8) FROM agg_a GROUP BY i4');
-- comparisons of integer-like columns with constants are evaluated in the
-- node, so clean blocks still skip slots; other clauses need slots
SELECT plan_verbose_of('SELECT count(*) FROM agg_a WHERE i4 > 0 AND ts < ''2020-01-01 02:00''');
SELECT plan_verbose_of('SELECT count(*) FROM agg_a WHERE i4 + 1 > 0');

-- Special values: NaN and infinities follow PostgreSQL's rules.
CREATE TABLE agg_special_a (g int, n numeric) USING anker;
INSERT INTO agg_special_a VALUES (1, 'NaN'), (1, 1), (2, 'Infinity'), (2, 5), (3, 'Infinity'),
  (3, '-Infinity'), (4, '-Infinity'), (4, NULL), (5, NULL);
CREATE TABLE agg_special_h (LIKE agg_special_a) USING heap;
INSERT INTO agg_special_h SELECT * FROM agg_special_a;
SELECT g, sum(n), avg(n), count(n) FROM agg_special_a GROUP BY g ORDER BY g;
SELECT (SELECT array_agg(r::text ORDER BY r::text) FROM (SELECT g, sum(n), avg(n) FROM agg_special_a GROUP BY g) r)
     = (SELECT array_agg(r::text ORDER BY r::text) FROM (SELECT g, sum(n), avg(n) FROM agg_special_h GROUP BY g) r) AS same;

-- Empty input: one row without GROUP BY, none with it.
CREATE TABLE agg_empty (g int, v int, n numeric) USING anker;
SELECT count(*), sum(v), avg(v), sum(n), avg(n) FROM agg_empty;
SELECT g, count(*) FROM agg_empty GROUP BY g;

-- Old versions: a cursor's snapshot predates the transaction's own later
-- changes, so its scan walks version chains for the changed rows.
BEGIN;
DECLARE ca CURSOR FOR SELECT g, count(*), sum(i4), sum(n), avg(i8) FROM agg_a GROUP BY g ORDER BY g;
DECLARE ch CURSOR FOR SELECT g, count(*), sum(i4), sum(n), avg(i8) FROM agg_h GROUP BY g ORDER BY g;
UPDATE agg_a SET i4 = i4 + 1, n = n * 2 WHERE g = 1;
UPDATE agg_h SET i4 = i4 + 1, n = n * 2 WHERE g = 1;
DELETE FROM agg_a WHERE g = 2 AND k = 0;
DELETE FROM agg_h WHERE g = 2 AND k = 0;
INSERT INTO agg_a (g, i4, n) VALUES (3, 1000, 1.5);
INSERT INTO agg_h (g, i4, n) VALUES (3, 1000, 1.5);
FETCH ALL FROM ca;
FETCH ALL FROM ch;
-- the transaction's own changes are seen by its next statements
SELECT agg_same('SELECT g, count(*), sum(i4), sum(n), avg(i8) FROM TBL GROUP BY g');
ROLLBACK;
SELECT agg_same('SELECT g, count(*), sum(i4), sum(n), avg(i8) FROM TBL GROUP BY g');

-- Committed updates and deletes, then the same comparisons (blocks with
-- deleted rows take the checked path until VACUUM).
UPDATE agg_a SET n = n + 1, i8 = -i8 WHERE k = 3;
UPDATE agg_h SET n = n + 1, i8 = -i8 WHERE k = 3;
DELETE FROM agg_a WHERE g = 4 AND b;
DELETE FROM agg_h WHERE g = 4 AND b;
SELECT agg_same('SELECT g, k, count(*), sum(i8), avg(n) FROM TBL GROUP BY g, k');
SELECT agg_same('SELECT count(*), sum(n), avg(i2) FROM TBL WHERE k = 3');
-- Rows updated in place (and committed) count by their newest version: a
-- later snapshot reads their blocks clean, chains and all. The first scan
-- checks rows and marks the blocks, the second reads them without checks.
CREATE TABLE agg_upd (k int, v int) USING anker;
INSERT INTO agg_upd SELECT i % 5, i FROM generate_series(1, 8192) i;
UPDATE agg_upd SET v = v + 1 WHERE v % 100 = 0;
SELECT sum(v) FROM agg_upd;
SELECT plan_verbose_of('SELECT k, sum(v) FROM agg_upd GROUP BY k');
DROP TABLE agg_upd;

-- Generic plans with parameters in the WHERE clause.
PREPARE agg_p(int) AS SELECT g, count(*), sum(n) FROM agg_a WHERE i4 > $1 GROUP BY g ORDER BY g;
PREPARE agg_q(int) AS SELECT g, count(*), sum(n) FROM agg_h WHERE i4 > $1 GROUP BY g ORDER BY g;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE agg_p(0);
EXECUTE agg_p(0);
EXECUTE agg_q(0);
EXECUTE agg_p(40000);
EXECUTE agg_q(40000);
RESET plan_cache_mode;

-- Re-executing the node (rescans) returns the same groups.
SET enable_material = off;
SELECT x, s.c FROM generate_series(1, 3) x,
  LATERAL (SELECT count(*) AS c FROM agg_a WHERE k = 1) s ORDER BY x;
RESET enable_material;

-- An error inside the node's WHERE evaluation is an ordinary ERROR.
SELECT sum(i4) FROM agg_a WHERE 1 / (g - 3) > 0;
SELECT agg_same('SELECT sum(i4) FROM TBL WHERE g <> 3 AND 1 / (g - 3) > 0');

-- Inside a writing transaction the node reads the live columns.
BEGIN;
INSERT INTO agg_a (g, i4) SELECT 9, i FROM generate_series(1, 100) i;
EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF)
  UPDATE agg_a SET k = 0 WHERE g = 9 AND i4 = (SELECT count(*) FROM agg_a WHERE g = 9);
SELECT count(*), sum(i4) FROM agg_a WHERE g = 9;
ROLLBACK;
SELECT count(*) FROM agg_a WHERE g = 9;

DROP TABLE agg_a, agg_h, agg_dim_a, agg_dim_h, agg_special_a, agg_special_h, agg_empty;
DROP FUNCTION agg_same(text);
