-- AnkerScan reads only the columns a query needs and returns the same rows
-- as PostgreSQL's own SeqScan over anker tables.
-- (aggregates here exercise AnkerScan; AnkerAgg has its own suite)
SET anker.enable_agg_node = off;
CREATE TABLE sn (a int, b text, c float8, d numeric, e int[]) USING anker;
INSERT INTO sn SELECT g, 'text ' || g, g / 7.0, g * 3, ARRAY[g, g + 1]
  FROM generate_series(1, 20000) g;
ANALYZE sn;
SET max_parallel_workers_per_gather = 0;
EXPLAIN (COSTS OFF) SELECT sum(c) FROM sn;
EXPLAIN (COSTS OFF) SELECT count(*) FROM sn WHERE a % 3 = 0;
EXPLAIN (COSTS OFF) SELECT b FROM sn WHERE d > 100;
EXPLAIN (COSTS OFF) SELECT sn FROM sn;
EXPLAIN (COSTS OFF) SELECT ctid, tableoid FROM sn;
-- same answers with and without the node
CREATE TEMP TABLE answers (q int, node bool, result text);
DO $$
DECLARE
  qs text[] := ARRAY[
    'SELECT sum(c)::text FROM sn',
    'SELECT count(*)::text FROM sn WHERE a % 3 = 0',
    'SELECT string_agg(b, '','' ORDER BY a) FROM sn WHERE d BETWEEN 300 AND 600',
    'SELECT md5(string_agg(sn::text, '','' ORDER BY a)) FROM sn',
    'SELECT md5(string_agg(e::text, '','' ORDER BY ctid)) FROM sn',
    'SELECT count(*)::text FROM sn s1 WHERE a < 50 AND EXISTS (SELECT 1 FROM sn s2 WHERE s2.a = s1.a + 1)'];
  r text;
BEGIN
  FOR i IN 1..array_length(qs, 1) LOOP
    FOR node IN 0..1 LOOP
      EXECUTE format('SET anker.enable_scan_node = %s', node = 1);
      EXECUTE qs[i] INTO r;
      INSERT INTO answers VALUES (i, node = 1, r);
    END LOOP;
  END LOOP;
  RESET anker.enable_scan_node;
END $$;
SELECT q, count(DISTINCT result) AS distinct_answers FROM answers GROUP BY q ORDER BY q;
-- rescans: the inner side of a nested loop
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM generate_series(1, 3) x JOIN sn ON sn.a = x;
SELECT count(*) FROM generate_series(1, 3) x JOIN sn ON sn.a = x;
RESET enable_hashjoin;
RESET enable_mergejoin;
RESET enable_material;
-- parallel AnkerScan: every row exactly once
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT count(*), sum(a) FROM sn;
SELECT count(*), sum(a), count(DISTINCT a) FROM sn;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
-- a scrollable cursor over the node
BEGIN;
DECLARE cur SCROLL CURSOR FOR SELECT a FROM sn WHERE a <= 3;
FETCH ALL cur;
FETCH BACKWARD 2 cur;
COMMIT;
DROP TABLE sn;
