#!/usr/bin/env python3
"""Turn the raw output of bench/htap.sh into CSV files, PNG plots and a Markdown summary.

usage: report.py OUT_DIR [--no-plots]

Reads OUT_DIR/meta.txt and, per configuration, OUT_DIR/<config>/:
  status                          ok | skipped: why | failed: why
  {oltp,mixed}.pgbench.txt        pgbench's final report (total and per-script tps, failures)
  {oltp,mixed}.agg.N              pgbench --aggregate-interval=1 logs (one per pgbench thread)
  {oltp,mixed}.rollbacks          NewOrder rollbacks (unused item id) counted in tpcc_rollbacks
  {olap,mixed}.olap.csv           one row per OLAP query execution (latency from pgbench's log)
  checks.csv                      consistency conditions after load / each phase
  anker_stats.jsonl               anker introspection (views / counter functions), if any
Writes OUT_DIR/oltp_tps.csv, olap_latency.csv, oltp_summary.csv, olap_summary.csv,
anker_stats.csv (when there is anything), summary.md, and unless --no-plots oltp_tps.png,
olap_latency.png and anker_snapshots.png (the last only when anker reports snapshots).
Only the standard library is needed without plots; plots need matplotlib.
"""
import csv
import glob
import json
import os
import re
import sys
from collections import defaultdict

PHASE_NAMES = {"oltp": "OLTP alone", "olap": "OLAP alone", "mixed": "OLTP + OLAP"}
SCRIPT_NAMES = {"neworder": "NewOrder", "payment": "Payment", "orderstatus": "OrderStatus",
                "delivery": "Delivery", "stocklevel": "StockLevel"}


def percentile(values, p):
    """Linear interpolation between closest ranks (numpy's default)."""
    v = sorted(values)
    if not v:
        return None
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def fmt(x, digits=1):
    if x is None:
        return "–"
    if isinstance(x, float):
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        return f"{x:.{digits}f}"
    return str(x)


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def read_meta(out):
    meta = {}
    for line in (read(os.path.join(out, "meta.txt"), "") or "").splitlines():
        if ": " in line:
            k, v = line.split(": ", 1)
            meta[k] = v
    return meta


def parse_pgbench(path):
    """pgbench's final report -> dict with totals and per-script figures."""
    text = read(path)
    if text is None:
        return None
    res = {"scripts": []}
    m = re.search(r"^tps = ([\d.]+)", text, re.M)
    res["tps"] = float(m.group(1)) if m else None
    m = re.search(r"^number of transactions actually processed: (\d+)", text, re.M)
    res["transactions"] = int(m.group(1)) if m else None
    m = re.search(r"^number of failed transactions: (\d+)", text, re.M)
    res["failed"] = int(m.group(1)) if m else 0
    m = re.search(r"^number of transactions retried: (\d+)", text, re.M)
    res["retried"] = int(m.group(1)) if m else 0
    m = re.search(r"^latency average = ([\d.]+) ms", text, re.M)
    res["latency_ms"] = float(m.group(1)) if m else None
    for block in re.split(r"^SQL script \d+: ", text, flags=re.M)[1:]:
        name = os.path.basename(block.splitlines()[0].strip()).replace(".pgbench", "")
        s = {"script": name}
        m = re.search(r"- (\d+) transactions \([\d.]+% of total, tps = ([\d.]+)\)", block)
        s["transactions"], s["tps"] = (int(m.group(1)), float(m.group(2))) if m else (None, None)
        m = re.search(r"- number of failed transactions: (\d+)", block)
        s["failed"] = int(m.group(1)) if m else 0
        m = re.search(r"- number of transactions retried: (\d+)", block)
        s["retried"] = int(m.group(1)) if m else 0
        m = re.search(r"- latency average = ([\d.]+) ms", block)
        s["latency_ms"] = float(m.group(1)) if m else None
        res["scripts"].append(s)
    return res


