-- UPDATE, DELETE, constraints, triggers, foreign keys, partitions, indexes,
-- VACUUM and ANALYZE on anker tables.
CREATE TABLE acct (id int PRIMARY KEY, owner text NOT NULL, bal numeric(12,2) CHECK (bal >= 0),
                   doubled numeric GENERATED ALWAYS AS (bal * 2) STORED) USING anker;
INSERT INTO acct (id, owner, bal) SELECT g, 'owner ' || g, g * 10 FROM generate_series(1, 100) g;
UPDATE acct SET bal = bal + 1 WHERE id <= 3 RETURNING id, bal, doubled;
DELETE FROM acct WHERE id > 95 RETURNING id, owner;
UPDATE acct SET id = id + 1000 WHERE id = 4 RETURNING *;
SELECT count(*), sum(bal), sum(doubled) FROM acct;
-- constraints
UPDATE acct SET bal = -1 WHERE id = 1;
UPDATE acct SET owner = NULL WHERE id = 1;
INSERT INTO acct (id, owner, bal) VALUES (1, 'dup', 0);
UPDATE acct SET id = 2 WHERE id = 1;
-- an update in the same statement sees each row once
UPDATE acct SET bal = bal + 1;
SELECT count(*), sum(bal) FROM acct;
-- UPDATE ... FROM and DELETE ... USING
CREATE TABLE bonus (id int, amount numeric) USING anker;
INSERT INTO bonus VALUES (1, 5), (2, 6), (3, 7);
UPDATE acct a SET bal = a.bal + b.amount FROM bonus b WHERE a.id = b.id RETURNING a.id, a.bal;
DELETE FROM bonus b USING acct a WHERE a.id = b.id AND a.bal > 20 RETURNING b.*;
-- savepoints undo updates and deletes
BEGIN;
SAVEPOINT s;
UPDATE acct SET bal = 0;
DELETE FROM acct WHERE id < 50;
SELECT count(*), sum(bal) FROM acct;
ROLLBACK TO s;
SELECT count(*), sum(bal) FROM acct;
COMMIT;

-- triggers: BEFORE/AFTER, ROW/STATEMENT, transition tables, OLD and NEW
CREATE TABLE audit (op text, old_row text, new_row text);
CREATE FUNCTION acct_row_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_WHEN = 'BEFORE' AND TG_OP = 'UPDATE' THEN
    NEW.owner := upper(NEW.owner);
    RETURN NEW;
  END IF;
  INSERT INTO audit VALUES (TG_WHEN || ' ' || TG_OP,
    CASE WHEN TG_OP <> 'INSERT' THEN (OLD.id, OLD.owner, OLD.bal)::text END,
    CASE WHEN TG_OP <> 'DELETE' THEN (NEW.id, NEW.owner, NEW.bal)::text END);
  RETURN COALESCE(NEW, OLD);
END $$;
CREATE FUNCTION acct_stmt_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit SELECT 'stmt ' || TG_OP, (SELECT string_agg(o.id::text, ',' ORDER BY o.id) FROM old_rows o),
                                             (SELECT string_agg(n.id || ':' || n.bal, ',' ORDER BY n.id) FROM new_rows n);
  RETURN NULL;
END $$;
CREATE TRIGGER acct_before BEFORE UPDATE ON acct FOR EACH ROW EXECUTE FUNCTION acct_row_trg();
CREATE TRIGGER acct_after AFTER UPDATE OR DELETE ON acct FOR EACH ROW EXECUTE FUNCTION acct_row_trg();
CREATE TRIGGER acct_stmt AFTER UPDATE ON acct REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION acct_stmt_trg();
UPDATE acct SET bal = bal + 100 WHERE id IN (10, 11);
DELETE FROM acct WHERE id = 12;
SELECT * FROM audit ORDER BY op, old_row;
DROP TRIGGER acct_before ON acct;
DROP TRIGGER acct_after ON acct;
DROP TRIGGER acct_stmt ON acct;

