-- Reader of the transfer stress tests (tests/snapshot_stress.sh, and in the QEMU guest
-- kernel-patch/tests/guest-stress.sh), run by psql with the variables method, engine,
-- total and seconds: sum every balance again and again for that many seconds, on snapshot
-- provider `method` in OLAP engine `engine`, and fail at the first sum that is not `total`
-- (transfer.sql never changes it). Prints the NOTICE `reads N`.
SET anker.snapshot_method = :'method';
SET anker.olap_engine = :'engine';
SET anker.olap_min_cost = 0;
SET anker.olap_threads = 2;
SET transfer.total = :'total';
SET transfer.seconds = :'seconds';
DO $$
DECLARE
  total bigint := current_setting('transfer.total')::bigint;
  t_end timestamptz := clock_timestamp() + current_setting('transfer.seconds')::int * interval '1 second';
  s bigint;
  n int := 0;
BEGIN
  WHILE clock_timestamp() < t_end LOOP
    SELECT sum(balance) INTO s FROM acct;
    IF s <> total THEN
      RAISE EXCEPTION 'inconsistent sum % (expected %) after % reads', s, total, n;
    END IF;
    n := n + 1;
  END LOOP;
  RAISE NOTICE 'reads %', n;
END $$;
