-- HyPer-style MVCC: in-place updates with undo chains, undo on abort,
-- long chains under an old snapshot, pruning, block summaries, 2PC.
CREATE EXTENSION IF NOT EXISTS dblink;
CREATE TABLE mv (id int PRIMARY KEY, k int, v int, t text) USING anker;
CREATE INDEX mv_k ON mv (k);
INSERT INTO mv SELECT g, g, g * 10, 'row ' || g FROM generate_series(1, 10000) g;
CREATE FUNCTION counter(n text) RETURNS bigint LANGUAGE sql AS $$ SELECT value FROM anker.stats WHERE name = n $$;

-- an update of non-indexed columns stays at the same TID ...
SELECT ctid AS tid_before FROM mv WHERE id = 1 \gset
SELECT counter('in_place_updates') AS ip0 \gset
UPDATE mv SET v = v + 1, t = 'a longer text value than sixteen bytes' WHERE id = 1;
SELECT ctid = :'tid_before' AS same_tid, v, t FROM mv WHERE id = 1;
SELECT counter('in_place_updates') - :ip0 AS in_place;
-- ... an update of an indexed column moves the row
UPDATE mv SET k = -1 WHERE id = 1;
SELECT ctid <> :'tid_before' AS moved, k FROM mv WHERE id = 1;
SET enable_seqscan = off;
SELECT id, k FROM mv WHERE k = -1;
SELECT count(*) FROM mv WHERE k = 1;
RESET enable_seqscan;

-- abort and ROLLBACK TO SAVEPOINT put the before-images back
BEGIN;
UPDATE mv SET v = 0, t = NULL WHERE id BETWEEN 2 AND 5;
SAVEPOINT s;
UPDATE mv SET v = -1 WHERE id = 6;
UPDATE mv SET v = -2 WHERE id = 6;
ROLLBACK TO s;
SELECT id, v, t FROM mv WHERE id BETWEEN 2 AND 6 ORDER BY id;
ROLLBACK;
SELECT id, v, t FROM mv WHERE id BETWEEN 2 AND 6 ORDER BY id;
-- the same command cannot see its own in-place update
UPDATE mv SET v = v + 1 FROM generate_series(1, 3) g WHERE mv.id = 7;
SELECT v FROM mv WHERE id = 7;
-- a cursor keeps reading the version of its snapshot
BEGIN;
DECLARE c CURSOR FOR SELECT id, v FROM mv WHERE id BETWEEN 8 AND 9 ORDER BY id;
UPDATE mv SET v = 999 WHERE id BETWEEN 8 AND 9;
FETCH ALL c;
SELECT id, v FROM mv WHERE id BETWEEN 8 AND 9 ORDER BY id;
COMMIT;

-- a row updated 10,000 times while an old REPEATABLE READ snapshot stays
-- open: the old snapshot still reads its version
SELECT format('dbname=%s port=%s host=%s', current_database(), current_setting('port'),
              split_part(current_setting('unix_socket_directories'), ',', 1)) AS conn \gset
SELECT dblink_connect('old', :'conn');
SELECT dblink_exec('old', 'BEGIN ISOLATION LEVEL REPEATABLE READ');
SELECT * FROM dblink('old', 'SELECT v FROM mv WHERE id = 100') AS t(v int);
SELECT used_bytes AS before_bytes FROM anker.memory \gset
CREATE PROCEDURE hammer(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..n LOOP
    UPDATE mv SET v = v + 1, t = 'version ' || i || repeat('.', 100) WHERE id = 100;
    COMMIT;
  END LOOP;
END $$;
CALL hammer(10000);
SELECT v, left(t, 13) AS t FROM mv WHERE id = 100;
SELECT * FROM dblink('old', 'SELECT v, t FROM mv WHERE id = 100') AS t(v int, t text);
SELECT * FROM dblink('old', 'SELECT count(*), sum(v) FROM mv') AS t(n bigint, s bigint);
SELECT used_bytes > :before_bytes + 2000000 AS chain_uses_memory FROM anker.memory;
SELECT dblink_exec('old', 'COMMIT');
SELECT dblink_disconnect('old');
-- once the snapshot is gone, the row's next update cuts its chain (its
-- walk looks at the newest records only, and finds the cut among them)
SELECT counter('undo_records_pruned') AS pr0 \gset
UPDATE mv SET v = v + 1 WHERE id = 100;
UPDATE mv SET v = v - 1 WHERE id = 100;
SELECT counter('undo_records_pruned') - :pr0 >= 9999 AS chain_pruned;
-- (a few pages stay: block summaries, links, warm allocator pages)
VACUUM mv;
SELECT used_bytes <= :before_bytes + 524288 AS memory_back FROM anker.memory;
SELECT v, left(t, 13) AS t FROM mv WHERE id = 100;

-- block summaries: a table nobody writes is read without per-row checks
CREATE TABLE quiet (a int, b float8) USING anker;
INSERT INTO quiet SELECT g, g FROM generate_series(1, 40960) g;
VACUUM quiet;
SELECT count(*), sum(b) FROM quiet;          -- sets the summaries
SELECT counter('blocks_read_without_checks') AS fast0 \gset
SELECT count(*), sum(b) FROM quiet;
SELECT counter('blocks_read_without_checks') - :fast0 AS fast_blocks;
UPDATE quiet SET b = b + 1 WHERE a = 5000;     -- touches one block
SELECT counter('blocks_read_without_checks') AS fast1 \gset
SELECT count(*), sum(b) FROM quiet;
SELECT counter('blocks_read_without_checks') - :fast1 AS fast_blocks_after_write;
-- an old snapshot does not use summaries newer than itself
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT sum(b) FROM quiet;
SELECT dblink_exec(:'conn', 'UPDATE quiet SET b = 0 WHERE a <= 4096');
SELECT sum(b) FROM quiet;
COMMIT;
SELECT sum(b) FROM quiet;

