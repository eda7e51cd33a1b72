#!/usr/bin/env python3
"""Inclusive time per transaction of chosen functions, from `perf script` output of one
backend sampled at a fixed frequency (perf record -F FREQ --call-graph dwarf -p PID).

    perf script -i perf.data | perf_share.py --freq 2000 --seconds 4 --tps 6200 FUNC...

A sample counts for a function when the function is anywhere on its stack (once per sample,
however deep the recursion). Samples are CPU time only (perf samples a task while it runs), so
µs per transaction = samples / freq / (seconds * tps) * 1e6: the backend's CPU time spent
under the function, per transaction. Prints one line per function, in the order given:
"µs<TAB>function". With --top N, also the N anker:: functions with the most time. Then the
backend's time by the object its samples land in ("µs<TAB>in: anker.so", "… in: the kernel",
"… in: PostgreSQL and libraries"): what anker's own code costs, whoever calls it.
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


def place(frame):
    """Where a frame's code lives: anker.so, the kernel, or PostgreSQL and its libraries; None
    for a frame inlined into the next one."""
    m = re.search(r"\(([^()]*)\)\s*$", frame)
    if not m or m.group(1) == "inlined":
        return None
    if m.group(1).endswith("/anker.so"):
        return "anker.so"
    return "the kernel" if m.group(1).startswith("[kernel") else "PostgreSQL and libraries"


def inclusive_samples(lines):
    """Samples per function on their stacks (a sample's header line or a blank line ends the
    stack before it), and per object the innermost frame (where the CPU was) belongs to."""
    counts = collections.Counter()
    places = collections.Counter()
    stack = set()
    leaf = None
    for line in lines:
        if line.startswith((" ", "\t")) and line.strip():
            name = symbol(line)
            if name:
                stack.add(name)
            leaf = leaf or place(line)
            continue
        counts.update(stack)
        if leaf:
            places[leaf] += 1
        stack, leaf = set(), None
    counts.update(stack)
    if leaf:
        places[leaf] += 1
    return counts, places


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--freq", type=float, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--tps", type=float, required=True)
    ap.add_argument("--top", type=int, default=0)
    ap.add_argument("functions", nargs="*")
    a = ap.parse_args()
    counts, places = inclusive_samples(sys.stdin)
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
    for p in ("anker.so", "PostgreSQL and libraries", "the kernel"):
        print(f"{places.get(p, 0) * us:.2f}\tin: {p}")


if __name__ == "__main__":
    main()
