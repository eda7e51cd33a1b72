#!/bin/bash
# Build a Linux 6.1 kernel (Debian's linux-source-6.1) with the vm_snapshot
# patch and a debug config, boot it in QEMU (TCG) with a busybox initramfs,
# run the C selftests and the engine's snapshot tests (its vm_snapshot
# provider) inside, and check the kernel log.
#
#   kernel-patch/run-tests.sh            # build + selftests
#   kernel-patch/run-tests.sh --bench    # build + micro-benchmark in the guest
#
# Non-interactive and idempotent.  The last line of output is always
# "N passed, M failed" (test cases; a dirty kernel log counts as a failed
# case).  Exit status is non-zero on any failure.
#
# Environment:
#   ANKER_KERNEL_CACHE   work directory (default /var/tmp/anker-kernel)
#   ANKER_KERNEL_JOBS    make -j (default 2)
#   ANKER_QEMU_TIMEOUT   seconds before the guest is killed (default 900,
#                        3600 with --bench)
#   ANKER_BENCH_ARGS     arguments for snapshot_micro in --bench mode
#   ANKER_BENCH_OUT      CSV output of --bench (default
#                        bench/snapshot-micro/results/qemu.csv)
#
# --bench builds a second kernel without the debug options (build-bench/):
# lockdep, DEBUG_VM and PAGE_TABLE_CHECK slow down exactly the kernel paths
# being compared.  The guest clock is the host TSC (see tsc_early_khz).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
CACHE=${ANKER_KERNEL_CACHE:-/var/tmp/anker-kernel}
JOBS=${ANKER_KERNEL_JOBS:-2}
QEMU_TIMEOUT=${ANKER_QEMU_TIMEOUT:-}
# The series, applied in order (0002 builds on 0001).
PATCHES=("$HERE"/0001-mm-add-vm_snapshot-system-call.patch
	"$HERE"/0002-mm-vm_snapshot-frozen-snapshots-of-shared-memfds.patch)
FRAGMENT=$HERE/config.fragment
TARBALL=/usr/src/linux-source-6.1.tar.xz
SRC=$CACHE/linux-source-6.1
BUILD=$CACHE/build
OUT=$CACHE/out
MODE="test"

case "${1:-}" in
--bench) MODE=bench ;;
"") ;;
*) echo "usage: $0 [--bench]" >&2; exit 2 ;;
esac
if [ "$MODE" = bench ]; then
	BUILD=$CACHE/build-bench
	QEMU_TIMEOUT=${QEMU_TIMEOUT:-3600}
	QEMU_MEM=2G
else
	QEMU_TIMEOUT=${QEMU_TIMEOUT:-900}
	QEMU_MEM=2G
fi

log() { echo "[run-tests] $*" >&2; }
finish() {	# finish PASSED FAILED
	echo "$1 passed, $2 failed"
	[ "$2" -eq 0 ]
	exit $?
}
die() {
	log "error: $*"
	finish 0 1
}

start_time=$(date +%s)

# ---------------------------------------------------------------- packages
need=()
for p in linux-source-6.1 qemu-system-x86 busybox-static cpio flex bison bc \
	libelf-dev libssl-dev gcc make libc6-dev patch xz-utils gzip; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
		grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	log "installing: ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt_install() {
		apt-get -o DPkg::Lock::Timeout=600 install -y \
			--no-install-recommends "${need[@]}"
	}
	apt_install >&2 || { apt-get -o DPkg::Lock::Timeout=600 update >&2 &&
		apt_install >&2; } || die "apt-get install failed"
fi
[ -f "$TARBALL" ] || die "$TARBALL missing"
for p in "${PATCHES[@]}"; do
	[ -f "$p" ] || die "$p missing"
done
mkdir -p "$CACHE" "$OUT"
# One run at a time per cache directory (CI and a developer may overlap).
exec 9> "$CACHE/.lock"
flock 9

