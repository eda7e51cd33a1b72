#!/usr/bin/env bash
# Scans cache page pointers between rows. Copy-on-write replaces a page that
# a snapshot shares, and the old page is freed once the snapshot ends and
# goes to the next allocation. A scan that read a row through its old
# pointer found the row missing, or spun for ever on a "latched" word of
# whatever the page had become (before the fix, DELETE FROM churn below hung
# within 90 s). Readers of live columns now enter the reclamation epoch and
# check for replaced pages before each row (Reader::guard_live).
#
# Here: clients update rows near the end of a 2,000-row table through a
# sequential scan (the scan's cached pages live longest); VACUUM in a loop
# writes images of it, each from a snapshot that shares every page for a
# moment; another table is filled and emptied, so freed pages are reused
# at once. Every update must find its row, nobody may hang, and the table
# must add up.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib/cluster.sh"
trap cluster_cleanup EXIT
DURATION=${PAGE_REUSE_SECONDS:-60}
cluster_start "shared_preload_libraries = 'anker'" "autovacuum = off" "lc_messages = 'C'"
W=$(cluster_workdir)
cluster_psql -q <<'EOF'
CREATE EXTENSION anker;
CREATE TABLE small (id int PRIMARY KEY, v int NOT NULL, pad text) USING anker;
INSERT INTO small SELECT i, 0, repeat('x', 400) FROM generate_series(1, 2000) i;
CREATE TABLE churn (a int, b text) USING anker;
-- STRICT: an UPDATE that finds no row is an error, not a skipped row
CREATE FUNCTION bump(p int) RETURNS int LANGUAGE plpgsql
SET enable_indexscan = off SET enable_bitmapscan = off AS $$
DECLARE r int;
BEGIN
    UPDATE small SET v = v + 1, pad = repeat(chr(65 + v % 26), 400) WHERE id = p RETURNING v INTO STRICT r;
    RETURN r;
END $$;
EOF
cat >"$W/bump.pgbench" <<'EOF'
\set p random(1900, 2000)
SELECT bump(:p);
EOF
cat >"$W/churn.pgbench" <<'EOF'
INSERT INTO churn SELECT i, repeat('y', 200) FROM generate_series(1, 2000) i;
DELETE FROM churn;
EOF
chmod a+r "$W"/*.pgbench
end=$((SECONDS + DURATION))
(while [ $SECONDS -lt $end ]; do cluster_psql -q -c "VACUUM small" -c "VACUUM churn" >/dev/null 2>&1 || true; done) &
vacuums=$!
cluster_pgbench -n -c 2 -T "$DURATION" -f "$W/churn.pgbench" postgres >"$W/churn.out" 2>&1 &
churn=$!
bump_rc=0
cluster_pgbench -n -c 4 -j 2 -T "$DURATION" -f "$W/bump.pgbench" postgres >"$W/bump.out" 2>&1 || bump_rc=$?
wait "$vacuums" || true
sleep 10
stuck=$(cluster_psql -Atc "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'
                           AND state = 'active' AND pid <> pg_backend_pid() AND now() - query_start > interval '10 s'")
churn_rc=0
if [ "$stuck" = 0 ]; then wait "$churn" || churn_rc=$?; else kill -9 "$churn" 2>/dev/null || true; fi
bumps=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$W/bump.out")
total=$(cluster_psql -Atc "SELECT sum(v) FROM small")
images=$(grep -c 'wrote an image of "small"' "$CLUSTER_LOG" || true)
echo "updates: ${bumps:-?} (sum of v: $total), images of small: $images, backends stuck: $stuck"
grep -E "aborted|ERROR" "$W/bump.out" "$W/churn.out" | head -5 || true
[ "$stuck" = 0 ] || { echo "FAILED: a backend hung"; exit 1; }
[ "$bump_rc" = 0 ] && [ "$churn_rc" = 0 ] || { echo "FAILED: pgbench reported errors"; exit 1; }
[ -n "$bumps" ] && [ "$total" = "$bumps" ] || { echo "FAILED: updates lost or doubled"; exit 1; }
# the premise: images were written while the clients ran, each sharing the pages
[ "$images" -ge 5 ] || { echo "FAILED: too few images of small ($images) to test anything"; exit 1; }
echo "page_reuse: ok"
