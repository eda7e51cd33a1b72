-- Every type round-trips exactly: compare text images of an anker table and
-- an identical heap table (json and point have no equality operator).
CREATE EXTENSION IF NOT EXISTS hstore;
CREATE EXTENSION IF NOT EXISTS citext;
CREATE EXTENSION IF NOT EXISTS seg;
CREATE EXTENSION IF NOT EXISTS cube;
CREATE EXTENSION IF NOT EXISTS isn;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TYPE pair AS (x int, label text);
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE DOMAIN shorttext AS varchar(10);

CREATE TABLE types_heap (
  id int, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, n numeric, n2 numeric(12,2),
  b bool, c char(5), vc varchar(20), t text, by bytea,
  d date, tm time, tmtz timetz, ts timestamp, tstz timestamptz, iv interval,
  u uuid, j json, jb jsonb, ai int[], at text[], a2 float8[][],
  m mood, p pair, dp posint, ds shorttext,
  pt point, ln line, ls lseg, bx box, pa path, pg polygon, ci circle,
  ine inet, ci2 cidr, mac macaddr, mac8 macaddr8,
  r4 int4range, rts tstzrange, rn numrange, mr int4multirange,
  mo money, o oid, nm name, ch "char", bi bit(5), vb varbit, tv tsvector, tq tsquery,
  lsn pg_lsn, x xml,
  hs hstore, cit citext, sg seg, cb cube, ean ean13
);
CREATE TABLE types_anker (LIKE types_heap) USING anker;

INSERT INTO types_heap VALUES
 (1, 1, 1, 1, 1.5, 1.5, 1.5, 1.50, true, 'ab', 'hello', 'world', '\x00ff',
  '2024-02-29', '12:34:56.789', '12:34:56+02', '2024-02-29 12:34:56.123456', '2024-02-29 12:34:56+00', '1 year 2 mons 3 days 04:05:06.789',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2, {"b": null}]}', '{"a": [1, 2, {"b": null}]}', '{1,2,3}', '{"a","b c",NULL}', '{{1.5,2.5},{3.5,4.5}}',
  'happy', ROW(1, 'one'), 7, 'short',
  '(1,2)', '{1,2,3}', '[(0,0),(1,1)]', '((0,0),(2,2))', '[(0,0),(1,1),(2,0)]', '((0,0),(1,1),(1,0))', '<(1,1),2>',
  '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05',
  '[1,10)', '[2024-01-01,2024-02-01)', '(1.5,2.5]', '{[1,3),[5,7)}',
  '$12.34', 42, 'a_name', 'x', B'10101', B'1101', 'a fat cat', 'fat & cat',
  '16/B374D848', '<doc>x</doc>',
  'a=>1, b=>2', 'MiXeD', '1.5 .. 2.5', '(1,2,3)', '978-0-306-40615-7'),
 (2, -32768, -2147483648, -9223372036854775808, 'NaN', 'NaN', 'NaN', -0.01, false, '', '', '', '',
  '-infinity', '00:00', '00:00+00', '-infinity', 'infinity', '-178000000 years',
  '00000000-0000-0000-0000-000000000000', '[]', '{}', '{}', '{}', '{}',
  'sad', ROW(NULL, NULL), 1, '',
  '(-0,0)', '{1,-1,0}', '[(0,0),(0,0)]', '((0,0),(0,0))', '((0,0))', '((0,0))', '<(0,0),0>',
  '::1', '::/0', '00:00:00:00:00:00', '00:00:00:00:00:00:00:00',
  'empty', '(,)', 'empty', '{}',
  '-$0.01', 0, '', ' ', B'00000', B'', '', 'a',
  '0/0', '<a/>',
  '', '', '-1e10', '(0)', '0000000000000'),
 (3, 32767, 2147483647, 9223372036854775807, 'Infinity', '-Infinity', 'Infinity', 9999999999.99, NULL, 'abcde', 'ünïcödé ✓', '日本語のテキスト', '\xdeadbeef',
  'infinity', '24:00', '23:59:59-12', 'infinity', '-infinity', '-1 day -00:00:00.000001',
  'ffffffff-ffff-ffff-ffff-ffffffffffff', '"str"', '"str"', '{NULL,1}', '{"ü"}', '{{NULL,NULL}}',
  'ok', NULL, 2147483647, '0123456789',
  '(1e300,-1e-300)', '{0,1,0}', '[(1,2),(3,4)]', '((3,4),(1,2))', '[(1,1)]', '((1,1),(2,2),(3,1),(2,0))', '<(0,0),1e10>',
  '2001:db8::1/64', '2001:db8::/32', 'ff:ff:ff:ff:ff:ff', 'ff:ff:ff:ff:ff:ff:ff:ff',
  '(,5]', '[2024-01-01,)', '[-1e10,1e10]', '{[1,2),[3,4),[10,)}',
  '$92233720368547758.07', 4294967295, repeat('n', 63), E'\\001', B'11111', repeat('1', 100)::varbit, 'x:1A,2B y:3', '!x | (y & z)',
  'FFFFFFFF/FFFFFFFF', '<r a="1">t&amp;</r>',
  'k=>NULL', repeat('Ab', 50), '<1', '(1,2),(3,4)', '979-0-2600-0043-8'),
 (4, NULL, NULL, NULL, '-0', '-0', '-0', NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL,
  NULL, NULL, NULL, NULL, NULL),
 (5, 0, 0, 0, 1e-38, 1e-308, 1e-300, 0, true, 'z', repeat('v', 20), repeat('€', 20000), decode(repeat('ab', 50000), 'hex'),
  '4713-01-01 BC', '23:59:59.999999', '00:00:00.000001-15:59', '4713-01-01 00:00:00 BC', '294276-12-31 23:59:59 UTC', '0',
  '12345678-1234-5678-1234-567812345678', '{"deep": {"deeper": {"deepest": [true, false, null, 1.0e10]}}}', '{"deep": {"deeper": {"deepest": [true, false, null, 1.0e10]}}}',
  ARRAY(SELECT generate_series(1, 1000)), ARRAY(SELECT md5(g::text) FROM generate_series(1, 100) g), '{{1e300}}',
  'happy', ROW(-1, repeat('p', 300)), 1, NULL,
  '(0.1,0.2)', '{3,4,5}', '[(-1,-1),(1,1)]', '((1,1),(-1,-1))', '[(0,0),(1,1),(2,2),(3,3),(4,4)]', '((0,0),(0,1),(1,1),(1,0))', '<(5,5),0.5>',
  '0.0.0.0', '255.255.255.255/32', '01:23:45:67:89:ab', '01:23:45:67:89:ab:cd:ef',
  '[0,0]', '[2000-01-01 00:00:00+00,2000-01-01 00:00:01+00]', '(0,1)', '{[0,1]}',
  '$0.00', 1, 'name with spaces', 'Z', B'01010', repeat('01', 5000)::varbit, repeat('word ', 100)::tsvector, 'a <-> b',
  '1/1', repeat('<e>data</e>', 1000)::xml,
  hstore(ARRAY(SELECT 'k' || g FROM generate_series(1, 100) g), ARRAY(SELECT 'v' || g FROM generate_series(1, 100) g)), 'ß', '0', '(0,0,0,0,0,0,0,0,0,0)', '978-3-16-148410-0');

