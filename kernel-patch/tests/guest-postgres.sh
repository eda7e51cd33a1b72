#!/bin/busybox sh
# /tests/postgres in the QEMU guest (run-tests.sh packs the host's PostgreSQL 15,
# the installed anker and these suites into the initramfs): anker's pg_regress
# suites, then the transfer stress test (guest-stress.sh) and an HTAP smoke
# run (guest-htap.sh), on the patched
# kernel, every backend a process of this kernel. Prints TAP for the host;
# pg_regress's own output and any diffs as comments.

work=/tmp/pg
tests="setup snapshots vm_snapshot"
rm -rf "$work"
mkdir -p "$work"
cp -r /pgtests/sql /pgtests/expected "$work"/
cat > "$work/anker.conf" <<EOF
shared_preload_libraries = 'anker'
anker.memory_limit = '256MB'
max_prepared_transactions = 10
lc_messages = 'C'
anker.snapshot_min_rows = 0
jit = off
EOF
chown -R postgres "$work"

echo "1..$(echo $tests | wc -w)"
su -s /bin/sh postgres -c "cd $work && TZ=UTC \
	/usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress \
	--temp-instance=$work/tmp_check --temp-config=$work/anker.conf \
	--bindir=/usr/lib/postgresql/15/bin --inputdir=$work --outputdir=$work \
	--encoding=UTF8 --no-locale $tests" > "$work/run.log" 2>&1
sed 's/^/# /' "$work/run.log"
n=0
for t in $tests; do
	n=$((n + 1))
	if grep -Eq "^test $t +\.\.\. ok" "$work/run.log"; then
		echo "ok $n - pg_regress $t"
	else
		echo "not ok $n - pg_regress $t"
	fi
done
if [ -f "$work/regression.diffs" ]; then
	head -n 100 "$work/regression.diffs" | sed 's/^/#   /'
	# a suite's whole output, to make its expected file from
	for t in $tests; do
		grep -Eq "^test $t +\.\.\. ok" "$work/run.log" ||
			sed "s/^/VMSNAP-RESULT $t: /" "$work/results/$t.out" 2>/dev/null
	done
fi
log=$work/log/postmaster.log
if [ -f "$log" ]; then
	grep -E 'PANIC|FATAL|terminated by signal' "$log" | sed 's/^/#   /'
	grep -q '^test .* ok' "$work/run.log" || tail -n 20 "$log" | sed 's/^/#   /'
fi

mkdir -p "$work/stress"
chown postgres "$work/stress"
su -s /bin/sh postgres -c "/pgtests/guest-stress.sh $work/stress 8"

mkdir -p "$work/htap"
chown postgres "$work/htap"
su -s /bin/sh postgres -c "/pgtests/guest-htap.sh $work/htap 10"