# ------------------------------------------------------------------ source
src_version=$(dpkg-query -W -f='${Version}' linux-source-6.1)
if [ ! -f "$SRC/Makefile" ] || [ ! -f "$CACHE/source.stamp" ] ||
	[ "$(cat "$CACHE/source.stamp")" != "$src_version" ]; then
	log "unpacking linux-source-6.1 $src_version into $CACHE"
	rm -rf "$SRC" "$BUILD" "$CACHE/source.stamp"
	tar -xJf "$TARBALL" -C "$CACHE"
	echo "$src_version" > "$CACHE/source.stamp"
fi

# Files a patch touches (paths relative to the tree).
patch_files() {
	grep -E '^(\+\+\+|---) ' "$1" | awk '{print $2}' | grep -v '^/dev/null' |
		sed 's|^[ab]/||' | sort -u
}

# Apply the series ($PATCH, its concatenation).  If another version was
# applied before, rebuild only the files whose content changes, so that
# make's incremental build stays small.
PATCH=$CACHE/series.patch
cat "${PATCHES[@]}" > "$PATCH"
applied=$SRC/.anker-applied.patch
if [ ! -f "$applied" ]; then
	log "applying ${PATCHES[*]##*/}"
	(cd "$SRC" && patch -p1 -s --forward --no-backup-if-mismatch < "$PATCH") ||
		die "patch does not apply"
	cp "$PATCH" "$applied"
elif ! cmp -s "$PATCH" "$applied"; then
	log "patch changed: updating the tree"
	stage=$CACHE/stage
	rm -rf "$stage"
	mkdir -p "$stage"
	mapfile -t files < <( (patch_files "$applied"; patch_files "$PATCH") | sort -u)
	members=()
	for f in "${files[@]}"; do members+=("linux-source-6.1/$f"); done
	mkdir -p "$stage/linux-source-6.1"
	# Members that only the patches create are missing: tar then fails.
	tar -xJf "$TARBALL" -C "$stage" "${members[@]}" 2>/dev/null || true
	(cd "$stage/linux-source-6.1" &&
	 patch -p1 -s --forward --no-backup-if-mismatch < "$PATCH") ||
		die "patch does not apply"
	for f in "${files[@]}"; do
		if [ -f "$stage/linux-source-6.1/$f" ]; then
			cmp -s "$stage/linux-source-6.1/$f" "$SRC/$f" || {
				mkdir -p "$(dirname "$SRC/$f")"
				cp "$stage/linux-source-6.1/$f" "$SRC/$f"
			}
		else
			rm -f "$SRC/$f"
		fi
	done
	cp "$PATCH" "$applied"
	rm -rf "$stage"
fi

# ------------------------------------------------------------------ config
cfg=$CACHE/config-gen
rm -rf "$cfg"
mkdir -p "$cfg" "$BUILD"
make -s -C "$SRC" O="$cfg" tinyconfig > /dev/null
fragment=$FRAGMENT
if [ "$MODE" = bench ]; then
	# everything before the debugging section of the fragment
	fragment=$cfg/bench.fragment
	sed '/^# --- debugging/,$d' "$FRAGMENT" > "$fragment"
fi
"$SRC/scripts/kconfig/merge_config.sh" -m -O "$cfg" "$cfg/.config" "$fragment" > /dev/null
make -s -C "$SRC" O="$cfg" olddefconfig > /dev/null
while read -r line; do
	case "$line" in
	"# CONFIG_"*" is not set")
		opt=${line#\# }
		opt=${opt%% *}
		! grep -q "^$opt=" "$cfg/.config" ||
			die "config: $opt is still set"
		;;
	"" | "#"*) ;;
	*) grep -qxF "$line" "$cfg/.config" ||
		die "config: $line did not stick" ;;
	esac
done < "$fragment"
if ! cmp -s "$cfg/.config" "$BUILD/.config"; then
	log "kernel config changed"
	cp "$cfg/.config" "$BUILD/.config"
