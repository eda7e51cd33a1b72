-- Differential test: a seeded random workload of inserts, updates
-- (in place of non-key columns and of indexed keys), deletes, savepoints,
-- rollbacks and locking reads runs against an anker table and an identical
-- heap table. After every operation the visible contents and a few queries
-- must agree; any difference raises an error naming the step.
CREATE TABLE diff_heap (id int PRIMARY KEY, k int, v numeric, note text) USING heap;
CREATE TABLE diff_anker (id int PRIMARY KEY, k int, v numeric, note text) USING anker;
CREATE INDEX ON diff_heap (k);
CREATE INDEX ON diff_anker (k);

CREATE FUNCTION diff_check(step int, op text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  q text;
  a text;
  h text;
  lo int := (random() * 1000)::int;
BEGIN
  FOREACH q IN ARRAY ARRAY[
    'SELECT md5(coalesce(string_agg(t::text, '','' ORDER BY id), '''')) FROM TBL t',
    'SELECT count(*) || '':'' || coalesce(sum(v), 0) FROM TBL',
    format('SELECT count(*) || '':'' || coalesce(sum(v), 0) FROM TBL WHERE k BETWEEN %s AND %s', lo, lo + 100),
    format('SELECT coalesce(string_agg(id::text, '','' ORDER BY id), '''') FROM TBL WHERE id BETWEEN %s AND %s', lo, lo + 30)]
  LOOP
    EXECUTE replace(q, 'TBL', 'diff_anker') INTO a;
    EXECUTE replace(q, 'TBL', 'diff_heap') INTO h;
    IF a IS DISTINCT FROM h THEN
      RAISE EXCEPTION 'step % (%): anker and heap differ for %: % vs %', step, op, q, a, h;
    END IF;
  END LOOP;
END $$;

-- Apply one statement (TBL stands for the table) to both tables. A
-- statement may fail (a moved key can collide); it must then fail the same
-- way on both, each in its own subtransaction.
CREATE FUNCTION diff_both(stmt text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE na bigint := -1; nh bigint := -1; ea text := 'ok'; eh text := 'ok';
BEGIN
  BEGIN
    EXECUTE replace(stmt, 'TBL', 'diff_anker');
    GET DIAGNOSTICS na = ROW_COUNT;
  EXCEPTION WHEN OTHERS THEN
    ea := SQLSTATE;
  END;
  BEGIN
    EXECUTE replace(stmt, 'TBL', 'diff_heap');
    GET DIAGNOSTICS nh = ROW_COUNT;
  EXCEPTION WHEN OTHERS THEN
    eh := SQLSTATE;
  END;
  IF na <> nh OR ea <> eh THEN
    RAISE EXCEPTION 'outcomes differ for %: anker % (%), heap % (%)', stmt, na, ea, nh, eh;
  END IF;
END $$;

CREATE FUNCTION diff_random_op(step int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  r float8 := random();
  a int := (random() * 1200)::int;
  b int := a + (random() * 40)::int;
  stmt text;
BEGIN
  IF r < 0.30 THEN
    stmt := format('INSERT INTO TBL SELECT g, mod(g * 7, 1000), g / 3.0, repeat(''n'', mod(g, 40)) FROM generate_series(%s, %s) g ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v + 1', a, b);
  ELSIF r < 0.50 THEN
    stmt := format('UPDATE TBL SET v = v * 2 + 1, note = note || ''u'' WHERE id BETWEEN %s AND %s', a, b);
  ELSIF r < 0.60 THEN
    stmt := format('UPDATE TBL SET k = k + 1 WHERE k BETWEEN %s AND %s', a, a + 5);
  ELSIF r < 0.70 THEN
    stmt := format('UPDATE TBL SET id = id + 5000 WHERE id BETWEEN %s AND %s AND id < 5000', a, a + 3);
  ELSIF r < 0.85 THEN
    stmt := format('DELETE FROM TBL WHERE id BETWEEN %s AND %s', a, b);
  ELSIF r < 0.92 THEN
    stmt := format('DELETE FROM TBL WHERE mod(k, 97) = %s', a % 97);
  ELSE
    stmt := format('SELECT * FROM TBL WHERE id BETWEEN %s AND %s FOR UPDATE', a, b);
  END IF;
  PERFORM diff_both(stmt);
  RETURN stmt;
END $$;

CREATE PROCEDURE diff_run(seed float8, steps int) LANGUAGE plpgsql AS $$
DECLARE
  op text;
  r float8;
BEGIN
  PERFORM setseed(seed);
  FOR step IN 1..steps LOOP
    r := random();
    IF r < 0.10 THEN
      -- a subtransaction that rolls back (ROLLBACK TO SAVEPOINT)
      BEGIN
        op := 'savepoint: ' || diff_random_op(step) || ' ; ' || diff_random_op(step);
        PERFORM diff_check(step, op);
        RAISE EXCEPTION 'roll back to savepoint';
      EXCEPTION WHEN raise_exception THEN
        NULL;
      END;
    ELSIF r < 0.15 THEN
      op := 'rollback: ' || diff_random_op(step);
      ROLLBACK;
    ELSIF r < 0.35 THEN
      op := diff_random_op(step);
      COMMIT;
    ELSE
      op := diff_random_op(step);
    END IF;
    PERFORM diff_check(step, op);
  END LOOP;
  COMMIT;
END $$;

-- rounds of random work, with VACUUM (which reclaims and reuses rows) and
-- VACUUM FULL between them
CALL diff_run(0.42, 500);
VACUUM diff_anker;
SELECT diff_check(0, 'after VACUUM');
CALL diff_run(0.17, 500);
VACUUM diff_anker;
CALL diff_run(0.23, 500);
VACUUM FULL diff_anker;
SELECT diff_check(0, 'after VACUUM FULL');
CALL diff_run(0.77, 500);
SELECT (SELECT count(*) FROM diff_anker) = (SELECT count(*) FROM diff_heap) AS same_count,
       (SELECT count(*) FROM diff_anker) > 100 AS nontrivial;
DROP TABLE diff_heap, diff_anker;
DROP PROCEDURE diff_run;
DROP FUNCTION diff_check, diff_both, diff_random_op;
