-- anker is preloaded by the test instance; the extension creates the
-- access method and the schema anker.
CREATE EXTENSION anker;
SELECT amname, amtype FROM pg_am WHERE amname = 'anker';
SELECT nspname FROM pg_namespace WHERE nspname = 'anker';
SELECT proname FROM pg_proc WHERE pronamespace = 'anker'::regnamespace ORDER BY 1;
SELECT limit_bytes > 0 AS has_limit, used_bytes > 0 AS has_usage FROM anker.memory;
SHOW anker.memory_limit;
-- anker.memory_limit is fixed at server start
SET anker.memory_limit = '1GB';
-- EXPLAIN ANALYZE of a query without timings (the suites after this one
-- use it)
CREATE FUNCTION plan_of(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE l text;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    RETURN NEXT l;
  END LOOP;
END $$;
-- the same with VERBOSE: also how AnkerAgg read its rows
CREATE FUNCTION plan_verbose_of(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE l text;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    RETURN NEXT l;
  END LOOP;
END $$;
