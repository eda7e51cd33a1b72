-- anker.olap_engine = duckdb: read-only queries over anker tables run in the embedded
-- DuckDB when it answers them exactly as PostgreSQL does. Every query is run on anker
-- tables with DuckDB and on identical heap tables with PostgreSQL, and the rows are
-- compared as PostgreSQL prints them (values, NULLs, numeric scales, char(n) padding);
-- olap_check says whether DuckDB ran the query or why not.
SET max_parallel_workers_per_gather = 0;
CREATE TABLE olap_a (id int, g int2, i8 bigint, f4 real, f8 float8, b bool, d date, ts timestamp,
                     n numeric(12,2), big numeric(38,6), t text, v varchar(12), c char(5)) USING anker;
INSERT INTO olap_a
SELECT i, (i % 7)::int2, i::bigint * 1000003 * (CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END),
       (i % 100) / 8.0, i / 3.0, i % 3 = 0,
       date '2020-01-01' + i % 400, timestamp '2019-12-31 23:00' + i * interval '37 minutes',
       (i % 1000 - 500) / 4.0, i * 1234567.123456, 'x' || (i % 50), 'v' || (i % 13),
       CASE WHEN i % 4 = 0 THEN 'ab' WHEN i % 4 = 1 THEN 'abc' ELSE 'b' || (i % 10) END
FROM generate_series(1, 20000) i;
-- NULLs in every column, and the infinities of dates and timestamps.
INSERT INTO olap_a (id) SELECT -i FROM generate_series(1, 5) i;
INSERT INTO olap_a (id, d, ts) VALUES (-10, 'infinity', 'infinity'), (-11, '-infinity', '-infinity');
CREATE TABLE olap_h (LIKE olap_a) USING heap;
INSERT INTO olap_h SELECT * FROM olap_a;
-- A small dimension (below anker.snapshot_min_rows in production; rows copied by the backend).
CREATE TABLE dim_a (id int, name text, grp int) USING anker;
INSERT INTO dim_a SELECT i, 'n' || i, i % 3 FROM generate_series(0, 9) i;
INSERT INTO dim_a VALUES (NULL, 'null id', 1), (5, 'dup', 2);
CREATE TABLE dim_h (LIKE dim_a) USING heap;
INSERT INTO dim_h SELECT * FROM dim_a;
ANALYZE olap_a, olap_h, dim_a, dim_h;

-- Every query DuckDB can answer goes to it here, however cheap PostgreSQL's plan
-- (anker.olap_min_scan_fraction and anker.olap_min_cost are tested at the end).
SET anker.olap_min_scan_fraction = 0;
SET anker.olap_min_cost = 0;

-- q: a query over olap@ and dim@ (@ becomes _a or _h). ordered: compare the rows in order.
CREATE FUNCTION olap_check(q text, ordered bool DEFAULT false) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    a text[] := '{}';
    h text[] := '{}';
    r record;
    plan text := '';
    l text;
BEGIN
    SET LOCAL anker.olap_engine = duckdb;
    FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || replace(q, '@', '_a') LOOP
        plan := plan || l || E'\n';
    END LOOP;
    FOR r IN EXECUTE replace(q, '@', '_a') LOOP a := a || r::text; END LOOP;
    SET LOCAL anker.olap_engine = postgres;
    FOR r IN EXECUTE replace(q, '@', '_h') LOOP h := h || r::text; END LOOP;
    IF NOT ordered THEN
        a := ARRAY(SELECT x FROM unnest(a) x ORDER BY x COLLATE "C");
        h := ARRAY(SELECT x FROM unnest(h) x ORDER BY x COLLATE "C");
    END IF;
    RETURN CASE WHEN a = h THEN format('same, %s rows', cardinality(a))
                ELSE format('DIFFERENT: %s vs %s', a[1:5], h[1:5]) END
        || CASE WHEN plan LIKE '%AnkerDuckDB%' THEN ' (DuckDB)'
                ELSE ' (PostgreSQL: ' || coalesce(substring(plan from 'DuckDB not used: ([^\n]*)'), '?') || ')' END;
END $$;

