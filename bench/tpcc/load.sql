-- TPC-C initial population (spec clause 4.3.3.1) plus CH-benCHmark's supplier, nation, region.
--
-- psql variables:  warehouses  W, the number of warehouses (>= 1).
--                  load_time   optional: the timestamp the rows are stamped with (default: now);
--                              two loads with the same W and load_time have identical rows.
-- Run after schema.sql and before indexes.sql. Set-based: every table is one INSERT ... SELECT
-- over generate_series, so it works on any table access method. The seed is fixed (setseed) and
-- parallel query is off in this session, so the same W gives the same data (timestamps aside).
--
-- Random strings: the spec's "random a-string [x..y]" is a substring of random length and random
-- offset of a 256 KiB pool of random alphanumerics built once from the seeded generator
-- (generating every character with random() would make loading several times slower).
--
-- NURand constants (clause 2.1.6): C_LAST uses C = 86 here and C = 173 at run time
-- (delta 87: within 65..119, not 96 or 112); C_ID uses 259 and OL_I_ID 7911 at run time.

\set ON_ERROR_STOP 1
SET max_parallel_workers_per_gather = 0;
SET synchronous_commit = off;
SELECT setseed(0.20240607);
\if :{?load_time}
\else
SELECT now() AS load_time \gset
\endif

-- random integer in [lo, hi]
CREATE FUNCTION pg_temp.rnd(lo int, hi int) RETURNS int LANGUAGE sql VOLATILE AS
$$ SELECT lo + floor(random() * (hi - lo + 1))::int $$;

-- the string pools, as IMMUTABLE functions returning constants (folded into the plans)
DO $$
DECLARE
    alnum text := 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
    a text;
    n text;
BEGIN
    SELECT string_agg(substr(alnum, 1 + floor(random() * 62)::int, 1), '') INTO a
    FROM generate_series(1, 262144);
    SELECT string_agg(floor(random() * 10)::int::text, '') INTO n
    FROM generate_series(1, 65536);
    -- bytea, because substring() of a bytea is O(1) while substr() of UTF-8 text walks the
    -- string from its start.
    EXECUTE format('CREATE FUNCTION pg_temp.apool() RETURNS bytea LANGUAGE sql IMMUTABLE AS %L',
                   'SELECT ' || quote_literal(convert_to(a, 'UTF8')) || '::bytea');
    EXECUTE format('CREATE FUNCTION pg_temp.npool() RETURNS bytea LANGUAGE sql IMMUTABLE AS %L',
                   'SELECT ' || quote_literal(convert_to(n, 'UTF8')) || '::bytea');
END $$;

-- random a-string of length [lo, hi]
CREATE FUNCTION pg_temp.astr(lo int, hi int) RETURNS text LANGUAGE sql VOLATILE AS
$$ SELECT encode(substring(pg_temp.apool() FROM 1 + floor(random() * (262144 - hi))::int
                                           FOR lo + floor(random() * (hi - lo + 1))::int), 'escape') $$;
-- random n-string (digits) of length len
CREATE FUNCTION pg_temp.nstr(len int) RETURNS text LANGUAGE sql VOLATILE AS
$$ SELECT encode(substring(pg_temp.npool() FROM 1 + floor(random() * (65536 - len))::int FOR len),
                  'escape') $$;
-- I_DATA / S_DATA: a-string [26..50], 10% of them with "ORIGINAL" at a random position
CREATE FUNCTION pg_temp.data_original(s text, r float8, pos float8) RETURNS text LANGUAGE sql IMMUTABLE AS
$$ SELECT CASE WHEN r < 0.1
               THEN overlay(s PLACING 'ORIGINAL' FROM 1 + floor(pos * (length(s) - 7))::int)
               ELSE s END $$;
-- NURand(A, x, y) with the load-time C (clause 2.1.6)
CREATE FUNCTION pg_temp.nurand(a int, x int, y int, c int) RETURNS int LANGUAGE sql VOLATILE AS
$$ SELECT (((floor(random() * (a + 1))::int | (x + floor(random() * (y - x + 1))::int)) + c)
           % (y - x + 1)) + x $$;