-- a 1 MB multibyte text value and numerics of large precision
INSERT INTO types_heap (id, t, n, by)
SELECT 6, repeat('äöü✓', 262144), (10::numeric ^ 1000) + 0.000000000000000000000000000001, decode(repeat('00ff', 300000), 'hex');
INSERT INTO types_heap (id, n, f8, f4) VALUES (7, -123456789012345678901234567890.123456789012345678901234567890, 1.7976931348623157e308, 3.4028235e38);

INSERT INTO types_anker SELECT * FROM types_heap;

SELECT count(*) FROM types_anker;
-- no row differs in either direction
SELECT count(*) AS differing FROM (
  (SELECT h::text FROM types_heap h EXCEPT ALL SELECT a::text FROM types_anker a)
  UNION ALL
  (SELECT a::text FROM types_anker a EXCEPT ALL SELECT h::text FROM types_heap h)) d;
-- per column, with the type's own equality where it has one
SELECT h.id,
       h.f4::text = a.f4::text AS f4, h.f8::text = a.f8::text AS f8, h.n::text = a.n::text AS n,
       h.t = a.t AS t, h.by = a.by AS by, h.j::text = a.j::text AS j, h.jb = a.jb AS jb,
       h.pt::text = a.pt::text AS pt, h.p::text = a.p::text AS p, h.hs = a.hs AS hs, h.sg::text = a.sg::text AS sg
  FROM types_heap h JOIN types_anker a USING (id) ORDER BY id;
SELECT length(t), octet_length(t), length(by) FROM types_anker WHERE id = 6;
SELECT n = (10::numeric ^ 1000) + 0.000000000000000000000000000001 AS big_numeric FROM types_anker WHERE id = 6;
SELECT f4::text, f8::text, n::text FROM types_anker WHERE id IN (2, 3, 4, 7) ORDER BY id;
SELECT f8 = 0 AS minus_zero_equals_zero, f8::text FROM types_anker WHERE id = 4;
SELECT id, length((p).label), m, dp, ean FROM types_anker ORDER BY id;
-- values work as function arguments and in expressions
SELECT jb -> 'a' -> 2, ai[2], at[2], hs -> 'b', upper(cit), r4 @> 5, ine << '192.168.0.0/16'::inet
  FROM types_anker WHERE id = 1;
-- COPY out is identical, too
COPY (SELECT * FROM types_heap ORDER BY id) TO '/tmp/anker_types_heap.copy';
COPY (SELECT * FROM types_anker ORDER BY id) TO '/tmp/anker_types_anker.copy';
SELECT pg_read_file('/tmp/anker_types_heap.copy') = pg_read_file('/tmp/anker_types_anker.copy') AS copy_identical;
-- and COPY in
CREATE TABLE types_anker2 (LIKE types_heap) USING anker;
COPY types_anker2 FROM '/tmp/anker_types_anker.copy';
SELECT count(*) AS differing FROM (
  (SELECT h::text FROM types_heap h EXCEPT ALL SELECT a::text FROM types_anker2 a)
  UNION ALL
  (SELECT a::text FROM types_anker2 a EXCEPT ALL SELECT h::text FROM types_heap h)) d;
DROP TABLE types_heap, types_anker, types_anker2;
DROP TYPE pair;
DROP TYPE mood;
DROP DOMAIN posint;
DROP DOMAIN shorttext;
