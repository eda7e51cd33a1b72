#!/bin/busybox sh
# /init of the QEMU guest built by run-tests.sh (busybox initramfs).
# Kernel command line: vmsnap.mode=test (default) or vmsnap.mode=bench.
# Everything goes to the serial console; the host parses it.

/bin/busybox --install -s /bin
export PATH=/bin
mkdir -p /proc /sys /dev /tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
# POSIX shared memory (PostgreSQL's dynamic shared memory)
mkdir -p /dev/shm
mount -t tmpfs tmpfs /dev/shm

mode="test"
# shellcheck disable=SC2013 # words, not lines
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	vmsnap.mode=*) mode=${arg#vmsnap.mode=} ;;
	vmsnap.args=*) bench_args=$(echo "${arg#vmsnap.args=}" | tr ',' ' ') ;;
	esac
done

echo "VMSNAP-GUEST: $(uname -r) mode=$mode cpus=$(grep -c ^processor /proc/cpuinfo)"

# Swap on zram (the swap and swapoff tests need it).
if [ -e /sys/block/zram0/disksize ]; then
	echo 256M > /sys/block/zram0/disksize &&
	mkswap /dev/zram0 > /dev/null &&
	swapon /dev/zram0 ||
	echo "VMSNAP-GUEST: zram swap setup failed"
fi
# hugetlb pages for the refusal test, THP only where asked for.
echo 2 > /proc/sys/vm/nr_hugepages
echo madvise > /sys/kernel/mm/transparent_hugepage/enabled
grep -E 'SwapTotal|HugePages_Total' /proc/meminfo | sed 's/^/VMSNAP-GUEST: /'

if [ "$mode" = bench ]; then
	echo "VMSNAP-BENCH-BEGIN"
	# shellcheck disable=SC2086
	/bench/snapshot_micro $bench_args
	rc=$?
	# shellcheck disable=SC2086
	/bench/engine_snapshot_micro $bench_args || rc=$?
	if [ -x /pgtests/guest-pg-bench.sh ]; then
		mkdir -p /tmp/pgbench
		chown postgres /tmp/pgbench
		su -s /bin/sh postgres -c "/pgtests/guest-pg-bench.sh /tmp/pgbench 2000000 20" || rc=$?
	fi
	echo "VMSNAP-BENCH-END rc=$rc"
else
	for t in /tests/*; do
		echo "VMSNAP-RUN: $t"
		case "$t" in
		/tests/engine_*)
			# Rust test harness: the provider must be found here;
			# its results are restated as TAP for the host.
			ANKER_REQUIRE_VM_SNAPSHOT=1 "$t" --test-threads=1 2>&1 |
				awk '{ print }
				/^running [0-9]+ tests?$/ { print "1.." $2 }
				/^test .* \.\.\. ok$/ { n++; print "ok " n " - " $2 }
				/^test .* \.\.\. FAILED$/ { n++; print "not ok " n " - " $2 }'
			;;
		*) "$t" ;;
		esac
		echo "VMSNAP-RC: $t $?"
	done
fi
# Give the kernel a moment to print anything pending (e.g. from exit paths).
sleep 1
echo "VMSNAP-DONE"
reboot -f