-- Scans, filters and every type.
SELECT olap_check('SELECT * FROM olap@ WHERE id % 97 = 3 OR id < 0');
SELECT olap_check('SELECT id, n, big, c, v FROM olap@ WHERE n > 10.5 AND c = ''ab'' AND t LIKE ''x1%''');
SELECT olap_check('SELECT d, ts FROM olap@ WHERE d >= date ''2020-06-01'' AND ts < timestamp ''2020-03-01'' OR id < -9');
SELECT olap_check('SELECT id FROM olap@ WHERE c LIKE ''ab%'' AND v NOT LIKE ''v1%'' AND b');
SELECT olap_check('SELECT id, i8 * 2 - 1, n * 3.0 + big, -n, f8, g + id FROM olap@ WHERE i8 > 0 AND f4 < 3.5');
SELECT olap_check('SELECT n * 3 FROM olap@ WHERE id < 10');
SELECT olap_check('SELECT c, substr(t, 1, 2), mod(id, 7), ascii(t), c::text FROM olap@ WHERE id % 101 = 0');
SELECT olap_check('SELECT coalesce(n, 1.50), CASE WHEN g > 3 THEN ''high'' ELSE t END FROM olap@ WHERE id % 53 = 1 OR id < 0');
SELECT olap_check('SELECT id FROM olap@ WHERE n IS NULL OR big IS NOT NULL AND id < 100');
SELECT olap_check('SELECT coalesce(n, -1.00) FROM olap@ WHERE id < 10');
-- Aggregates: count, sum (int sums widen: bigint, numeric), min, max, grouped, HAVING.
SELECT olap_check('SELECT count(*), count(n), sum(id), sum(g), sum(i8), sum(n), sum(big), min(t), max(v), min(c), max(d), min(ts), max(f8) FROM olap@');
SELECT olap_check('SELECT g, count(*), sum(n), max(big), count(DISTINCT t) FROM olap@ GROUP BY g HAVING count(*) > 10');
SELECT olap_check('SELECT c, b, sum(id) FROM olap@ GROUP BY c, b');
SELECT olap_check('SELECT g, count(*) FROM olap@ GROUP BY g HAVING sum(n) > -400 AND max(t) > ''x3''');
-- EXTRACT: DuckDB's of ±infinity is NULL where PostgreSQL's is ±Infinity, so the scan of
-- a column under EXTRACT refuses infinite values (olap_a has some).
CREATE TABLE ev_a USING anker AS SELECT id, d, ts, n FROM olap_a WHERE id > 0;
CREATE TABLE ev_h USING heap AS SELECT * FROM ev_a;
SELECT olap_check('SELECT extract(year FROM d) AS y, extract(dow FROM d), extract(hour FROM ts), sum(n) FROM ev@ GROUP BY 1, 2, 3');
SET anker.olap_engine = duckdb;
SELECT extract(year FROM d), count(*) FROM olap_a GROUP BY 1;
RESET anker.olap_engine;
SELECT olap_check('SELECT count(*), sum(n) FROM olap@ WHERE id > 1000000');
-- Order, NULLs first when descending (as PostgreSQL), LIMIT.
SELECT olap_check('SELECT n, id FROM olap@ ORDER BY n DESC, id LIMIT 20', true);
SELECT olap_check('SELECT n, id FROM olap@ ORDER BY n NULLS FIRST, id LIMIT 20', true);
SELECT olap_check('SELECT t, count(*) FROM olap@ GROUP BY t ORDER BY 2 DESC, 1', true);
-- Joins, sub-queries.
SELECT olap_check('SELECT dim@.name, count(*), sum(olap@.n) FROM olap@ JOIN dim@ ON olap@.g = dim@.id GROUP BY dim@.name');
SELECT olap_check('SELECT dim@.id, count(olap@.id) FROM dim@ LEFT JOIN olap@ ON olap@.g = dim@.id AND olap@.id < 50 GROUP BY dim@.id');
SELECT olap_check('SELECT count(*) FROM olap@ o, dim@ d1, dim@ d2 WHERE o.g = d1.id AND d1.grp = d2.id');
SELECT olap_check('SELECT count(*) FROM olap@ WHERE g IN (SELECT id FROM dim@ WHERE grp = 1)');
SELECT olap_check('SELECT count(*) FROM olap@ o WHERE NOT EXISTS (SELECT 1 FROM dim@ d WHERE d.id = o.g)');
SELECT olap_check('SELECT id, (SELECT max(name) FROM dim@ WHERE dim@.id = olap@.g) FROM olap@ WHERE id < 30');
SELECT olap_check('SELECT g, s FROM (SELECT g, sum(id) AS s FROM olap@ GROUP BY g) x WHERE s > 1000');
SELECT olap_check('WITH w AS (SELECT g, count(*) AS n FROM olap@ GROUP BY g) SELECT sum(n) FROM w');
-- DuckDB joins in the order of PostgreSQL's plan (PostgreSQL has the statistics): a bushy
-- join tree stays bushy, and a sub-query in FROM follows its own plan.
SELECT olap_check('SELECT d1.grp, count(*) FROM olap@ o1, dim@ d1, olap@ o2, dim@ d2 WHERE o1.g = d1.id AND o2.g = d2.id AND d1.name = d2.name AND o1.id < 1000 AND o2.id < 1000 GROUP BY d1.grp');
SELECT olap_check('SELECT x.g, x.s, d.name, count(*) FROM (SELECT o.g, sum(o.n) AS s FROM olap@ o, dim@ d1, dim@ d2 WHERE o.g = d1.id AND d1.grp = d2.id GROUP BY o.g) x, dim@ d, olap@ o2 WHERE x.g = d.id AND o2.g = x.g GROUP BY 1, 2, 3');
-- An OR of ANDs over two tables: DuckDB is also given the one-table restrictions that
-- follow from it, as PostgreSQL's planner derives them.
SELECT olap_check('SELECT count(*), sum(o.n) FROM olap@ o, dim@ d WHERE (o.g = d.id AND d.grp = 1 AND o.id < 5000) OR (o.g = d.id AND d.grp = 2 AND o.id > 15000 AND d.name <> ''n5'')');
-- JOIN … ON written out: inner joins are flattened as the planner flattens them, and
-- followed; three or more relations with an outer join stay in PostgreSQL.
SELECT olap_check('SELECT d1.grp, count(*) FROM olap@ o1 JOIN dim@ d1 ON o1.g = d1.id JOIN olap@ o2 ON o2.id = o1.id + 1 JOIN dim@ d2 ON o2.g = d2.id WHERE o1.id < 1000 GROUP BY d1.grp');
SELECT olap_check('SELECT count(*) FROM olap@ o LEFT JOIN dim@ d1 ON o.g = d1.id JOIN dim@ d2 ON d2.id = o.g');
-- A sub-query PostgreSQL plans on its own (here an InitPlan in HAVING) follows its plan's
-- join order too.
SELECT olap_check('SELECT d1.grp, count(*) FROM olap@ o, dim@ d1, dim@ d2 WHERE o.g = d1.id AND d1.grp = d2.id GROUP BY d1.grp HAVING count(*) > (SELECT min(o.n) FROM olap@ o, dim@ d1, dim@ d2 WHERE o.g = d1.id AND d1.grp = d2.id)');
CREATE FUNCTION duckdb_query(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    l text;
    inside bool := false;
BEGIN
    FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
        EXIT WHEN l LIKE '%DuckDB Plan:%';
        inside := inside OR l LIKE '%DuckDB Query:%';
        IF inside THEN RETURN NEXT l; END IF;
    END LOOP;
END $$;
SET anker.olap_engine = duckdb;
SELECT duckdb_query('SELECT d1.grp, count(*) FROM olap_a o1, dim_a d1, olap_a o2, dim_a d2 WHERE o1.g = d1.id AND o2.g = d2.id AND d1.name = d2.name AND o1.id < 1000 AND o2.id < 1000 GROUP BY d1.grp');
SELECT duckdb_query('SELECT x.g, x.s, d.name, count(*) FROM (SELECT o.g, sum(o.n) AS s FROM olap_a o, dim_a d1, dim_a d2 WHERE o.g = d1.id AND d1.grp = d2.id GROUP BY o.g) x, dim_a d, olap_a o2 WHERE x.g = d.id AND o2.g = x.g GROUP BY 1, 2, 3');
SELECT duckdb_query('SELECT d1.grp, count(*) FROM olap_a o1 JOIN dim_a d1 ON o1.g = d1.id JOIN olap_a o2 ON o2.id = o1.id + 1 JOIN dim_a d2 ON o2.g = d2.id WHERE o1.id < 1000 GROUP BY d1.grp');
SELECT duckdb_query('SELECT count(*), sum(o.n) FROM olap_a o, dim_a d WHERE (o.g = d.id AND d.grp = 1 AND o.id < 5000) OR (o.g = d.id AND d.grp = 2 AND o.id > 15000 AND d.name <> ''n5'')');
SELECT duckdb_query('SELECT d1.grp, count(*) FROM olap_a o, dim_a d1, dim_a d2 WHERE o.g = d1.id AND d1.grp = d2.id GROUP BY d1.grp HAVING count(*) > (SELECT min(o.n) FROM olap_a o, dim_a d1, dim_a d2 WHERE o.g = d1.id AND d1.grp = d2.id)');
RESET anker.olap_engine;

-- PostgreSQL computes what DuckDB cannot exactly, on top of DuckDB's columns: avg as
-- PostgreSQL's numeric sum / count, numeric division, text concatenation.
SELECT olap_check('SELECT avg(id), avg(g), avg(i8), avg(n), avg(big) FROM olap@');
SELECT olap_check('SELECT g, avg(n), sum(n) / count(*), 100.00 * sum(n) / (1 + sum(big)) FROM olap@ GROUP BY g');
SELECT olap_check('SELECT avg(n) FROM olap@ WHERE id > 1000000');
-- A sum of a CASE whose branches differ in scale has the largest scale of the rows summed.
SELECT olap_check('SELECT g, sum(CASE WHEN b THEN n ELSE 0 END), sum(CASE WHEN id < 0 THEN n ELSE 0 END), sum(CASE WHEN g = 1 THEN n * 1.5 WHEN g = 2 THEN 7 END) FROM olap@ GROUP BY g');
SELECT olap_check('SELECT t || v, n / 7 FROM olap@ WHERE id < 5');
SELECT olap_check('SELECT count(*) FROM olap@ WHERE g IN (1, 3, 5) OR c IN (''ab'', ''b1'')');
-- avg below the top level: DuckDB computes PostgreSQL's value (numeric_div of the exact
-- sum by the count, rounded at the scale PostgreSQL picks), where only comparisons see it.
SELECT olap_check('SELECT g FROM olap@ GROUP BY g HAVING avg(n) > -0.13125656282814140707');
SELECT olap_check('SELECT count(*), sum(n) FROM olap@ WHERE n > (SELECT avg(n) FROM olap@ WHERE g = 3)');
SELECT olap_check('SELECT count(*) FROM olap@ o, (SELECT g AS gg, avg(id) AS a, avg(g) AS ag FROM olap@ GROUP BY g) s WHERE o.g = s.gg AND o.id < s.a AND o.g >= s.ag');
SELECT olap_check('SELECT count(*) FROM olap@ WHERE n >= (SELECT avg(n) FROM olap@ WHERE n = 0) AND id <= (SELECT avg(id) FROM dim@)');
SELECT olap_check('SELECT d.name FROM dim@ d WHERE d.grp < (SELECT avg(o.g) FROM olap@ o WHERE o.id % 10 = d.id)');
-- ... and not where its value (its scale) would show, or what it is compared with may not
-- fit DuckDB's DECIMAL(38, 24).
SELECT olap_check('SELECT s.a FROM (SELECT g, avg(n) AS a FROM olap@ GROUP BY g) s WHERE s.a > 0');
SELECT olap_check('SELECT count(*) FROM olap@ WHERE i8 > (SELECT avg(n) FROM olap@)');
SELECT olap_check('SELECT count(*) FROM olap@ WHERE n > (SELECT avg(i8) FROM olap@)');
-- An integer compared with such an avg is compared as a bigint with the avg's ceil or
-- floor (x < a is x < ceil(a), x <= a is x <= floor(a), ...): every operator, the avg on
-- either side, averages that are integers and that are not, a scalar sub-query.
SELECT olap_check('SELECT count(*) FROM olap@ o, (SELECT g, avg(id % 11) AS a FROM olap@ WHERE id > 0 GROUP BY g) t WHERE o.g = t.g AND o.id % 11 < t.a');
SELECT olap_check('SELECT count(*) FROM olap@ o, (SELECT g, avg(id % 11) AS a FROM olap@ WHERE id > 0 GROUP BY g) t WHERE o.g = t.g AND o.id % 11 <= t.a');
SELECT olap_check('SELECT count(*) FROM olap@ o, (SELECT g, avg(id % 11) AS a FROM olap@ WHERE id > 0 GROUP BY g) t WHERE o.g = t.g AND o.id % 11 > t.a');
SELECT olap_check('SELECT count(*) FROM olap@ o, (SELECT g, avg(id % 11) AS a FROM olap@ WHERE id > 0 GROUP BY g) t WHERE o.g = t.g AND o.id % 11 >= t.a');
SELECT olap_check('SELECT count(*) FROM olap@ o, (SELECT g, avg(id % 11 - 5) AS a FROM olap@ GROUP BY g) t WHERE o.g = t.g AND t.a < o.id % 11 - 5');
SELECT olap_check('SELECT count(*) FROM olap@ o, (SELECT g, avg(id % 11 - 5) AS a FROM olap@ GROUP BY g) t WHERE o.g = t.g AND t.a >= o.id % 11 - 5');
SELECT olap_check('SELECT o.g, count(*) FROM olap@ o, (SELECT g, avg(g) AS a FROM olap@ GROUP BY g) t WHERE o.g = t.g AND o.g <= t.a AND t.a <= o.g AND NOT o.g < t.a GROUP BY o.g');
SELECT olap_check('SELECT count(*) FROM olap@ WHERE id % 5 > (SELECT avg(g) FROM olap@) AND (SELECT avg(g) FROM olap@) <= g');
SELECT olap_check('SELECT count(*) FROM olap@ WHERE id < (SELECT avg(g) FROM olap@ WHERE g > 100)');
-- A quotient PostgreSQL gives more decimals than DuckDB's DECIMAL(38, 24) holds fails
-- clearly (0A000) instead of being rounded.
CREATE TABLE tiny_a (x numeric(20,10)) USING anker;
INSERT INTO tiny_a VALUES (0.0000000001);
SET anker.olap_engine = duckdb;
DO $$ BEGIN PERFORM count(*) FROM tiny_a WHERE x >= (SELECT avg(x) FROM tiny_a);
EXCEPTION WHEN feature_not_supported THEN RAISE NOTICE 'avg beyond DuckDB''s scale: %', SQLSTATE; END $$;
RESET anker.olap_engine;
SELECT count(*) FROM tiny_a WHERE x >= (SELECT avg(x) FROM tiny_a);
-- Short numerics (up to 8 digits) carry their scaled value in the column slot, which
-- DuckDB's scan reads instead of the digits; longer ones are parsed. Both in one column,
-- DuckDB's 2-, 4- and 8-byte DECIMALs, after in-place updates, one rolled back, an ALTER
-- that keeps the stored values (numeric(9,3) to (12,3)) and one that rewrites them.
CREATE TABLE dec_a (p4 numeric(4,1), p9 numeric(9,3), p18 numeric(18,4)) USING anker;
INSERT INTO dec_a SELECT (i % 2000 - 1000) / 10.0, (i * 7919 % 2000000 - 1000000) / 1000.0,
       CASE WHEN i % 3 = 0 THEN i * 123456789.1234 ELSE (i % 100 - 50) / 4.0 END
