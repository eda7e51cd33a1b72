-- Logical decoding does not see anker's changes (docs/durability.md), so a
-- publication would send none of an anker table's changes after its initial
-- copy. Every way a permanent anker table can join a publication ends with a
-- WARNING naming it; heap, unlogged and temporary tables get none.
-- (A database of its own: FOR ALL TABLES lists every table in it.)
CREATE DATABASE anker_publication;
\c anker_publication
CREATE EXTENSION anker;
SHOW wal_level;
CREATE TABLE pub_heap (id int PRIMARY KEY, v text);
CREATE PUBLICATION p_heap FOR TABLE pub_heap;
CREATE TABLE pub_anker (id int PRIMARY KEY, v text) USING anker;
CREATE UNLOGGED TABLE pub_unlogged (id int) USING anker;
CREATE TEMP TABLE pub_temp (id int) USING anker;
INSERT INTO pub_anker VALUES (1, 'one');

-- a table named in the publication: the whole message once
ALTER PUBLICATION p_heap ADD TABLE pub_anker;
\set VERBOSITY terse
ALTER PUBLICATION p_heap DROP TABLE pub_anker;
ALTER PUBLICATION p_heap SET TABLE pub_heap, pub_anker;
ALTER PUBLICATION p_heap SET TABLE pub_heap;
-- PostgreSQL itself refuses unlogged and temporary tables
ALTER PUBLICATION p_heap ADD TABLE pub_unlogged;
ALTER PUBLICATION p_heap ADD TABLE pub_temp;

-- tables in a published schema: those there, those created or moved there
CREATE SCHEMA pub_s;
CREATE TABLE pub_s.a (id int) USING anker;
CREATE TABLE pub_s.h (id int) USING heap;
CREATE PUBLICATION p_schema FOR TABLES IN SCHEMA pub_s;
CREATE TABLE pub_s.b (id int) USING anker;
CREATE TABLE pub_s.h2 (id int) USING heap;
CREATE TABLE pub_moved (id int) USING anker;
ALTER TABLE pub_moved SET SCHEMA pub_s;
CREATE TABLE pub_s.c USING anker AS SELECT 1 AS id;
DROP PUBLICATION p_schema;

-- partitions of a published partitioned table: created or attached
CREATE TABLE pub_parted (id int, v text) PARTITION BY RANGE (id);
CREATE PUBLICATION p_parted FOR TABLE pub_parted;
CREATE TABLE pub_part1 PARTITION OF pub_parted FOR VALUES FROM (0) TO (100) USING anker;
CREATE TABLE pub_part2 (id int, v text) USING anker;
ALTER TABLE pub_parted ATTACH PARTITION pub_part2 FOR VALUES FROM (100) TO (200);
CREATE TABLE pub_part3 PARTITION OF pub_parted FOR VALUES FROM (200) TO (300) USING heap;
-- a partitioned partition whose leaf is anker
CREATE TABLE pub_sub (id int, v text) PARTITION BY RANGE (id);
CREATE TABLE pub_sub1 PARTITION OF pub_sub FOR VALUES FROM (300) TO (400) USING anker;
ALTER TABLE pub_parted ATTACH PARTITION pub_sub FOR VALUES FROM (300) TO (400);
DROP PUBLICATION p_parted;

-- FOR ALL TABLES: the anker tables there now, and later ones
CREATE PUBLICATION p_all FOR ALL TABLES;
CREATE TABLE pub_late (id int) USING anker;
CREATE TABLE pub_late_heap (id int) USING heap;
ALTER TABLE pub_unlogged SET LOGGED;
ALTER TABLE pub_late_heap SET ACCESS METHOD anker;
CREATE TEMP TABLE pub_temp2 (id int) USING anker;
DROP PUBLICATION p_all;

-- the tables work as before
SELECT * FROM pub_anker;
SELECT count(*) FROM pub_parted;

\c regression
DROP DATABASE anker_publication;