\echo '  item (100000 rows)'
INSERT INTO item
SELECT i, pg_temp.rnd(1, 10000), pg_temp.astr(14, 24), pg_temp.rnd(100, 10000) / 100.0,
       pg_temp.data_original(s, r, pos)
FROM (SELECT i, pg_temp.astr(26, 50) AS s, random() AS r, random() AS pos
      FROM generate_series(1, 100000) AS i OFFSET 0) AS g;

\echo '  warehouse (W rows)'
INSERT INTO warehouse
SELECT w, pg_temp.astr(6, 10), pg_temp.astr(10, 20), pg_temp.astr(10, 20), pg_temp.astr(10, 20),
       chr(65 + pg_temp.rnd(0, 25)) || chr(65 + pg_temp.rnd(0, 25)), pg_temp.nstr(4) || '11111',
       pg_temp.rnd(0, 2000) / 10000.0, 300000.00
FROM generate_series(1, :warehouses) AS w;

\echo '  district (10 per warehouse)'
INSERT INTO district
SELECT (n - 1) % 10 + 1, (n - 1) / 10 + 1,
       pg_temp.astr(6, 10), pg_temp.astr(10, 20), pg_temp.astr(10, 20), pg_temp.astr(10, 20),
       chr(65 + pg_temp.rnd(0, 25)) || chr(65 + pg_temp.rnd(0, 25)), pg_temp.nstr(4) || '11111',
       pg_temp.rnd(0, 2000) / 10000.0, 30000.00, 3001
FROM generate_series(1, :warehouses * 10) AS n;

\echo '  stock (100000 per warehouse)'
INSERT INTO stock
SELECT i, w, pg_temp.rnd(10, 100),
       pg_temp.astr(24, 24), pg_temp.astr(24, 24), pg_temp.astr(24, 24), pg_temp.astr(24, 24),
       pg_temp.astr(24, 24), pg_temp.astr(24, 24), pg_temp.astr(24, 24), pg_temp.astr(24, 24),
       pg_temp.astr(24, 24), pg_temp.astr(24, 24),
       0, 0, 0, pg_temp.data_original(s, r, pos)
FROM (SELECT (n - 1) % 100000 + 1 AS i, (n - 1) / 100000 + 1 AS w,
             pg_temp.astr(26, 50) AS s, random() AS r, random() AS pos
      FROM generate_series(1, :warehouses * 100000) AS n OFFSET 0) AS g;

\echo '  customer (3000 per district)'
INSERT INTO customer
SELECT c, d, w,
       pg_temp.astr(8, 16), 'OE',
       tpcc_lastname(CASE WHEN c <= 1000 THEN c - 1 ELSE pg_temp.nurand(255, 0, 999, 86) END),
       pg_temp.astr(10, 20), pg_temp.astr(10, 20), pg_temp.astr(10, 20),
       chr(65 + pg_temp.rnd(0, 25)) || chr(65 + pg_temp.rnd(0, 25)), pg_temp.nstr(4) || '11111',
       pg_temp.nstr(16), :'load_time'::timestamptz,
       CASE WHEN random() < 0.1 THEN 'BC' ELSE 'GC' END,
       50000.00, pg_temp.rnd(0, 5000) / 10000.0, -10.00, 10.00, 1, 0,
       pg_temp.astr(300, 500)
FROM (SELECT (n - 1) % 3000 + 1 AS c, ((n - 1) / 3000) % 10 + 1 AS d, (n - 1) / 30000 + 1 AS w
      FROM generate_series(1, :warehouses * 30000) AS n) AS g;

\echo '  history (1 per customer)'
INSERT INTO history
SELECT (n - 1) % 3000 + 1, ((n - 1) / 3000) % 10 + 1, (n - 1) / 30000 + 1,
       ((n - 1) / 3000) % 10 + 1, (n - 1) / 30000 + 1,
       :'load_time'::timestamptz, 10.00, pg_temp.astr(12, 24)
FROM generate_series(1, :warehouses * 30000) AS n;

\echo '  orders (3000 per district, O_C_ID a random permutation of 1..3000)'
INSERT INTO orders
SELECT o_id, d, w, c, :'load_time'::timestamptz,
       CASE WHEN o_id < 2101 THEN pg_temp.rnd(1, 10) END,
       pg_temp.rnd(5, 15), 1