-- two-phase commit with in-place updates
BEGIN;
UPDATE mv SET v = -100 WHERE id = 200;
PREPARE TRANSACTION 'tp1';
SELECT v FROM mv WHERE id = 200;
COMMIT PREPARED 'tp1';
SELECT v FROM mv WHERE id = 200;
BEGIN;
UPDATE mv SET v = -200 WHERE id = 201;
PREPARE TRANSACTION 'tp2';
ROLLBACK PREPARED 'tp2';
SELECT v FROM mv WHERE id = 201;
UPDATE mv SET v = v + 1 WHERE id = 201;      -- the next writer repairs the row
SELECT v FROM mv WHERE id = 201;

-- index scans report rows nobody can see any more, and the index marks their
-- entries dead (heap's kill_prior_tuple): later scans skip them unread
CREATE EXTENSION IF NOT EXISTS pageinspect;
CREATE TABLE q (id int PRIMARY KEY, v int) USING anker;
INSERT INTO q SELECT g, g FROM generate_series(1, 100) g;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
-- a snapshot that still sees the deleted rows keeps their entries alive
SELECT dblink_connect('old', :'conn');
SELECT dblink_exec('old', 'BEGIN ISOLATION LEVEL REPEATABLE READ');
SELECT * FROM dblink('old', 'SELECT count(*) FROM q') AS t(n bigint);
DELETE FROM q WHERE id <= 60;
SELECT count(*) FROM q WHERE id < 1000;
SELECT count(*) FILTER (WHERE dead) AS dead_entries FROM bt_page_items('q_pkey', 1);
SELECT * FROM dblink('old', 'SELECT count(*) FROM q') AS t(n bigint);
SELECT dblink_exec('old', 'COMMIT');
SELECT dblink_disconnect('old');
-- once no snapshot can see them (PostgreSQL recomputes that horizon when a
-- newer xid exists, hence the xid), the next index scan marks them
SELECT pg_current_xact_id() IS NOT NULL AS xid_assigned;
SELECT count(*) FROM q WHERE id < 1000;
SELECT count(*) FILTER (WHERE dead) AS dead_entries FROM bt_page_items('q_pkey', 1);
SELECT count(*), min(id) FROM q WHERE id < 1000;
-- an update that moves a row leaves a dead entry in each index; rows
-- updated in place, and rows whose delete rolled back, keep theirs
CREATE INDEX q_v ON q (v);
UPDATE q SET v = -v WHERE id BETWEEN 61 AND 65;      -- indexed column: new row ids
UPDATE q SET id = id WHERE id BETWEEN 66 AND 70;     -- unchanged key: in place
BEGIN; DELETE FROM q WHERE id > 90; ROLLBACK;
SELECT count(*), sum(v) FROM q WHERE v < 1000;
SELECT count(*), sum(v) FROM q WHERE id < 1000;
SELECT count(*) FILTER (WHERE dead) AS dead_entries FROM bt_page_items('q_v', 1);
-- a full index page then drops its dead entries instead of splitting
CREATE TABLE r (id int PRIMARY KEY) USING anker;
INSERT INTO r SELECT generate_series(1, 400);     -- one leaf page
DELETE FROM r WHERE id <= 300;
SELECT pg_current_xact_id() IS NOT NULL AS xid_assigned;
SELECT count(*) FROM r WHERE id < 1000;
INSERT INTO r SELECT generate_series(401, 600);
SELECT pg_relation_size('r_pkey') / current_setting('block_size')::int AS index_pages,
       count(*) AS entries, count(*) FILTER (WHERE dead) AS dead_entries
  FROM bt_page_items('r_pkey', 1);
SELECT count(*), min(id), max(id) FROM r WHERE id > 0;
RESET enable_seqscan;
RESET enable_bitmapscan;

-- committed in-place updates: the backend's next writes collect the undo
-- records once no snapshot needs them; the statistics autovacuum acts on
-- count no dead tuple for them
CREATE TABLE st (id int PRIMARY KEY, v int) USING anker;
INSERT INTO st SELECT g, 0 FROM generate_series(1, 100) g;
UPDATE st SET v = 1;
SELECT counter('undo_records_pruned') AS gc0 \gset
UPDATE st SET v = 2;
SELECT counter('undo_records_pruned') - :gc0 >= 100 AS first_records_collected;
-- ... also when the rows are not written again: writes to another table
UPDATE st SET v = 3;
SELECT counter('undo_records_pruned') AS gc1 \gset
INSERT INTO q SELECT g, g FROM generate_series(1001, 1010) g;
SELECT counter('undo_records_pruned') - :gc1 >= 100 AS collected_by_other_writes;
SELECT pg_stat_force_next_flush();
SELECT n_tup_upd, n_tup_hot_upd, n_dead_tup FROM pg_stat_user_tables WHERE relname = 'st';
VACUUM st;
SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'st';

DROP TABLE mv, quiet, q, r, st;
DROP PROCEDURE hammer;
DROP FUNCTION counter;