-- foreign keys in both directions between anker and heap tables
CREATE TABLE heap_parent (id int PRIMARY KEY) USING heap;
INSERT INTO heap_parent VALUES (1), (2);
CREATE TABLE anker_child (id int PRIMARY KEY, parent int REFERENCES heap_parent ON DELETE CASCADE) USING anker;
CREATE TABLE heap_child (id int PRIMARY KEY, acct_id int REFERENCES acct ON UPDATE CASCADE ON DELETE RESTRICT) USING heap;
INSERT INTO anker_child VALUES (1, 1), (2, 2), (3, 2);
INSERT INTO anker_child VALUES (4, 3);
DELETE FROM heap_parent WHERE id = 2;
SELECT * FROM anker_child ORDER BY id;
INSERT INTO heap_child VALUES (1, 20), (2, 21);
INSERT INTO heap_child VALUES (3, 999);
UPDATE acct SET id = 2000 WHERE id = 20;
SELECT * FROM heap_child ORDER BY id;
DELETE FROM acct WHERE id = 21;
-- an anker table referencing itself
CREATE TABLE tree (id int PRIMARY KEY, parent int REFERENCES tree) USING anker;
INSERT INTO tree VALUES (1, NULL), (2, 1), (3, 2);
DELETE FROM tree WHERE id = 1;
UPDATE tree SET parent = 3 WHERE id = 2;
DELETE FROM tree WHERE id = 3;

-- partitioning: anker and heap partitions under one parent
CREATE TABLE events (day date, kind text, n int) PARTITION BY RANGE (day);
CREATE TABLE events_jan PARTITION OF events FOR VALUES FROM ('2024-01-01') TO ('2024-02-01') USING anker;
CREATE TABLE events_feb PARTITION OF events FOR VALUES FROM ('2024-02-01') TO ('2024-03-01') USING heap;
CREATE TABLE events_mar PARTITION OF events FOR VALUES FROM ('2024-03-01') TO ('2024-04-01') USING anker;
INSERT INTO events SELECT '2024-01-01'::date + g, 'k' || (g % 3), g FROM generate_series(0, 89) g;
SELECT tableoid::regclass, count(*), sum(n) FROM events GROUP BY 1 ORDER BY 1;
-- a row moves across partitions (anker -> heap -> anker)
UPDATE events SET day = '2024-02-15' WHERE n = 5;
UPDATE events SET day = '2024-03-15' WHERE n = 40;
SELECT tableoid::regclass, day, n FROM events WHERE n IN (5, 40) ORDER BY n;
DELETE FROM events WHERE kind = 'k0';
SELECT tableoid::regclass, count(*) FROM events GROUP BY 1 ORDER BY 1;

-- index kinds and scans
CREATE TABLE docs (id int, title text, tags text[], body tsvector, pos point, r int4range, score float8) USING anker;
INSERT INTO docs SELECT g, 'title ' || g, ARRAY['t' || (g % 10), 't' || (g % 7)], to_tsvector('simple', 'word' || (g % 50) || ' common'),
                        point(g % 100, g / 100), int4range(g, g + 10), g * 0.5
  FROM generate_series(1, 5000) g;
