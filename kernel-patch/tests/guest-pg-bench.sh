#!/bin/busybox sh
# `SELECT sum(v)` over an anker table under a concurrent update stream, per
# snapshot provider, in the QEMU guest of `run-tests.sh --bench` (issue 20's
# third measurement), as the postgres user. Two pgbench clients update
# random rows by primary key for SECONDS per provider while one session runs
# the sum back to back with anker.snapshot_method set to the provider.
# Prints CSV lines "pg_sum,qemu,METHOD,ROWS,...": median and best sum
# latency, sums done, writer tps; every sum must equal the table's total
# (the updates move value between rows).
#
#   guest-pg-bench.sh WORKDIR ROWS SECONDS

work=$1
rows=${2:-2000000}
secs=${3:-20}
export PATH=/usr/lib/postgresql/15/bin:/bin PGHOST=$work PGUSER=postgres PGDATABASE=postgres TZ=UTC
methods="cow memcpy none vm_snapshot"

. /pgtests/guest-server.sh
start_server "$work" 1GB "shared_buffers = '128MB'" "synchronous_commit = off" ||
	{ echo "# the server did not start"; exit 1; }
t0=$(date +%s)
psql -X -q -v ON_ERROR_STOP=1 \
	-c "CREATE EXTENSION anker" \
	-c "CREATE TABLE t (id int PRIMARY KEY, v bigint) USING anker" \
	-c "INSERT INTO t SELECT g, 100 FROM generate_series(1, $rows) g" \
	-c "VACUUM ANALYZE t" > "$work/load.log" 2>&1 ||
	{ echo "# loading failed"; cat "$work/load.log"; exit 1; }
total=$(psql -X -At -c "SELECT sum(v) FROM t")
echo "# $rows rows loaded in $(($(date +%s) - t0)) s; total $total"
cat > "$work/move.sql" <<EOF
\set a random(1, $rows)
\set b random(1, $rows)
BEGIN;
UPDATE t SET v = v - 1 WHERE id = :a;
UPDATE t SET v = v + 1 WHERE id = :b;
END;
EOF
echo "experiment,env,method,rows,seconds,sums,median_ms,best_ms,writer_tps,wrong_sums"
for m in $methods; do
	pgbench -n -c 2 -j 2 -T "$secs" -f "$work/move.sql" > "$work/pgbench-$m.log" 2>&1 &
	writer=$!
	sleep 1
	: > "$work/times"
	wrong=0 n=0
	end=$(($(date +%s) + secs - 2))
	while [ "$(date +%s)" -lt "$end" ]; do
		r=$(psql -X -At -c "SET anker.snapshot_method = $m" -c '\timing on' -c "SELECT sum(v) FROM t" 2>&1)
		s=$(echo "$r" | grep -v Time | tail -n 1)
		[ "$s" = "$total" ] || wrong=$((wrong + 1))
		echo "$r" | grep -o 'Time: [0-9.]*' | tail -n 1 | awk '{print $2}' >> "$work/times"
		n=$((n + 1))
	done
	wait "$writer"
	tps=$(grep -o 'tps = [0-9.]*' "$work/pgbench-$m.log" | head -n 1 | awk '{print $3}')
	med=$(sort -n "$work/times" | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
	best=$(sort -n "$work/times" | head -n 1)
	echo "pg_sum,qemu,$m,$rows,$secs,$n,$med,$best,$tps,$wrong"
done
stop_server
exit 0
