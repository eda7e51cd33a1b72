-- Logical decoding of anker tables (docs/durability.md, "Logical decoding"):
-- at wal_level = logical every row change of a permanent anker table also
-- writes a ROW record, which our rm_decode hands to output plugins as heap's
-- changes are. The oracle is heap: the same statements
-- (sql/logical_decoding.inc) on heap tables and on anker tables must decode
-- to the same text, change for change. (A database of its own: a slot
-- decodes every table of its database.)
CREATE DATABASE anker_decoding;
\c anker_decoding
CREATE EXTENSION anker;
CREATE EXTENSION pg_walinspect;
SHOW wal_level;
CREATE SCHEMA h;
CREATE SCHEMA a;
CREATE TEMP TABLE decoded (am text, n bigint, data text);
SELECT 'slot' FROM pg_create_logical_replication_slot('decoding', 'test_decoding');
\getenv abs_srcdir PG_ABS_SRCDIR
SET default_table_access_method = heap;
SET search_path = h;
\i :abs_srcdir/sql/logical_decoding.inc
INSERT INTO pg_temp.decoded
SELECT 'heap', n, regexp_replace(data, '^table h\.', 'table ')
FROM pg_logical_slot_get_changes('decoding', NULL, NULL, 'include-xids', '0', 'skip-empty-xacts', '1')
     WITH ORDINALITY AS c(lsn, xid, data, n);
SET default_table_access_method = anker;
SET search_path = a;
SELECT pg_current_wal_insert_lsn() AS anker_start \gset
\i :abs_srcdir/sql/logical_decoding.inc
INSERT INTO pg_temp.decoded
SELECT 'anker', n, regexp_replace(data, '^table a\.', 'table ')
FROM pg_logical_slot_get_changes('decoding', NULL, NULL, 'include-xids', '0', 'skip-empty-xacts', '1')
     WITH ORDINALITY AS c(lsn, xid, data, n);
SELECT pg_drop_replication_slot('decoding');
RESET search_path;
-- anker's tables were anker's, and they wrote ROW records
SELECT relname, amname FROM pg_class JOIN pg_am ON relam = pg_am.oid
WHERE relnamespace = 'a'::regnamespace AND relkind = 'r' ORDER BY 1;
SELECT record_type, count(*) > 0 AS written,
       bool_and(description ~ '^rel \d+/\d+/\d+: (insert|update|delete) for logical decoding') AS described
FROM pg_get_wal_records_info(:'anker_start', pg_current_wal_flush_lsn())
WHERE resource_manager = 'anker' AND record_type = 'ROW' GROUP BY 1;
-- the same changes, in the same order (no rows)
SELECT coalesce(hp.n, an.n) AS n, hp.data AS heap, an.data AS anker
FROM (SELECT * FROM decoded WHERE am = 'heap') hp
FULL JOIN (SELECT * FROM decoded WHERE am = 'anker') an ON hp.n = an.n
WHERE hp.data IS DISTINCT FROM an.data;
-- what they are (long values cut short)
SELECT n, left(data, 160) AS change FROM decoded WHERE am = 'anker' ORDER BY n;
\c regression
DROP DATABASE anker_decoding;
