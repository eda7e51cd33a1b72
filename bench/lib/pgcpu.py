#!/usr/bin/env python3
"""CPU seconds of a PostgreSQL cluster's processes by kind, while a command runs.

    pgcpu.py POSTMASTER_PID -- COMMAND...

Runs COMMAND (its output passes through), samples /proc every 20 ms meanwhile, and
prints one line to stderr: `cpu: client=S autovacuum=S walwriter=S ...` with the CPU
seconds (user + system) each kind of process used while COMMAND ran. Kinds come from
the process titles PostgreSQL sets ("postgres: autovacuum worker db", "postgres:
walwriter", a client backend shows "user db [local] ..."). A process that exits between
two samples loses at most its last 20 ms; `reaped` is what the postmaster collected from
exited children meanwhile, a check on that.
"""
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
KINDS = ["autovacuum launcher", "autovacuum worker", "walwriter", "checkpointer",
         "background writer", "logical replication launcher", "walsender", "startup",
         "archiver", "stats collector", "parallel worker"]


def stat_fields(pid):
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    return text[text.rindex(")") + 2:].split()  # fields from 3 on (state)


def children(pm):
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = stat_fields(entry)
            if int(fields[1]) != pm:  # ppid
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                title = f.read().replace(b"\0", b" ").decode(errors="replace")
            out[int(entry)] = (kind_of(title), int(fields[11]) + int(fields[12]))
        except (OSError, ValueError, IndexError):
            continue  # exited meanwhile
    return out


def kind_of(title):
    for kind in KINDS:
        if kind in title:
            return kind.replace(" ", "_")
    return "client"


def reaped(pm):
    fields = stat_fields(pm)
    return int(fields[13]) + int(fields[14])  # cutime + cstime


def main():
    pm = int(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1:]
    first = children(pm)
    reaped_before = reaped(pm)
    last = dict(first)
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        time.sleep(0.02)
        last.update(children(pm))
    last.update(children(pm))
    used = {}
    for pid, (kind, ticks) in last.items():
        start = first.get(pid, (kind, 0))[1]
        used[kind] = used.get(kind, 0) + ticks - start
    used["reaped"] = reaped(pm) - reaped_before
    print("cpu: " + " ".join(f"{k}={v / TICK:.2f}" for k, v in sorted(used.items()) if v),
          file=sys.stderr)
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
