#!/bin/bash
# Run the snapshot micro-benchmark on this machine (every method but
# vm_snapshot, unless the running kernel has it), then the engine's own
# providers (extension/engine/examples/snapshot_micro.rs), and redraw the
# plots.
#
#   bench/snapshot-micro/run-host.sh [extra snapshot_micro options]
#
# Full scale is the papers' table: 50 columns of 51,200 pages (200 MiB),
# i.e. 10 GiB of anonymous memory at once.  If less than 1.6x that is
# available, the column size is halved until it fits (the CSV records the
# size used).  Needs root for vm.max_map_count (rewiring creates one VMA per
# modified page: about 5 million VMAs at full scale).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=$HERE/results
mkdir -p "$OUT"
make -s -C "$HERE" snapshot_micro

pages=51200
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
while [ $((50 * pages * 4 * 16 / 10)) -gt "$avail_kb" ] && [ "$pages" -gt 1024 ]; do
	pages=$((pages / 2))
done
echo "# columns of $pages pages (MemAvailable ${avail_kb} kB)" >&2

"$HERE/snapshot_micro" -e host -p "$pages" -t 50 -r 3 -f 51200 -s 512 \
	-d 2048 "$@" -o "$OUT/host.csv"

# The engine's own providers, same sizes, rows appended (engine-cow, and
# engine-vm_snapshot where the kernel has the call).
REPO=$(cd "$HERE/../.." && pwd)
(cd "$REPO/extension/engine" &&
	CARGO_TARGET_DIR=target/bench cargo build -q --release --example snapshot_micro)
"$REPO/extension/engine/target/bench/release/examples/snapshot_micro" -e host \
	-p "$pages" -t 50 -r 3 -f 51200 -s 512 -d 2048 -o "$OUT/host.csv"

# Debian's matplotlib (python3-matplotlib) lives in /usr/bin/python3.
py=/usr/bin/python3
"$py" -c 'import matplotlib' 2> /dev/null || py=python3
csvs=("$OUT"/host.csv)
[ -f "$OUT/qemu.csv" ] && csvs+=("$OUT/qemu.csv")
"$py" "$HERE/plot.py" -o "$OUT" "${csvs[@]}"