FROM generate_series(1, 5000) i;
INSERT INTO dec_a VALUES (0, 0, 0), (999.9, -999999.999, 99999999999999.9999), (-0.1, 0.001, -0.0001), (NULL, NULL, NULL);
UPDATE dec_a SET p9 = p9 + 1.5 WHERE p4 > 90;
BEGIN;
UPDATE dec_a SET p18 = p18 * 2 WHERE p4 < 0;
ROLLBACK;
CREATE TABLE dec_h USING heap AS SELECT * FROM dec_a;
SELECT olap_check('SELECT sum(p4), sum(p9), sum(p18), min(p18), max(p9), count(*) FILTER (WHERE p18 > 1000) FROM dec@');
SELECT olap_check('SELECT p4, p9, p18 FROM dec@ WHERE p4 BETWEEN -1.5 AND 1.5 OR p18 > 10000000 OR p9 < -999999');
ALTER TABLE dec_a ALTER COLUMN p9 TYPE numeric(12,3);
ALTER TABLE dec_h ALTER COLUMN p9 TYPE numeric(12,3);
SELECT olap_check('SELECT sum(p9), max(p9), count(*) FILTER (WHERE p9 = 0.001) FROM dec@');
ALTER TABLE dec_a ALTER COLUMN p4 TYPE numeric(6,2);
ALTER TABLE dec_h ALTER COLUMN p4 TYPE numeric(6,2);
SELECT olap_check('SELECT sum(p4), sum(p9), min(p4), max(p9), count(*) FILTER (WHERE p4 = -0.1) FROM dec@');
-- What stays in PostgreSQL, and why.
SELECT olap_check('SELECT g, avg(n) FROM olap@ GROUP BY g ORDER BY 2', true);
SELECT olap_check('SELECT avg(DISTINCT g) FROM olap@');
SELECT olap_check('SELECT sum(f8) FROM olap@');
SELECT olap_check('SELECT id FROM olap@ WHERE t LIKE ''x\_1%''');
SELECT olap_check('SELECT c FROM olap@ WHERE c LIKE ''a_%''');
SELECT olap_check('SELECT row_number() OVER (ORDER BY id) FROM olap@ WHERE id < 5');
SELECT olap_check('SELECT count(*) FROM olap@ o JOIN dim_h d ON o.g = d.id');
SELECT olap_check('SELECT ctid FROM olap@ WHERE id = 1');