CREATE UNIQUE INDEX docs_id ON docs (id);
CREATE INDEX docs_multi ON docs (score, id);
CREATE INDEX docs_expr ON docs (lower(title));
CREATE INDEX docs_partial ON docs (id) WHERE score > 2000;
CREATE INDEX docs_hash ON docs USING hash (title);
CREATE INDEX docs_tags ON docs USING gin (tags);
CREATE INDEX docs_body ON docs USING gin (body);
CREATE INDEX docs_pos ON docs USING gist (pos);
CREATE INDEX docs_range ON docs USING gist (r);
ANALYZE docs;
SET enable_seqscan = off;
CREATE TEMP TABLE scan_results (q text, plan text, result text);
CREATE FUNCTION check_scan(q text, qry text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE p text; r text; l text;
BEGIN
  p := '';
  FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || qry LOOP
    IF l ~ '(Index|Bitmap|Tid|Seq|Custom)' THEN p := p || regexp_replace(l, '^[ ->]*', '') || '; '; END IF;
  END LOOP;
  EXECUTE 'SELECT md5(string_agg(x::text, '','' ORDER BY x::text)) FROM (' || qry || ') x' INTO r;
  INSERT INTO scan_results VALUES (q, p, r);
END $$;
SELECT check_scan('btree eq', 'SELECT id, title FROM docs WHERE id = 42');
SELECT check_scan('btree range', 'SELECT id FROM docs WHERE id BETWEEN 100 AND 120');
SELECT check_scan('multicolumn', 'SELECT id FROM docs WHERE score = 10.5');
SELECT check_scan('expression', 'SELECT id FROM docs WHERE lower(title) = ''title 77''');
SELECT check_scan('partial', 'SELECT id FROM docs WHERE score > 2000 AND id < 4010');
SELECT check_scan('hash', 'SELECT id FROM docs WHERE title = ''title 99''');
SELECT check_scan('gin array', 'SELECT id FROM docs WHERE tags @> ARRAY[''t3'', ''t5'']');
SELECT check_scan('gin tsvector', 'SELECT id FROM docs WHERE body @@ to_tsquery(''simple'', ''word7'')');
SELECT check_scan('gist point', 'SELECT id FROM docs WHERE pos <@ box(point(0,0), point(5,5))');
SELECT check_scan('gist range', 'SELECT id FROM docs WHERE r @> 2500');
SELECT check_scan('index only', 'SELECT score, id FROM docs WHERE score < 10');
SELECT check_scan('tid', 'SELECT id FROM docs WHERE ctid = ''(1,1)''');
SELECT check_scan('tid range', 'SELECT id FROM docs WHERE ctid BETWEEN ''(2,0)'' AND ''(3,0)''');
RESET enable_seqscan;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SET enable_tidscan = off;
UPDATE scan_results s SET result = s.result || CASE WHEN s.result = (
    SELECT md5(string_agg(x::text, ',' ORDER BY x::text)) FROM (SELECT 1) x) THEN '' ELSE '' END;
DO $$
DECLARE q record; r text;
BEGIN
  -- the same queries by sequential scan must give the same answers
  FOR q IN SELECT * FROM (VALUES
    ('btree eq', 'SELECT id, title FROM docs WHERE id = 42'),
    ('btree range', 'SELECT id FROM docs WHERE id BETWEEN 100 AND 120'),
    ('multicolumn', 'SELECT id FROM docs WHERE score = 10.5'),
    ('expression', 'SELECT id FROM docs WHERE lower(title) = ''title 77'''),
    ('partial', 'SELECT id FROM docs WHERE score > 2000 AND id < 4010'),
    ('hash', 'SELECT id FROM docs WHERE title = ''title 99'''),
    ('gin array', 'SELECT id FROM docs WHERE tags @> ARRAY[''t3'', ''t5'']'),
    ('gin tsvector', 'SELECT id FROM docs WHERE body @@ to_tsquery(''simple'', ''word7'')'),
    ('gist point', 'SELECT id FROM docs WHERE pos <@ box(point(0,0), point(5,5))'),
    ('gist range', 'SELECT id FROM docs WHERE r @> 2500'),
    ('index only', 'SELECT score, id FROM docs WHERE score < 10'),
    ('tid', 'SELECT id FROM docs WHERE ctid = ''(1,1)'''),
    ('tid range', 'SELECT id FROM docs WHERE ctid BETWEEN ''(2,0)'' AND ''(3,0)''')) v(q, qry) LOOP
    EXECUTE 'SELECT md5(string_agg(x::text, '','' ORDER BY x::text)) FROM (' || q.qry || ') x' INTO r;
    UPDATE scan_results SET result = CASE WHEN result = r THEN 'same as seq scan' ELSE 'DIFFERS: ' || result || ' vs ' || r END
     WHERE scan_results.q = q.q;
  END LOOP;
END $$;
RESET enable_indexscan;
RESET enable_bitmapscan;
RESET enable_tidscan;
SELECT q, plan, result FROM scan_results ORDER BY q;
-- indexes follow updates and deletes
UPDATE docs SET id = id + 100000, title = 'moved' WHERE id % 100 = 0;
DELETE FROM docs WHERE id % 100 = 1;
SET enable_seqscan = off;
SELECT count(*) FROM docs WHERE id > 100000;
SELECT count(*) FROM docs WHERE title = 'moved';
SELECT count(*) FROM docs WHERE id % 100 = 1;
RESET enable_seqscan;
REINDEX TABLE docs;
SET enable_seqscan = off;
SELECT count(*) FROM docs WHERE title = 'moved';
RESET enable_seqscan;
CREATE INDEX CONCURRENTLY docs_conc ON docs (score DESC);
SELECT indisvalid FROM pg_index WHERE indexrelid = 'docs_conc'::regclass;
REINDEX INDEX CONCURRENTLY docs_conc;
SELECT count(*) FROM docs WHERE score > 2400;

-- VACUUM reclaims dead rows and their memory, and removes index entries
CREATE TABLE churn (id int PRIMARY KEY, payload text) USING anker;
INSERT INTO churn SELECT g, repeat('p', 200) FROM generate_series(1, 50000) g;
SELECT bytes AS full_bytes FROM anker.tables WHERE relation = 'churn'::regclass \gset
DELETE FROM churn WHERE id > 1000;
VACUUM churn;
SELECT bytes < :full_bytes / 4 AS memory_returned FROM anker.tables WHERE relation = 'churn'::regclass;
SELECT n_live_tup, n_dead_tup FROM pg_stat_user_tables WHERE relname = 'churn';
SET enable_seqscan = off;
SELECT count(*) FROM churn WHERE id > 900;
RESET enable_seqscan;
-- vacated rows are reused before the table grows
SELECT row_slots AS slots_before FROM anker.tables WHERE relation = 'churn'::regclass \gset
INSERT INTO churn SELECT g, 'again' FROM generate_series(1001, 2000) g;
SELECT row_slots = :slots_before AS reused FROM anker.tables WHERE relation = 'churn'::regclass;
SELECT count(*), count(DISTINCT ctid) FROM churn;
-- superseded versions of updated rows are reclaimed too
UPDATE churn SET payload = 'v2' WHERE id <= 500;
VACUUM churn;
SELECT count(*), sum(length(payload)) FROM churn;
-- VACUUM FULL and CLUSTER rewrite the table
SELECT relfilenode AS node_before FROM pg_class WHERE relname = 'churn' \gset
VACUUM FULL churn;
SELECT relfilenode <> :node_before AS rewritten, (SELECT count(*) FROM churn) AS rows FROM pg_class WHERE relname = 'churn';
SELECT row_slots FROM anker.tables WHERE relation = 'churn'::regclass;
DELETE FROM churn WHERE id % 2 = 0;
CLUSTER churn USING churn_pkey;
SELECT row_slots FROM anker.tables WHERE relation = 'churn'::regclass;
SELECT id FROM churn ORDER BY ctid LIMIT 5;
SELECT count(*) FROM churn;

-- ANALYZE: reltuples within 10% of the true count; size and estimate agree
CREATE TABLE est (a int, b text) USING anker;
INSERT INTO est SELECT g, md5(g::text) FROM generate_series(1, 120000) g;
DELETE FROM est WHERE a % 10 = 0;
ANALYZE est;
-- (pg_relation_size measures files, which are empty for anker tables;
-- anker.tables reports the blocks the table AM reports to the planner)
SELECT abs(reltuples - 108000) / 108000 < 0.1 AS reltuples_ok,
       relpages = (SELECT blocks FROM anker.tables WHERE relation = 'est'::regclass) AS pages_match_size
  FROM pg_class WHERE relname = 'est';
-- ANALYZE sorts the rows it keeps by TID, as for heap: a column in row
-- order follows the table's order (the copies lost their TIDs until
-- 2026-12-07, and the correlation came out near 0)
SELECT correlation > 0.99 AS in_row_order FROM pg_stats WHERE tablename = 'est' AND attname = 'a';
-- vacuum_cost_delay holds ANALYZE back, as heap's: it is charged a page
-- hit for each 8 kB of the rows it reads (some 470 blocks here, each worth
-- at least one hit: at a limit of 1, at least 1 ms of sleep each)
SET vacuum_cost_delay = '1ms';
SET vacuum_cost_limit = 1;
SELECT clock_timestamp() AS analyze_began \gset
ANALYZE est;
SELECT clock_timestamp() - :'analyze_began'::timestamptz > interval '300 ms' AS analyze_held_back;
RESET vacuum_cost_delay;
RESET vacuum_cost_limit;
-- system columns
SELECT xmin = (SELECT xmin FROM est LIMIT 1) AS same_xmin, xmax, cmin FROM est WHERE a = 1;
EXPLAIN (COSTS OFF) SELECT * FROM est WHERE a = 5;

-- SERIALIZABLE works with relation-level predicate locks
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT count(*) FROM acct WHERE bal > 100;
UPDATE acct SET bal = bal + 1 WHERE id = 50;
COMMIT;

DROP TABLE acct, bonus, audit, anker_child, heap_parent, heap_child, tree, events, docs, churn, est CASCADE;
DROP FUNCTION acct_row_trg, acct_stmt_trg, check_scan;