def parse_agg(cdir, phase):
    """Sum the per-thread aggregate logs by second -> [(t, tps)] relative to the first second."""
    per_sec = defaultdict(int)
    for f in glob.glob(os.path.join(cdir, f"{phase}.agg.*")):
        with open(f) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 2 and parts[0].isdigit():
                    per_sec[int(parts[0])] += int(parts[1])
    if not per_sec:
        return []
    t0 = min(per_sec)
    return [(t - t0, per_sec[t]) for t in sorted(per_sec)]


def read_olap(cdir, phase):
    rows = []
    path = os.path.join(cdir, f"{phase}.olap.csv")
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for r in csv.DictReader(f):
            r["latency_ms"] = float(r["latency_ms"])
            rows.append(r)
    return rows


def read_anker_stats(cdir):
    out = []
    path = os.path.join(cdir, "anker_stats.jsonl")
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def flatten_counters(rows):
    """A counter source's rows -> {name: number}. Accepts one row of numeric columns, or rows of
    (name, value) shape (any text column plus one numeric column)."""
    vals = {}
    if not isinstance(rows, list):
        return vals
    for row in rows:
        if not isinstance(row, dict):
            continue
        texts = [k for k, v in row.items() if isinstance(v, str)]
        nums = [k for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(rows) > 1 and texts and len(nums) == 1:
            vals[str(row[texts[0]])] = row[nums[0]]
        else:
            for k in nums:
                vals[k] = row[k]
    return vals


def snapshot_figures(stats):
    """-> per phase: {'created': n or None, 'create_us_total': x or None, 'live_max': n, 'seen': n}
    using names that mention snapshots and creation (see bench/README.md)."""
    by_phase = {}
    counters = defaultdict(dict)          # (tag) -> merged counters
    samples = defaultdict(list)           # phase -> list of snapshot-view rows lists
    for rec in stats:
        tag, src, rows = rec.get("tag", ""), rec.get("source", ""), rec.get("rows")
        if src == "snapshots":
            if tag.startswith("sample:"):
                samples[tag.split(":", 1)[1]].append(rows if isinstance(rows, list) else [])
            continue
        for k, v in flatten_counters(rows).items():
            counters[tag][f"{src}.{k}"] = v

    time_unit = r"(time|_us|_ns|_ms|usec|nsec|msec|micros|nanos|seconds)"

    def pick(names, *patterns, exclude=None):
        for n in names:
            low = n.split(".", 1)[-1].lower()  # without the source ("counters." would match "count")
            if all(re.search(p, low) for p in patterns) and not (exclude and re.search(exclude, low)):
                return n
        return None

    for phase in ("oltp", "olap", "mixed"):
        before, after = counters.get(f"before:{phase}", {}), counters.get(f"after:{phase}", {})
        names = sorted(set(before) & set(after))
        created = (pick(names, r"snapshot", r"(creat|taken|count|total)", exclude=time_unit)
                   or pick(names, r"snapshots?$"))
        timing = pick(names, r"creat", time_unit) or pick(names, r"snapshot", time_unit)
        fig = {"created": None, "create_time": None, "time_name": timing, "live_max": None, "seen": None}
        if created:
            fig["created"] = after[created] - before[created]
        if timing:
            fig["create_time"] = after[timing] - before[timing]
        if samples.get(phase):
            fig["live_max"] = max(len(s) for s in samples[phase])
            ids = set()
            for s in samples[phase]:
                for r in s:
                    if isinstance(r, dict):
                        ids.add(json.dumps(r.get("id", r.get("snapshot_id", json.dumps(r, sort_keys=True)))))
            fig["seen"] = len(ids)
        if any(v is not None for k, v in fig.items() if k != "time_name"):
            by_phase[phase] = fig
    return by_phase


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    plots = "--no-plots" not in sys.argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = args[0]
    meta = read_meta(out)
    configs = [c for c in (meta.get("configs") or "").split(",") if c]
    if not configs:
        configs = sorted(d for d in os.listdir(out) if os.path.isfile(os.path.join(out, d, "status")))

    status, oltp, tps_series, olap, rollbacks, checks, snaps, load_s = {}, {}, {}, {}, {}, {}, {}, {}
    for c in configs:
        cdir = os.path.join(out, c)
        status[c] = read(os.path.join(cdir, "status"), "not run")
        ms = read(os.path.join(cdir, "load_ms"))
        load_s[c] = int(ms) / 1000.0 if ms and ms.isdigit() else None
        for ph in ("oltp", "mixed"):
            oltp[(c, ph)] = parse_pgbench(os.path.join(cdir, f"{ph}.pgbench.txt"))
            tps_series[(c, ph)] = parse_agg(cdir, ph)
            rb = read(os.path.join(cdir, f"{ph}.rollbacks"))
            rollbacks[(c, ph)] = int(rb) if rb and rb.lstrip("-").isdigit() else None
        for ph in ("olap", "mixed"):
            olap[(c, ph)] = read_olap(cdir, ph)
        rows = []
        if os.path.exists(os.path.join(cdir, "checks.csv")):
            with open(os.path.join(cdir, "checks.csv")) as f:
                rows = list(csv.reader(f))
        checks[c] = rows
        st = read_anker_stats(cdir)
        figs = snapshot_figures(st) if st else {}
        if figs:
            snaps[c] = (st, figs)

    queries = []
    for (c, ph), rows in olap.items():
        for r in rows:
            if r["query"] not in queries:
                queries.append(r["query"])
    qorder = (meta.get("queries") or "").split(",")
    queries.sort(key=lambda q: qorder.index(q) if q in qorder else 99)

    # ---------------------------------------------------------------- CSV
    with open(os.path.join(out, "oltp_tps.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["config", "phase", "second", "tps"])
        for (c, ph), series in sorted(tps_series.items()):
            for t, n in series:
                w.writerow([c, ph, t, n])
    with open(os.path.join(out, "oltp_summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["config", "phase", "script", "transactions", "tps", "failed", "retried",
                    "latency_avg_ms", "neworder_rollbacks"])
        for (c, ph), r in sorted(oltp.items()):
            if not r:
                continue
            w.writerow([c, ph, "all", r["transactions"], r["tps"], r["failed"], r["retried"],
                        r["latency_ms"], rollbacks.get((c, ph))])
            for s in r["scripts"]:
                w.writerow([c, ph, s["script"], s["transactions"], s["tps"], s["failed"], s["retried"],
                            s["latency_ms"], ""])
    with open(os.path.join(out, "olap_latency.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["config", "phase", "query", "seq", "cycle", "start_ms", "latency_ms"])
        for (c, ph), rows in sorted(olap.items()):
            for r in rows:
                w.writerow([r["config"], r["phase"], r["query"], r["seq"], r["cycle"], r["start_ms"],
                            r["latency_ms"]])
    lat = {}   # (config, phase, query) -> (n, median, p95)
    for (c, ph), rows in olap.items():
        by_q = defaultdict(list)
        for r in rows:
            by_q[r["query"]].append(r["latency_ms"])
        for q, v in by_q.items():
            lat[(c, ph, q)] = (len(v), percentile(v, 50), percentile(v, 95))
    with open(os.path.join(out, "olap_summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["config", "phase", "query", "n", "median_ms", "p95_ms"])
        for (c, ph, q), (n, med, p95) in sorted(lat.items()):
            w.writerow([c, ph, q, n, f"{med:.3f}", f"{p95:.3f}"])
    if snaps:
        with open(os.path.join(out, "anker_stats.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["config", "phase", "snapshots_created", "creation_time_total", "creation_time_counter",
                        "live_snapshots_max", "snapshots_seen_in_samples"])
            for c, (_, figs) in sorted(snaps.items()):
                for ph, fig in figs.items():
                    w.writerow([c, ph, fig["created"], fig["create_time"], fig["time_name"], fig["live_max"],
                                fig["seen"]])

    # ---------------------------------------------------------------- summary.md
    ran = [c for c in configs if status[c] == "ok" or oltp.get((c, "oltp"))]
    base = "heap" if "heap" in ran else None
    md = []
    md.append("# HTAP benchmark summary\n")
    md.append(f"`{meta.get('command', 'bench/htap.sh')}`\n")
    md.append(f"W={meta.get('warehouses')} warehouses, {meta.get('clients')} OLTP clients + 1 OLAP stream, "
              f"{meta.get('duration_s')} s per phase (warm-up {meta.get('warmup_s')} s), mix {meta.get('mix')}, "
              f"{meta.get('host')}, {meta.get('postgres')}, {meta.get('date')}.\n")
    notes = read(os.path.join(out, "notes.txt"))
    if notes:
        md.append("Notes: " + " ".join(notes.splitlines()) + "\n")

    md.append("## Configurations\n")
    md.append("| config | status | load (s) | consistency checks |")
    md.append("|---|---|---|---|")
    for c in configs:
        rows = checks[c]
        nchk = len({r[1] for r in rows})
        viol = sum(int(r[3]) for r in rows if len(r) > 3 and r[3].isdigit())
        online = read(os.path.join(out, c, "online-check-violations.txt.count"))
        chk = f"{nchk} runs of conditions 1-6, {viol} violations" if rows else "–"
        if online:
            chk += f"; {online} runs during the mixed phase"
        st = " ".join(status[c].split()).replace("|", "/")
        if len(st) > 240:
            st = st[:240] + "… (see " + c + "/status)"
        cnotes = read(os.path.join(out, c, "notes.txt"))
        if cnotes:
            st += " — " + " ".join(cnotes.split()).replace("|", "/")
        md.append(f"| {c} | {st} | {fmt(load_s[c])} | {chk} |")
    md.append("")

    cpu_rows = []
    for c in configs:
        path = os.path.join(out, c, "cpu.csv")
        if os.path.exists(path):
            with open(path) as f:
                for r in csv.DictReader(f):
                    cpu_rows.append((c, r))
    if cpu_rows:
        md.append("## Machine load during the phases\n")
        md.append("CPU cores in use on average: by this benchmark (cluster + pgbench/psql) and by "
                  "everything else on the machine (other work skews all figures; these machines are shared).\n")
        md.append("| config | phase | s | this benchmark | other processes | load average (1 min, at end) |")
        md.append("|---|---|---|---|---|---|")
        for c, r in cpu_rows:
            md.append(f"| {c} | {PHASE_NAMES.get(r['phase'], r['phase'])} | {r['seconds']} | {r['own_cores']} | "
                      f"{r['other_cores']} | {r['loadavg_1min']} |")
        md.append("")

    md.append("## OLTP throughput (transactions/s, all five or three transaction types)\n")
    hdr = "| config | alone | with OLAP | with/alone |"
    sep = "|---|---|---|---|"
    if base:
        hdr += " alone vs heap | with OLAP vs heap |"
        sep += "---|---|"
    hdr += " NewOrder rollbacks (alone / with) | failed tx (alone / with) |"
    sep += "---|---|"
    md.append(hdr)
    md.append(sep)
    for c in ran:
        a, m = oltp.get((c, "oltp")), oltp.get((c, "mixed"))
        ta = a["tps"] if a else None
        tm = m["tps"] if m else None
        row = f"| {c} | {fmt(ta)} | {fmt(tm)} | {fmt(tm / ta if ta and tm else None, 2)} |"
        if base:
            ba, bm = oltp.get((base, "oltp")), oltp.get((base, "mixed"))
            bta = ba["tps"] if ba else None
            btm = bm["tps"] if bm else None
            row += f" {fmt(ta / bta if ta and bta else None, 2)} | {fmt(tm / btm if tm and btm else None, 2)} |"

        def rbtxt(ph):
            r, rb = oltp.get((c, ph)), rollbacks.get((c, ph))
            if not r or rb is None:
                return "–"
            no = next((s["transactions"] for s in r["scripts"] if s["script"] == "neworder"), None)
            return f"{rb} ({100.0 * rb / no:.2f}%)" if no else str(rb)
        row += f" {rbtxt('oltp')} / {rbtxt('mixed')} |"
        row += f" {a['failed'] if a else '–'} / {m['failed'] if m else '–'} |"
        md.append(row)
    md.append("")
    md.append("Per transaction type (tps, average latency in ms), alone → with OLAP:\n")
    scripts_present = [s for s in SCRIPT_NAMES
                       if any(x["script"] == s for c in ran for ph in ("oltp", "mixed")
                              for x in (oltp.get((c, ph)) or {"scripts": []})["scripts"])]
    md.append("| config | " + " | ".join(SCRIPT_NAMES[s] for s in scripts_present) + " |")
    md.append("|---|" + "---|" * len(scripts_present))
    for c in ran:
        cells = []
        for s in scripts_present:
            parts = []
            for ph in ("oltp", "mixed"):
                r = oltp.get((c, ph))
                x = next((x for x in r["scripts"] if x["script"] == s), None) if r else None
                parts.append(f"{fmt(x['tps'])} ({fmt(x['latency_ms'], 2)})" if x else "–")
            cells.append(" → ".join(parts))
        md.append(f"| {c} | " + " | ".join(cells) + " |")
    md.append("")

    md.append("## OLAP latency per query (ms): median / p95 (n)\n")
    md.append("Alone: the OLAP stream on an idle database. With OLTP: while the OLTP clients run.")
    if base:
        md.append("`vs heap` is heap's median divided by this configuration's (higher is better).")
    md.append("")
    hdr = "| query | config | alone | with OLTP | with/alone |"
    sep = "|---|---|---|---|---|"
    if base:
        hdr += " alone vs heap | with OLTP vs heap |"
        sep += "---|---|"
    md.append(hdr)
    md.append(sep)
    for q in queries:
        for c in ran:
            a, m = lat.get((c, "olap", q)), lat.get((c, "mixed", q))
            cell = lambda x: f"{fmt(x[1])} / {fmt(x[2])} ({x[0]})" if x else "–"
            row = f"| {q} | {c} | {cell(a)} | {cell(m)} | {fmt(m[1] / a[1] if a and m and a[1] else None, 2)} |"
            if base:
                ba, bm = lat.get((base, "olap", q)), lat.get((base, "mixed", q))
                row += (f" {fmt(ba[1] / a[1] if a and ba and a[1] else None, 2)} |"
                        f" {fmt(bm[1] / m[1] if m and bm and m[1] else None, 2)} |")
            md.append(row)
    md.append("")

    anker_ran = [c for c in ran if c.startswith("anker-")]
    if anker_ran:
        md.append("## anker snapshots\n")
        if snaps:
            md.append("| config | phase | snapshots created | creation time (counter delta) | live snapshots (max sampled) |")
            md.append("|---|---|---|---|---|")
            for c, (_, figs) in sorted(snaps.items()):
                for ph, fig in figs.items():
                    ct = f"{fmt(fig['create_time'])} ({fig['time_name']})" if fig["create_time"] is not None else "–"
                    md.append(f"| {c} | {PHASE_NAMES[ph]} | {fmt(fig['created'])} | {ct} | {fmt(fig['live_max'])} |")
        else:
            md.append("This build of the extension reports no snapshot counters or `anker.snapshots` "
                      "view (see bench/README.md, \"anker snapshot figures\"); no snapshot figures and no plot.")
        md.append("")

    plots_made = []
    if plots:
        try:
            plots_made = make_plots(out, ran, tps_series, lat, queries, snaps)
        except ImportError as e:
            md.append(f"(plots skipped: {e})\n")
    if plots_made:
        md.append("## Plots\n")
        for p in plots_made:
            md.append(f"![{p}]({p})")
        md.append("")

    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    return 0


def make_plots(out, ran, tps_series, lat, queries, snaps):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    colors = {c: plt.cm.tab10(i % 10) for i, c in enumerate(ran)}

    # OLTP tps over time
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    for ax, ph in zip(axes, ("oltp", "mixed")):
        for c in ran:
            s = tps_series.get((c, ph)) or []
            if s:
                ax.plot([t for t, _ in s], [n for _, n in s], label=c, color=colors[c], lw=1.2)
        ax.set_title(PHASE_NAMES[ph])
        ax.set_xlabel("second of the phase")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("OLTP transactions / s")
    axes[0].legend()
    fig.suptitle("OLTP throughput per second")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "oltp_tps.png"), dpi=110)
    plt.close(fig)
    made.append("oltp_tps.png")

    # OLAP latency per query, log scale: bar = median, whisker = p95
    if queries:
        fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.1 * len(queries) * max(1, len(ran)) / 2 + 4), 8),
                                 sharex=True, sharey=True)
        width = 0.8 / max(1, len(ran))
        for ax, ph in zip(axes, ("olap", "mixed")):
            for i, c in enumerate(ran):
                xs, meds, errs = [], [], []
                for j, q in enumerate(queries):
                    v = lat.get((c, ph, q))
                    if v:
                        xs.append(j + (i - (len(ran) - 1) / 2) * width)
                        meds.append(max(v[1], 1e-3))
                        errs.append(max(v[2] - v[1], 0))
                if xs:
                    ax.bar(xs, meds, width, label=c, color=colors[c],
                           yerr=[[0] * len(errs), errs], capsize=2, error_kw={"lw": 0.8})
            ax.set_yscale("log")
            ax.set_ylabel("latency (ms, log)")
            ax.set_title(f"{PHASE_NAMES[ph]}: median, whisker to p95")
            ax.grid(alpha=0.3, axis="y", which="both")
        axes[1].set_xticks(range(len(queries)))
        axes[1].set_xticklabels(queries)
        axes[0].legend(ncol=min(5, len(ran)))
        fig.tight_layout()
        fig.savefig(os.path.join(out, "olap_latency.png"), dpi=110)
        plt.close(fig)
        made.append("olap_latency.png")

    # anker snapshots: created per phase, and creation time when a counter reports it
    figs = {c: f for c, (_, f) in snaps.items() if f}
    stale = os.path.join(out, "anker_snapshots.png")
    if not figs and os.path.exists(stale):
        os.remove(stale)
    if figs:
        have_time = any(v.get("create_time") is not None for f in figs.values() for v in f.values())
        fig, axes = plt.subplots(1, 2 if have_time else 1, figsize=(12 if have_time else 7, 4), squeeze=False)
        axes = axes[0]
        phases = ["oltp", "olap", "mixed"]
        cs = sorted(figs)
        width = 0.8 / max(1, len(cs))
        for i, c in enumerate(cs):
            xs = [k + (i - (len(cs) - 1) / 2) * width for k in range(len(phases))]
            created = [(figs[c].get(ph) or {}).get("created") for ph in phases]
            live = [(figs[c].get(ph) or {}).get("live_max") for ph in phases]
            vals = [v if v is not None else (lv or 0) for v, lv in zip(created, live)]
            axes[0].bar(xs, vals, width, label=c)
            if have_time:
                per = []
                for ph in phases:
                    f = figs[c].get(ph) or {}
                    per.append(f["create_time"] / f["created"] if f.get("create_time") is not None and f.get("created")
                               else 0)
                axes[1].bar(xs, per, width, label=c)
        axes[0].set_xticks(range(len(phases)))
        axes[0].set_xticklabels([PHASE_NAMES[p] for p in phases])
        axes[0].set_ylabel("snapshots created (counter delta; else max live)")
        axes[0].legend()
        if have_time:
            axes[1].set_xticks(range(len(phases)))
            axes[1].set_xticklabels([PHASE_NAMES[p] for p in phases])
            tname = next((v["time_name"] for f in figs.values() for v in f.values() if v.get("time_name")), "")
            axes[1].set_ylabel(f"creation time per snapshot\n({tname.split('.', 1)[-1]} / snapshots)")
        fig.suptitle("anker snapshots")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "anker_snapshots.png"), dpi=110)
        plt.close(fig)
        made.append("anker_snapshots.png")
    return made


if __name__ == "__main__":
    sys.exit(main())