-- Visibility: the statement's snapshot, our own uncommitted changes, a subtransaction
-- rolled back, and a transaction in flight elsewhere (prepared).
BEGIN;
UPDATE olap_a SET n = n + 1 WHERE id % 10 = 0;
UPDATE olap_h SET n = n + 1 WHERE id % 10 = 0;
DELETE FROM olap_a WHERE id % 10 = 1;
DELETE FROM olap_h WHERE id % 10 = 1;
SAVEPOINT s;
INSERT INTO olap_a (id, n) VALUES (100000, 1.00);
ROLLBACK TO SAVEPOINT s;
INSERT INTO olap_a (id, n) SELECT id + 50000, n FROM olap_a WHERE id BETWEEN 1 AND 100;
INSERT INTO olap_h (id, n) SELECT id + 50000, n FROM olap_h WHERE id BETWEEN 1 AND 100;
SELECT olap_check('SELECT count(*), sum(n), max(id) FROM olap@');
COMMIT;
SELECT olap_check('SELECT count(*), sum(n), max(id) FROM olap@');
BEGIN;
UPDATE olap_a SET n = 0 WHERE id % 2 = 0;
DELETE FROM olap_a WHERE id % 3 = 0;
PREPARE TRANSACTION 'olap_in_flight';
SELECT olap_check('SELECT count(*), sum(n) FROM olap@');
ROLLBACK PREPARED 'olap_in_flight';
-- Every snapshot provider.
SET anker.snapshot_method = memcpy;
SELECT olap_check('SELECT g, count(*), sum(n) FROM olap@ GROUP BY g');
SET anker.snapshot_method = none;
SELECT olap_check('SELECT g, count(*), sum(n) FROM olap@ GROUP BY g');
RESET anker.snapshot_method;

