#!/usr/bin/python3
"""Plots for bench/snapshots: creation.png, first_write.png, sum_latency.png
from the CSV files in the directory given as argument."""
import csv
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")


def rows(name):
    p = out / name
    if not p.exists():
        return []
    with p.open() as f:
        return list(csv.DictReader(f))


c = rows("creation.csv")
if c:
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = [f"{r['columns']} col\n({int(r['mib'])} MiB)" for r in c]
    x = range(len(c))
    w = 0.27
    for i, (key, name) in enumerate([("cow_ms", "cow"), ("memcpy_ms", "memcpy"), ("fork_ms", "fork")]):
        ax.bar([j + (i - 1) * w for j in x], [float(r[key]) for r in c], w, label=name)
    ax.set_yscale("log")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("snapshot creation (ms, log scale)")
    ax.set_title("Snapshot creation: copy-on-write vs memcpy vs fork")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "creation.png", dpi=120)

fw = rows("first_write.csv")
if fw:
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar([r["kind"] for r in fw], [float(r["ns"]) / 1000 for r in fw], color=["tab:red", "tab:green"])
    ax.set_ylabel("update latency (µs)")
    ax.set_title("First write to a shared page vs a private page")
    fig.tight_layout()
    fig.savefig(out / "first_write.png", dpi=120)

lat = rows("sum_latency.csv")
if lat:
    methods = ["none", "cow", "memcpy"]
    data = [[float(r["ms"]) for r in lat if r["method"] == m] for m in methods]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.boxplot(data, labels=methods)
    ax.set_ylabel("SELECT sum() latency (ms)")
    ax.set_title("sum() over the table under a concurrent update stream")
    fig.tight_layout()
    fig.savefig(out / "sum_latency.png", dpi=120)
print(f"plots in {out}")
