-- pgbench script of the transfer stress tests (tests/snapshot_stress.sh,
-- tests/standby_load_races.sh, tests/wal_minimal.sh, and in the QEMU guest
-- kernel-patch/tests/guest-stress.sh): move money between two of 20,000 accounts;
-- the total never changes (tests/transfer_reader.sql checks it).
\set a random(1, 20000)
\set b random(1, 20000)
\set x random(1, 100)
BEGIN;
UPDATE acct SET balance = balance - :x, note = 'sent ' || :x WHERE id = :a;
UPDATE acct SET balance = balance + :x, note = 'got ' || :x WHERE id = :b;
END;
