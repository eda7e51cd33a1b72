-- Unsupported operations raise clear errors; bad input never crashes the
-- server or damages a table.
\set VERBOSITY terse
CREATE TABLE e (id int, t text) USING anker;
INSERT INTO e SELECT g, 'row ' || g FROM generate_series(1, 100) g;

SELECT count(*), sum(id) FROM e;


-- malformed COPY input fails the statement and leaves the table as it was
COPY e FROM stdin;
101	ok
102	not	enough	columns	here
\.
COPY e FROM stdin;
abc	not an int
\.
COPY e FROM stdin (FORMAT csv);
103,"unterminated
\.
SELECT count(*), max(id) FROM e;

-- a value larger than what is left under anker.memory_limit
SELECT used_bytes AS before_bytes FROM anker.memory \gset
INSERT INTO e VALUES (1000, repeat('x', 400 * 1024 * 1024));
DO $$
BEGIN
  INSERT INTO e VALUES (1001, repeat('y', 400 * 1024 * 1024));
EXCEPTION WHEN out_of_memory THEN
  RAISE NOTICE 'caught SQLSTATE %', SQLSTATE;
END $$;
SELECT used_bytes = :before_bytes AS nothing_kept FROM anker.memory;
-- many rows until the arena is full: the statement fails, the table survives
CREATE TABLE fill (a bigint, b text) USING anker;
INSERT INTO fill SELECT g, repeat('z', 1000) FROM generate_series(1, 1000000) g;
SELECT count(*) FROM fill;
DROP TABLE fill;
SELECT used_bytes = :before_bytes AS returned FROM anker.memory;
SELECT count(*), max(id) FROM e;
INSERT INTO e VALUES (104, 'still writable');
SELECT count(*), max(id) FROM e;
DROP TABLE e;
