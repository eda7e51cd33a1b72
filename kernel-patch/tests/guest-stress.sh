#!/bin/busybox sh
# The transfer stress test (tests/snapshot_stress.sh) in the QEMU guest, as the
# postgres user: pgbench moves money between accounts (the total never changes)
# while a reader sums all balances, on every snapshot provider, in PostgreSQL's
# executor and in the embedded DuckDB; every backend is a process of this
# kernel. Every sum must be the total. TAP on stdout.
#
#   guest-stress.sh WORKDIR SECONDS

work=$1
secs=${2:-8}
export PATH=/usr/lib/postgresql/15/bin:/bin PGHOST=$work PGUSER=postgres PGDATABASE=postgres TZ=UTC
methods="cow memcpy none vm_snapshot"
engines="postgres duckdb"
echo "1..$(($(echo $engines | wc -w) * $(echo $methods | wc -w)))"

bail() {
	echo "# $1"
	n=0
	for e in $engines; do
		for m in $methods; do
			n=$((n + 1))
			echo "not ok $n - transfer stress $e $m"
		done
	done
	exit 1
}

. /pgtests/guest-server.sh
start_server "$work" 512MB || bail "the server did not start"
psql -X -q -v ON_ERROR_STOP=1 \
	-c "CREATE EXTENSION anker" \
	-c "CREATE TABLE acct (id int PRIMARY KEY, balance bigint, note text) USING anker" \
	-c "INSERT INTO acct SELECT g, 1000, 'account ' || g FROM generate_series(1, 20000) g" \
	-c "VACUUM acct" > "$work/setup.log" 2>&1 || bail "setup failed: $(cat "$work/setup.log")"
total=$(psql -X -At -c "SELECT sum(balance) FROM acct")

n=0
for engine in $engines; do
	for method in $methods; do
		n=$((n + 1))
		node=AnkerAgg
		[ "$engine" = duckdb ] && node=AnkerDuckDB
		plan=$(psql -X -At -c "SET anker.olap_engine = $engine" -c "SET anker.olap_min_cost = 0" -c "EXPLAIN SELECT sum(balance) FROM acct" 2>&1)
		pgbench -n -c 2 -j 2 -T "$secs" -f /pgtests/transfer.sql > "$work/pgbench.log" 2>&1 &
		writer=$!
		sleep 1
		out=$(psql -X -At -v ON_ERROR_STOP=1 -v method="$method" -v engine="$engine" \
			-v total="$total" -v seconds=$((secs - 2)) -f /pgtests/transfer_reader.sql 2>&1)
		rc=$?
		wait "$writer"
		wrc=$?
		reads=$(echo "$out" | grep -o 'reads [0-9]*')
		tps=$(grep -o 'tps = [0-9.]*' "$work/pgbench.log" | head -n 1)
		if [ $rc = 0 ] && [ $wrc = 0 ] && [ -n "$reads" ] && echo "$plan" | grep -q "$node"; then
			echo "ok $n - transfer stress $engine $method: $reads consistent sums, writers $tps"
		else
			echo "not ok $n - transfer stress $engine $method"
			echo "$plan" "$out" | sed 's/^/#   /'
			tail -n 5 "$work/pgbench.log" | sed 's/^/#   /'
		fi
	done
done
[ "$(psql -X -At -c "SELECT sum(balance) FROM acct")" = "$total" ] ||
	echo "# the final sum differs from $total"
stop_server
exit 0
