#!/usr/bin/env python3
"""Inclusive time per transaction of chosen functions, from `perf script` output of one
backend sampled at a fixed frequency (perf record -F FREQ --call-graph dwarf -p PID).

    perf script -i perf.data | perf_share.py --freq 2000 --seconds 4 --tps 6200 FUNC...

A sample counts for a function when the function is anywhere on its stack (once per sample,
however deep the recursion). Samples are CPU time only (perf samples a task while it runs), so
µs per transaction = samples / freq / (seconds * tps) * 1e6: the backend's CPU time spent
under the function, per transaction. Prints one line per function, in the order given:
"µs<TAB>function". With --top N, also the N anker:: functions with the most time.
"""
import argparse
import collections
import re
import sys


# anker's executor hooks and their error guard: they wrap whole statements, whichever engine
# the statement uses, so they say nothing about anker's own work
WRAPPERS = {
    "anker::pg_raw::try_finally",
    "anker::tam::assigned::while_running",
    "anker::tam::assigned::executor_run",
    "anker::tam::assigned::executor_finish",
    "anker::tam::projection::executor_start",
}


def symbol(frame):
    # "ffffffff81000130 entry_SYSCALL_64+0x76 ([kernel.kallsyms])" -> "entry_SYSCALL_64"
    parts = frame.strip().split(None, 1)
    if len(parts) < 2:
        return None
    name = re.sub(r"\+0x[0-9a-f]+", "", parts[1])
    name = re.sub(r" \(.*\)$", "", name)
    return re.sub(r"::h[0-9a-f]{16}$", "", name)


def inclusive_samples(lines):
    """Samples per function on their stacks (a sample's header line or a blank line ends the
    stack before it)."""
    counts = collections.Counter()
    stack = set()
    for line in lines:
        if line.startswith((" ", "\t")) and line.strip():
            name = symbol(line)
            if name:
                stack.add(name)
            continue
        counts.update(stack)
        stack = set()
    counts.update(stack)
    return counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--freq", type=float, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--tps", type=float, required=True)
    ap.add_argument("--top", type=int, default=0)
    ap.add_argument("functions", nargs="*")
    a = ap.parse_args()
    counts = inclusive_samples(sys.stdin)
    us = 1e6 / (a.freq * a.seconds * a.tps)
    for f in a.functions:
        print(f"{counts.get(f, 0) * us:.2f}\t{f}")
    if a.top:
        ours = [
            (n, c)
            for n, c in counts.items()
            if n.startswith("anker::") and "{{closure}}" not in n and not n.endswith("_inner") and n not in WRAPPERS
        ]
        for n, c in sorted(ours, key=lambda x: -x[1])[: a.top]:
            print(f"{c * us:.2f}\ttop: {n}")


if __name__ == "__main__":
    main()