FROM (SELECT w, d, c, row_number() OVER (PARTITION BY w, d ORDER BY random()) AS o_id
      FROM (SELECT (n - 1) % 3000 + 1 AS c, ((n - 1) / 3000) % 10 + 1 AS d, (n - 1) / 30000 + 1 AS w
            FROM generate_series(1, :warehouses * 30000) AS n) AS cust) AS perm
ORDER BY w, d, o_id;

\echo '  order_line (O_OL_CNT per order)'
INSERT INTO order_line
SELECT o_id, o_d_id, o_w_id, ol_number, pg_temp.rnd(1, 100000), o_w_id,
       CASE WHEN o_id < 2101 THEN o_entry_d END,
       5,
       CASE WHEN o_id < 2101 THEN 0.00 ELSE pg_temp.rnd(1, 999999) / 100.0 END,
       pg_temp.astr(24, 24)
FROM (SELECT * FROM orders ORDER BY o_w_id, o_d_id, o_id) AS o,
     generate_series(1, o.o_ol_cnt) AS ol_number;

\echo '  new_order (the last 900 orders of every district)'
INSERT INTO new_order
SELECT o_id, d, w
FROM generate_series(1, :warehouses) AS w, generate_series(1, 10) AS d,
     generate_series(2101, 3000) AS o_id
ORDER BY w, d, o_id;

\echo '  region, nation, supplier (CH-benCHmark)'
INSERT INTO region
SELECT r - 1, name, pg_temp.astr(31, 115)
FROM unnest(ARRAY['AFRICA', 'AMERICA', 'ASIA', 'EUROPE', 'MIDDLE EAST']) WITH ORDINALITY AS t(name, r);

-- 62 nations keyed by the ASCII codes of '0'..'9', 'A'..'Z', 'a'..'z', so that
-- ascii(substr(c_state, 1, 1)) = n_nationkey (CH-benCHmark); the region assignment is synthetic.
INSERT INTO nation
SELECT ascii(substr('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz', k::int, 1)),
       name, (k::int - 1) % 5, pg_temp.astr(31, 114)
FROM unnest(ARRAY[
    'ALGERIA', 'ARGENTINA', 'BRAZIL', 'CANADA', 'EGYPT', 'ETHIOPIA', 'FRANCE', 'GERMANY',
    'INDIA', 'INDONESIA', 'IRAN', 'IRAQ', 'JAPAN', 'JORDAN', 'KENYA', 'MOROCCO', 'MOZAMBIQUE',
    'PERU', 'CHINA', 'ROMANIA', 'SAUDI ARABIA', 'VIETNAM', 'RUSSIA', 'UNITED KINGDOM',
    'UNITED STATES', 'AUSTRALIA', 'AUSTRIA', 'BELGIUM', 'BOLIVIA', 'BULGARIA', 'CAMEROON',
    'CHILE', 'COLOMBIA', 'CROATIA', 'CUBA', 'CZECHIA', 'DENMARK', 'ECUADOR', 'FINLAND', 'GHANA',
    'GREECE', 'HUNGARY', 'ICELAND', 'IRELAND', 'ITALY', 'KAZAKHSTAN', 'MALAYSIA', 'MEXICO',
    'MONGOLIA', 'NEPAL', 'NETHERLANDS', 'NEW ZEALAND', 'NIGERIA', 'NORWAY', 'PAKISTAN',
    'PHILIPPINES', 'POLAND', 'PORTUGAL', 'SENEGAL', 'SPAIN', 'SWEDEN', 'SWITZERLAND'])
    WITH ORDINALITY AS t(name, k);

INSERT INTO supplier
SELECT k, 'Supplier#' || lpad(k::text, 9, '0'), pg_temp.astr(10, 40),
       (SELECT n_nationkey FROM nation ORDER BY n_nationkey OFFSET (k % 62) LIMIT 1),
       pg_temp.nstr(15), pg_temp.rnd(-99999, 999999) / 100.0, pg_temp.astr(25, 100)
FROM generate_series(0, 9999) AS k;