-- Prepared statements: DuckDB takes custom plans, with the parameters' values as constants;
-- a generic plan stays in PostgreSQL, and costs so much that the plan cache keeps making
-- custom plans after its first five.
SET anker.olap_engine = duckdb;
SET plan_cache_mode = force_custom_plan;
PREPARE p1(int, numeric, text) AS SELECT count(*), sum(n), avg(i8) FROM olap_a WHERE g = $1 AND n > $2 AND t LIKE $3;
EXPLAIN (COSTS OFF) EXECUTE p1(3, 10.5, 'x1%');
EXECUTE p1(3, 10.5, 'x1%');
EXECUTE p1(4, -100, 'x2%');
SET anker.olap_engine = postgres;
SELECT count(*), sum(n), avg(i8) FROM olap_h WHERE g = 3 AND n > 10.5 AND t LIKE 'x1%';
SELECT count(*), sum(n), avg(i8) FROM olap_h WHERE g = 4 AND n > -100 AND t LIKE 'x2%';
SET anker.olap_engine = duckdb;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE p1(3, 10.5, 'x1%');
RESET plan_cache_mode;
DEALLOCATE p1;
PREPARE p2(int) AS SELECT count(*), sum(n) FROM olap_a WHERE g = $1;
EXECUTE p2(1);
EXECUTE p2(2);
EXECUTE p2(3);
EXECUTE p2(4);
EXECUTE p2(5);
EXECUTE p2(1);
SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'p2';
SET anker.olap_engine = postgres;
SELECT g, count(*), sum(n) FROM olap_h WHERE g IN (1, 2, 3, 4, 5) GROUP BY g ORDER BY g;
DEALLOCATE p2;
RESET anker.olap_engine;
-- EXPLAIN shows DuckDB's query.
SET anker.olap_engine = duckdb;
EXPLAIN (COSTS OFF, VERBOSE) SELECT g, count(*) FROM olap_a WHERE id > 5 GROUP BY g;
-- Errors keep PostgreSQL's SQLSTATEs.
DO $$ BEGIN PERFORM sum(id * 1000000) FROM olap_a; EXCEPTION WHEN numeric_value_out_of_range THEN RAISE NOTICE 'overflow: %', SQLSTATE; END $$;
DO $$ BEGIN PERFORM (SELECT id FROM olap_a WHERE id > 0) FROM dim_a; EXCEPTION WHEN cardinality_violation THEN RAISE NOTICE 'more than one row: %', SQLSTATE; END $$;
-- A cursor reads DuckDB's rows forward; a scrollable one stays in PostgreSQL.
BEGIN;
DECLARE cur CURSOR FOR SELECT id FROM olap_a WHERE id BETWEEN 1 AND 6 ORDER BY id;
FETCH 2 FROM cur;
FETCH 2 FROM cur;
CLOSE cur;
DECLARE scur SCROLL CURSOR FOR SELECT id FROM olap_a WHERE id BETWEEN 1 AND 3 ORDER BY id;
FETCH LAST FROM scur;
FETCH PRIOR FROM scur;
COMMIT;
-- Each query runs the statement DuckDB prepared while PostgreSQL planned it, on its own
-- connection: two cursors read at once; a plan whose prepared statement was pushed out
-- by nine newer plans (EXPLAINs, never run) prepares it again.
BEGIN;
DECLARE c1 CURSOR FOR SELECT g, count(*), sum(n) FROM olap_a GROUP BY g ORDER BY g;
DECLARE c2 CURSOR FOR SELECT a.g, count(*) FROM olap_a a JOIN dim_a d ON d.id = a.g GROUP BY a.g ORDER BY a.g;
FETCH 2 FROM c1;
FETCH 2 FROM c2;
FETCH ALL FROM c1;
FETCH ALL FROM c2;
DECLARE c3 CURSOR FOR SELECT g, count(*), sum(n) FROM olap_a GROUP BY g ORDER BY g;
EXPLAIN (COSTS OFF) SELECT g, count(*) FROM olap_a WHERE id > 1 GROUP BY g \g /dev/null
EXPLAIN (COSTS OFF) SELECT g, count(*) FROM olap_a WHERE id > 2 GROUP BY g \g /dev/null
EXPLAIN (COSTS OFF) SELECT g, count(*) FROM olap_a WHERE id > 3 GROUP BY g \g /dev/null
EXPLAIN (COSTS OFF) SELECT g, count(*) FROM olap_a WHERE id > 4 GROUP BY g \g /dev/null
EXPLAIN (COSTS OFF) SELECT g, count(*) FROM olap_a WHERE id > 5 GROUP BY g \g /dev/null
EXPLAIN (COSTS OFF) SELECT g, count(*) FROM olap_a WHERE id > 6 GROUP BY g \g /dev/null
EXPLAIN (COSTS OFF) SELECT g, count(*) FROM olap_a WHERE id > 7 GROUP BY g \g /dev/null
EXPLAIN (COSTS OFF) SELECT g, count(*) FROM olap_a WHERE id > 8 GROUP BY g \g /dev/null
EXPLAIN (COSTS OFF) SELECT g, count(*) FROM olap_a WHERE id > 9 GROUP BY g \g /dev/null
FETCH ALL FROM c3;
COMMIT;
SET anker.olap_engine = postgres;
SELECT g, count(*), sum(n) FROM olap_h GROUP BY g ORDER BY g;
SELECT a.g, count(*) FROM olap_h a JOIN dim_a d ON d.id = a.g GROUP BY a.g ORDER BY a.g;
SET anker.olap_engine = duckdb;
-- DuckDB is given the columns' bounds as statistics: a filter that always holds becomes
-- constant_or_null. A SQL function plans all its statements before the first runs: its
-- SELECT was prepared with bounds its INSERTs then widened, so it is prepared again (the
-- statement prepared at planning would drop k < 500 and count 100).
CREATE TABLE bnd_a (k int, d date) USING anker;
CREATE TABLE bnd_b (k int) USING anker;
INSERT INTO bnd_a SELECT i, date '2020-01-01' + i FROM generate_series(1, 100) i;
INSERT INTO bnd_b SELECT i FROM generate_series(1, 100) i;
EXPLAIN (COSTS OFF) SELECT count(*) FROM bnd_a a JOIN bnd_b b ON a.k = b.k WHERE a.k < 500 AND a.d < date '2025-01-01';
CREATE FUNCTION bnd_probe() RETURNS bigint LANGUAGE sql AS $$
  INSERT INTO bnd_a VALUES (1000000, date '2030-01-01'), (-5, date '1990-01-01');
  INSERT INTO bnd_b VALUES (1000000), (-5);
  SELECT count(*) FROM bnd_a a JOIN bnd_b b ON a.k = b.k WHERE a.k < 500 AND a.d < date '2025-01-01';
