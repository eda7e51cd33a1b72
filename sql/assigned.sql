-- An in-place UPDATE compares only the columns its statement assigns with
-- the stored row (extension/src/tam/assigned.rs). Every case runs on an
-- anker table and a heap twin, which must end up equal; among them the
-- ones where a column the statement does not name changes anyway
-- (generated columns, BEFORE ROW triggers) and where the assigning
-- statement is not the innermost one running.
CREATE FUNCTION on_both(stmt text, a text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE replace(stmt, '$T', a);
  EXECUTE replace(stmt, '$T', a || '_heap');
END $$;
CREATE FUNCTION same(a text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE x text; y text;
BEGIN
  EXECUTE format('SELECT string_agg(t::text, %L ORDER BY t::text) FROM %I t', ',', a) INTO x;
  EXECUTE format('SELECT string_agg(t::text, %L ORDER BY t::text) FROM %I t', ',', a || '_heap') INTO y;
  RETURN x IS NOT DISTINCT FROM y AND x IS NOT NULL;
END $$;

CREATE TABLE asg (id int PRIMARY KEY, a int, b text, c numeric, g int GENERATED ALWAYS AS (a * 2) STORED) USING anker;
CREATE TABLE asg_heap (LIKE asg INCLUDING ALL) USING heap;
SELECT on_both($$INSERT INTO $T (id, a, b, c) SELECT i, i, 'b' || i, i / 4.0 FROM generate_series(1, 20) i$$, 'asg');

-- A stored generated column computed from an assigned one is written.
SELECT on_both($$UPDATE $T SET a = a + 100 WHERE id <= 5$$, 'asg');
SELECT id, a, g FROM asg WHERE id <= 5 ORDER BY id;
SELECT same('asg');

-- A BEFORE ROW trigger changes columns the statement does not assign.
CREATE FUNCTION asg_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.b := NEW.b || '*';
  NEW.c := NEW.c + 1;
  RETURN NEW;
END $$;
CREATE TRIGGER asg_touch BEFORE UPDATE ON asg FOR EACH ROW EXECUTE FUNCTION asg_touch();
CREATE TRIGGER asg_touch BEFORE UPDATE ON asg_heap FOR EACH ROW EXECUTE FUNCTION asg_touch();
SELECT on_both($$UPDATE $T SET a = a + 1 WHERE id BETWEEN 6 AND 8$$, 'asg');
SELECT id, a, b, c FROM asg WHERE id BETWEEN 6 AND 8 ORDER BY id;
DROP TRIGGER asg_touch ON asg;
DROP TRIGGER asg_touch ON asg_heap;
SELECT same('asg');

-- ON CONFLICT DO UPDATE and MERGE assign their SET lists.
SELECT on_both($$INSERT INTO $T (id, a, b, c) VALUES (9, 0, 'new', 0), (30, 30, 'b30', 3)
                 ON CONFLICT (id) DO UPDATE SET b = excluded.b$$, 'asg');
SELECT on_both($$MERGE INTO $T t USING generate_series(10, 14) s(i) ON t.id = s.i
                 WHEN MATCHED AND s.i % 2 = 0 THEN UPDATE SET b = 'merged'
                 WHEN MATCHED THEN UPDATE SET c = -1$$, 'asg');
SELECT id, a, b, c, g FROM asg WHERE id BETWEEN 9 AND 14 OR id = 30 ORDER BY id;
SELECT same('asg');

-- A function in the SET list updates other rows and columns of the same
-- table: both statements run at once.
CREATE FUNCTION asg_bump(t text, i int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('UPDATE %I SET b = b || %L WHERE id = $1', t, '+') USING i + 10;
  RETURN i * 1000;
END $$;
SELECT on_both($$UPDATE $T SET a = asg_bump('$T', id) WHERE id IN (1, 2)$$, 'asg');
SELECT id, a, b FROM asg WHERE id IN (1, 2, 11, 12) ORDER BY id;
SELECT same('asg');

-- An AFTER trigger updating the table from another statement's end, a
-- data-modifying WITH that only ExecutorFinish runs, an updatable view.
CREATE TABLE asg_log (id int) USING anker;
CREATE FUNCTION asg_after() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE asg SET c = c * 10 WHERE id = NEW.id;
  UPDATE asg_heap SET c = c * 10 WHERE id = NEW.id;
  RETURN NULL;
END $$;
CREATE TRIGGER asg_after AFTER INSERT ON asg_log FOR EACH ROW EXECUTE FUNCTION asg_after();
INSERT INTO asg_log VALUES (15), (16);
SELECT on_both($$WITH u AS (UPDATE $T SET b = 'cte' WHERE id = 17) SELECT 1$$, 'asg');
SELECT on_both($$CREATE VIEW $T_v AS SELECT id, b FROM $T WHERE id > 17$$, 'asg');
SELECT on_both($$UPDATE $T_v SET b = 'view' WHERE id = 18$$, 'asg');
SELECT id, b, c FROM asg WHERE id BETWEEN 15 AND 18 ORDER BY id;
SELECT same('asg');

-- Children whose attribute numbers differ from their parent's (another
-- column order, a dropped column): a partition updated through its parent,
-- one that INSERT … ON CONFLICT routes to, an inheritance child.
CREATE TABLE asgp (id int, a int, b text, c int, PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE asgp_heap (LIKE asgp) PARTITION BY RANGE (id);
ALTER TABLE asgp_heap ADD PRIMARY KEY (id);
CREATE TABLE asgp_1 (dropme int, c int, b text, id int NOT NULL, a int) USING anker;
CREATE TABLE asgp_1_heap (dropme int, c int, b text, id int NOT NULL, a int) USING heap;
ALTER TABLE asgp_1 DROP COLUMN dropme;
ALTER TABLE asgp_1_heap DROP COLUMN dropme;
ALTER TABLE asgp ATTACH PARTITION asgp_1 FOR VALUES FROM (1) TO (100);
ALTER TABLE asgp_heap ATTACH PARTITION asgp_1_heap FOR VALUES FROM (1) TO (100);
SELECT on_both($$INSERT INTO $T SELECT i, i, 'b' || i, i FROM generate_series(1, 10) i$$, 'asgp');
SELECT on_both($$UPDATE $T SET c = c + 50 WHERE id <= 3$$, 'asgp');
SELECT on_both($$UPDATE $T SET b = 'x' || b, a = -a WHERE id = 4$$, 'asgp');
SELECT on_both($$INSERT INTO $T VALUES (5, 0, 'routed', 0) ON CONFLICT (id) DO UPDATE SET b = excluded.b$$, 'asgp');
SELECT * FROM asgp WHERE id <= 5 ORDER BY id;
SELECT same('asgp');
CREATE TABLE asgi (id int, a int, b text) USING anker;
CREATE TABLE asgi_c (x int, b text, a int, id int) USING anker;
ALTER TABLE asgi_c INHERIT asgi;
CREATE TABLE asgi_heap (id int, a int, b text) USING heap;
CREATE TABLE asgi_heap_c (x int, b text, a int, id int) USING heap;
ALTER TABLE asgi_heap_c INHERIT asgi_heap;
SELECT on_both($$INSERT INTO $T_c SELECT i, 'b' || i, i, i FROM generate_series(1, 5) i$$, 'asgi');
SELECT on_both($$UPDATE $T SET b = upper(b) WHERE id % 2 = 1$$, 'asgi');
SELECT * FROM asgi_c ORDER BY id;
SELECT same('asgi');

DROP TABLE asg, asg_heap, asg_log, asgp, asgp_heap, asgi, asgi_c, asgi_heap, asgi_heap_c CASCADE;
DROP FUNCTION on_both, same, asg_touch, asg_bump, asg_after;
