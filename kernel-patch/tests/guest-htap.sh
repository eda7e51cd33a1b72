#!/bin/busybox sh
# An HTAP smoke run in the QEMU guest, as the postgres user: TPC-C (W=1,
# bench/tpcc, the standard mix, 2 clients) on anker tables while one OLAP
# stream cycles over CH-benCHmark Q1 and Q6 and the TPC-C consistency check
# (bench/tpcc/check.sql), with anker.snapshot_method = cow and then
# vm_snapshot in the OLAP sessions. Every backend is a process of this
# kernel. A case passes when the OLTP run ends cleanly, every OLAP query
# ran on the provider asked for, and no check found a violation. Prints
# each run's figures (TCG: compare the two providers of one run only).
# TAP on stdout.
#
#   guest-htap.sh WORKDIR SECONDS

work=$1
secs=${2:-10}
tpcc=/pgtests/tpcc
export PATH=/usr/lib/postgresql/15/bin:/bin PGHOST=$work PGUSER=postgres PGDATABASE=tpcc TZ=UTC
methods="cow vm_snapshot"
echo "1..$(echo $methods | wc -w)"

bail() {
	echo "# $1"
	[ -f "$work/load.log" ] && tail -n 20 "$work/load.log" | sed 's/^/#   /'
	n=0
	for m in $methods; do
		n=$((n + 1))
		echo "not ok $n - htap smoke anker-$m"
	done
	exit 1
}

. /pgtests/guest-server.sh
start_server "$work" 768MB || bail "the server did not start"
t0=$(date +%s)
{ psql -X -q -d postgres -c "CREATE DATABASE tpcc" &&
  psql -X -q -c "CREATE EXTENSION anker" &&
  psql -X -q -v am=anker -f $tpcc/schema.sql &&
  psql -X -q -v warehouses=1 -f $tpcc/load.sql &&
  psql -X -q -f $tpcc/indexes.sql &&
  psql -X -q -f $tpcc/functions.sql &&
  psql -X -q -c "VACUUM (ANALYZE)"; } > "$work/load.log" 2>&1 || bail "loading TPC-C failed"
echo "# TPC-C W=1 loaded in $(($(date +%s) - t0)) s"

n=0
for m in $methods; do
	n=$((n + 1))
	export PGOPTIONS="-c anker.snapshot_method=$m"
	plan=$(psql -X -At -c "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $(cat /pgtests/olap/ch6.pgbench)" 2>&1 | grep -c "Snapshot: $m")
	pgbench -n -M prepared -c 2 -j 2 -T "$secs" -D warehouses=1 -D uniform=0 \
		-f $tpcc/neworder.pgbench@45 -f $tpcc/payment.pgbench@43 \
		-f $tpcc/orderstatus.pgbench@4 -f $tpcc/delivery.pgbench@4 \
		-f $tpcc/stocklevel.pgbench@4 > "$work/oltp-$m.log" 2>&1 &
	oltp=$!
	queries=0 failed=0 checks=0 violations=0
	while kill -0 "$oltp" 2> /dev/null; do
		for q in ch1 ch6; do
			pgbench -n -t 1 -f /pgtests/olap/$q.pgbench > "$work/olap.log" 2>&1 ||
				{ failed=$((failed + 1)); sed 's/^/#   /' "$work/olap.log" | tail -n 3; }
			queries=$((queries + 1))
		done
		out=$(psql -X -At -F '|' -f $tpcc/check.sql 2>&1) ||
			{ failed=$((failed + 1)); echo "#   check: $out"; }
		checks=$((checks + 1))
		bad=$(echo "$out" | awk -F'|' '$2 != 0' | wc -l)
		[ "$bad" = 0 ] || { violations=$((violations + bad)); echo "$out" | sed 's/^/#   /'; }
	done
	wait "$oltp"
	rc=$?
	tps=$(grep -o 'tps = [0-9.]*' "$work/oltp-$m.log" | head -n 1)
	if [ $rc = 0 ] && [ "$plan" -ge 1 ] && [ $failed = 0 ] && [ $violations = 0 ] && [ $queries -gt 0 ]; then
		echo "ok $n - htap smoke anker-$m: OLTP $tps; OLAP $queries queries and $checks consistency checks in ${secs} s, no violation"
	else
		echo "not ok $n - htap smoke anker-$m (pgbench rc $rc, provider in plan: $plan, failed $failed, violations $violations)"
		# (an aborted client's error comes before pgbench's summary)
		grep -i "error" "$work/oltp-$m.log" | head -n 3 | sed 's/^/#   /'
		tail -n 5 "$work/oltp-$m.log" | sed 's/^/#   /'
	fi
done
stop_server
exit 0