fi
rm -rf "$cfg"

# ------------------------------------------------------------------- build
log "building the kernel (make -j$JOBS; incremental if cached)"
t0=$(date +%s)
if ! make -C "$SRC" O="$BUILD" -j"$JOBS" bzImage > "$OUT/build.log" 2>&1; then
	tail -40 "$OUT/build.log" >&2
	die "kernel build failed"
fi
log "kernel built in $(($(date +%s) - t0))s"
KERNEL=$BUILD/arch/x86/boot/bzImage

# ------------------------------------------------------- userspace + initrd
# The host's PostgreSQL 15 with the installed anker, their shared libraries
# and anker's pg_regress suites, for /tests/postgres (guest-postgres.sh).
# Skipped, with a note, when PostgreSQL or anker is not installed.
pack_postgres() {	# root
	local root=$1 pg=/usr/lib/postgresql/15 f
	if [ ! -x "$pg/bin/postgres" ] || [ ! -f "$pg/lib/anker.so" ]; then
		log "PostgreSQL 15 with anker is not installed: the guest runs no PostgreSQL"
		return 0
	fi
	local files=("$pg"/bin/{postgres,initdb,pg_ctl,psql,pgbench}
		"$pg/lib/pgxs/src/test/regress/pg_regress")
	for f in "$pg"/lib/*.so; do
		case $(basename "$f") in
		llvmjit.so | sepgsql.so) ;;	# JIT is off; no SELinux
		*) files+=("$f") ;;
		esac
	done
	mapfile -t libs < <(ldd "${files[@]}" 2> /dev/null |
		awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/lib64\// { print $1 }' | sort -u)
	for f in "${files[@]}" "${libs[@]}"; do
		mkdir -p "$root$(dirname "$f")"
		cp -L "$f" "$root$f"
	done
	mkdir -p "$root/usr/share/postgresql" "$root/etc" \
		"$root/pgtests/sql" "$root/pgtests/expected"
	cp -r /usr/share/postgresql/15 "$root/usr/share/postgresql/"
	cp -rL /usr/share/zoneinfo "$root/usr/share/"	# pg_regress runs in America/Los_Angeles
	printf 'root:x:0:0:root:/:/bin/sh\npostgres:x:100:100:postgres:/tmp:/bin/sh\n' > "$root/etc/passwd"
	printf 'root:x:0:\npostgres:x:100:\n' > "$root/etc/group"
	for t in setup snapshots vm_snapshot; do
		cp "$REPO/sql/$t.sql" "$root/pgtests/sql/"
		cp "$REPO"/expected/"$t"{,_[0-9]}.out "$root/pgtests/expected/" 2> /dev/null || true
	done
	cp "$HERE/tests/guest-postgres.sh" "$root/tests/postgres"
	cp "$HERE/tests/guest-stress.sh" "$REPO/tests/transfer.sql" "$REPO/tests/transfer_reader.sql" "$root/pgtests/"
	# the HTAP smoke run: TPC-C and two CH-benCHmark queries
	mkdir -p "$root/pgtests/tpcc" "$root/pgtests/olap"
	cp "$REPO"/bench/tpcc/*.sql "$REPO"/bench/tpcc/*.pgbench "$root/pgtests/tpcc/"
	cp "$REPO"/bench/olap/ch1.pgbench "$REPO"/bench/olap/ch6.pgbench "$root/pgtests/olap/"
	cp "$HERE"/tests/guest-htap.sh "$HERE"/tests/guest-pg-bench.sh "$HERE"/tests/guest-server.sh "$root/pgtests/"
	chmod +x "$root/tests/postgres" "$root/pgtests/"guest-*.sh
}

CFLAGS="-O2 -g -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers -static -pthread"
root=$OUT/initramfs
rm -rf "$root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,tests,bench}
cp /bin/busybox "$root/bin/busybox"
cp "$HERE/tests/guest-init.sh" "$root/init"
chmod +x "$root/init"
if [ "$MODE" = test ]; then
	for t in "$HERE"/tests/vm_snapshot_*.c; do
		name=$(basename "$t" .c)
		# shellcheck disable=SC2086
		gcc $CFLAGS -o "$root/tests/$name" "$t" ||
			die "cannot compile $t"
	done
	# The engine's snapshot tests (extension/engine/tests/snapshots.rs),
	# static, so that its vm_snapshot provider is tested on this kernel, and
	# its arena under signals (tests/arena_signals.rs: 6.1's tmpfs fallocate
	# returns EINTR, the host's kernel may not).
	command -v cargo > /dev/null || die "cargo is needed for the engine's tests"
	log "building the engine's snapshot and arena tests (static)"
	engine_tests="snapshots arena_signals"
	# shellcheck disable=SC2046 # one --test per name
	exes=$(cd "$REPO/extension/engine" &&
		RUSTFLAGS="-C target-feature=+crt-static" \
		CARGO_TARGET_DIR="$CACHE/engine-target" \
		cargo test --release --target x86_64-unknown-linux-gnu \
			$(printf -- '--test %s ' $engine_tests) --no-run --message-format=json \
			2> "$OUT/engine-build.log" |
		sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' || true)
	for t in $engine_tests; do
		exe=$(echo "$exes" | grep "/${t}-[^/]*$" | tail -1)
		[ -n "$exe" ] && [ -x "$exe" ] || {
			tail -20 "$OUT/engine-build.log" >&2
			die "cannot build the engine's $t tests"
		}
		cp "$exe" "$root/tests/engine_$t"
	done
	pack_postgres "$root"
else
	make -s -C "$REPO/bench/snapshot-micro" snapshot_micro >&2 ||
		die "cannot build the benchmark"
	cp "$REPO/bench/snapshot-micro/snapshot_micro" "$root/bench/"
	# the engine's providers in the same experiments, static
	(cd "$REPO/extension/engine" &&
		RUSTFLAGS="-C target-feature=+crt-static" \
		CARGO_TARGET_DIR="$CACHE/engine-target" \
		cargo build -q --release --target x86_64-unknown-linux-gnu \
			--example snapshot_micro) >&2 ||
		die "cannot build the engine's benchmark"
	cp "$CACHE/engine-target/x86_64-unknown-linux-gnu/release/examples/snapshot_micro" \
		"$root/bench/engine_snapshot_micro"
	# PostgreSQL's sums under updates, per provider (guest-pg-bench.sh)
	pack_postgres "$root"
fi
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$OUT/initramfs.cpio.gz"

# -------------------------------------------------------------------- boot
append="console=ttyS0 panic=-1 vmsnap.mode=$MODE"
# Without ACPI the guest has no HPET/PM timer to calibrate the TSC and falls
# back to a 4 ms jiffies clock (PostgreSQL then times snapshot creation at 0
# ns).  Under TCG the guest TSC is the host TSC: give its frequency (only
# ratios are reported, so an inexact value does not matter).
khz=$(awk -F: '/^cpu MHz/ {printf "%d", $2 * 1000; exit}' /proc/cpuinfo)
append="$append tsc_early_khz=${khz:-2000000} tsc=reliable clocksource=tsc"
if [ "$MODE" = bench ]; then
	# Scaled-down sizes: TCG runs system calls some 20-100x slower.
	args=${ANKER_BENCH_ARGS:--e qemu -p 2048 -t 50 -r 3 -f 8192 -s 256 -d 1024}
	append="$append vmsnap.args=${args// /,}"
fi
serial=$OUT/serial-$MODE.log
log "booting QEMU (TCG, 2 CPUs, timeout ${QEMU_TIMEOUT}s); log: $serial"
t0=$(date +%s)
set +e
# sockets=2: without ACPI the kernel finds CPUs in SeaBIOS's MP table,
# which lists one CPU per package.
timeout "$QEMU_TIMEOUT" qemu-system-x86_64 -accel tcg \
	-smp 2,sockets=2,cores=1,threads=1 -m "$QEMU_MEM" \
	-nographic -no-reboot -kernel "$KERNEL" \
	-initrd "$OUT/initramfs.cpio.gz" -append "$append" \
	< /dev/null > "$serial" 2>&1
qemu_rc=$?
set -e
tr -d '\r' < "$serial" > "$serial.tmp" && mv "$serial.tmp" "$serial"
log "guest ran $(($(date +%s) - t0))s (qemu exit $qemu_rc)"

# ------------------------------------------------------------------- check
# Kernel log lines that mean failure.  Test output never contains them.
bad_re='BUG|WARNING|Oops|Bad rss-counter|page_table_check|possible circular locking|inconsistent lock state|possible recursive locking|suspicious RCU usage|lock held when returning|sleeping function called from invalid context|Kernel panic|general protection fault|Bad page|bad_page|Call Trace|INFO: task .* blocked|soft lockup|hard LOCKUP|list_add corruption|list_del corruption|segfault at'
kernel_bad=0
if grep -E "$bad_re" "$serial" > "$OUT/kernel-problems.txt"; then
	kernel_bad=1
	log "kernel log problems:"
	head -60 "$OUT/kernel-problems.txt" >&2
fi
done_marker=0
grep -q '^VMSNAP-DONE' "$serial" && done_marker=1

if [ "$MODE" = bench ]; then
	csv=${ANKER_BENCH_OUT:-$REPO/bench/snapshot-micro/results/qemu.csv}
	mkdir -p "$(dirname "$csv")"
	sed -n '/^VMSNAP-BENCH-BEGIN/,/^VMSNAP-BENCH-END/p' "$serial" |
		grep -v '^VMSNAP-BENCH' | grep -E '^[a-z0-9_]+,|^#' > "$csv" || true
	# PostgreSQL's sums under updates (guest-pg-bench.sh): a file of their own
	grep -E '^(pg_sum|experiment,env,method,rows),' "$csv" > "${csv%.csv}-pg.csv" || true
	sed -i -E '/^(pg_sum|experiment,env,method,rows),/d' "$csv"
	rc_line=$(grep '^VMSNAP-BENCH-END' "$serial" || true)
	log "benchmark CSV: $csv ($(wc -l < "$csv") lines)"
	ok=1
	[ "$done_marker" = 1 ] && [ "$rc_line" = "VMSNAP-BENCH-END rc=0" ] &&
		[ "$kernel_bad" = 0 ] || ok=0
	log "total $(($(date +%s) - start_time))s"
	if [ "$ok" = 1 ]; then
		finish 1 0
	fi
	finish 0 1
fi

grep -E '^(ok|not ok) [0-9]+ - ' "$serial" > "$OUT/results.txt" || true
grep -E '^not ok |^#   ' "$serial" >&2 || true
passed=$(grep -c '^ok ' "$OUT/results.txt" || true)
failed=$(grep -c '^not ok ' "$OUT/results.txt" || true)
planned=$(grep -E '^1\.\.[0-9]+$' "$serial" | sed 's/^1[.][.]//' | awk '{s += $1} END {print s + 0}')
if [ "$done_marker" = 0 ]; then
	log "guest did not finish (crash or timeout)"
	failed=$((failed + 1))
fi
if grep -q '^Bail out!' "$serial" || [ "$planned" -eq 0 ]; then
	log "a test program bailed out or no test ran"
	failed=$((failed + 1))
fi
if [ "$((passed + failed))" -lt "$planned" ]; then
	log "only $((passed + failed)) of $planned planned test cases reported"
	failed=$((failed + planned - passed - failed))
fi
# The kernel log is one more test case.
if [ "$kernel_bad" = 1 ]; then
	failed=$((failed + 1))
else
	passed=$((passed + 1))
fi
log "total $(($(date +%s) - start_time))s"
finish "$passed" "$failed"