$$;
SELECT bnd_probe();
SET anker.olap_engine = postgres;
SELECT count(*) FROM bnd_a a JOIN bnd_b b ON a.k = b.k WHERE a.k < 500 AND a.d < date '2025-01-01';
SET anker.olap_engine = duckdb;
DROP FUNCTION bnd_probe();
DROP TABLE bnd_a, bnd_b;
-- The row count DuckDB is given is an estimate, not a maximum: rows added after planning
-- within the bounds keep the prepared statement, whose sum must still not assume 64 bits.
CREATE TABLE ovf_a (g int, k bigint) USING anker;
INSERT INTO ovf_a VALUES (1, 4000000000000000000), (1, -4000000000000000000);
CREATE FUNCTION ovf_probe() RETURNS numeric LANGUAGE sql AS $$
  INSERT INTO ovf_a VALUES (1, 4000000000000000000), (1, 4000000000000000000), (1, 4000000000000000000);
  SELECT sum(k) FROM ovf_a WHERE g = 1;
$$;
SELECT ovf_probe();
SET anker.olap_engine = postgres;
SELECT sum(k) FROM ovf_a WHERE g = 1;
SET anker.olap_engine = duckdb;
DROP FUNCTION ovf_probe();
DROP TABLE ovf_a;
-- Cancel: a statement timeout stops a long DuckDB query.
SET statement_timeout = '300ms';
SELECT count(*) FROM olap_a a, olap_a b WHERE a.t < b.t;
RESET statement_timeout;
-- Memory: a query over anker.olap_memory_limit fails cleanly (53200).
SET anker.olap_memory_limit = '16MB';
DO $$ BEGIN PERFORM count(*) FROM (SELECT a.id, b.id FROM olap_a a, olap_a b WHERE a.id < 3000 AND b.id < 3000 GROUP BY a.id, b.id) x;
EXCEPTION WHEN out_of_memory THEN RAISE NOTICE 'out of memory: %', SQLSTATE; END $$;
RESET anker.olap_memory_limit;
-- Afterwards, DuckDB answers again.
SELECT count(*) FROM olap_a;
-- An error PostgreSQL raises while DuckDB's query runs (here casting its result)
-- aborts cleanly, in a savepoint too, and leaves nothing open: the table can be
-- dropped. (Closing the relations again during the abort failed it: "relcache
-- reference ... is not owned by resource owner".)
CREATE TABLE olap_err (q1 int8) USING anker;
INSERT INTO olap_err VALUES (123), (4567890123456789);
EXPLAIN (COSTS OFF) SELECT CAST(q1 AS int4) FROM olap_err;
SELECT CAST(q1 AS int4) FROM olap_err;
BEGIN;
SAVEPOINT s;
SELECT CAST(q1 AS int4) FROM olap_err;
ROLLBACK TO s;
SELECT count(*) FROM olap_err;
COMMIT;
DROP TABLE olap_err;
-- count(*) gets a column from DuckDB's scan all the same; a table with none DuckDB
-- takes stays in PostgreSQL.
CREATE TABLE olap_pt (p point) USING anker;
INSERT INTO olap_pt SELECT point(g, g) FROM generate_series(1, 100) g;
EXPLAIN (COSTS OFF) SELECT count(*) FROM olap_pt;
SELECT count(*) FROM olap_pt;
DROP TABLE olap_pt;
-- DuckDB reads tables in full: a query PostgreSQL answers through an index stays there.
RESET anker.olap_min_scan_fraction;
CREATE INDEX olap_a_id ON olap_a (id);
EXPLAIN (COSTS OFF) SELECT n FROM olap_a WHERE id = 5;
EXPLAIN (COSTS OFF) SELECT sum(n) FROM olap_a;
-- A plan cheaper than DuckDB's start-up stays in PostgreSQL, prepared or not; EXPLAIN
-- says so for queries of anker tables only.
RESET anker.olap_min_cost;
EXPLAIN (COSTS OFF) SELECT count(*) FROM dim_a WHERE grp = 1;
CREATE TABLE olap_heap_small (x int) USING heap;
EXPLAIN (COSTS OFF) SELECT count(*) FROM olap_heap_small;
DROP TABLE olap_heap_small;
PREPARE p3(int) AS SELECT count(*) FROM dim_a WHERE grp = $1;
EXECUTE p3(1);
EXECUTE p3(2);
EXECUTE p3(1);
EXECUTE p3(2);
EXECUTE p3(1);
EXECUTE p3(2);
EXECUTE p3(1);
SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'p3';
DEALLOCATE p3;
RESET anker.olap_engine;
-- DuckDB reads text as UTF-8: in a database of another encoding only ASCII is handed over
-- (LATIN1's 'Ã©' is two characters to PostgreSQL and one, 'é', to DuckDB).
\set regress_db :DBNAME
CREATE DATABASE anker_latin1 TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C';
\c anker_latin1
SET client_min_messages = warning;
CREATE EXTENSION anker;
CREATE TABLE lat_a (id int, t text) USING anker;
INSERT INTO lat_a SELECT i, 'cafe' || i FROM generate_series(1, 100) i;
SET anker.olap_min_cost = 0;
SET anker.olap_engine = duckdb;
SELECT count(*), max(t) FROM lat_a WHERE t LIKE 'cafe1_';
EXPLAIN (COSTS OFF) SELECT count(*) FROM lat_a WHERE t = E'caf\xe9';
INSERT INTO lat_a VALUES (0, E'caf\xc3\xa9');
SELECT count(*) FROM lat_a WHERE t LIKE 'caf_';
SET anker.olap_engine = postgres;
SELECT count(*) FROM lat_a WHERE t LIKE 'caf_';
\c :regress_db
DROP DATABASE anker_latin1;
