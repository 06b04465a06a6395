#!/usr/bin/env python3
"""bench/txn_report.py OUT — the transaction benchmarks' table (issue 24).

Reads OUT/<system>-<workload>-r<rep>/results.json of a compare.sh run with SCENARIOS
"p1 t1 p1m t1m t2u t2" (any of them) and writes OUT/transactions.md: per system and workload every run and the median
(publish rate, publish latency p50/p99 — for T1 the commit latency of a transaction's messages —
and, for T2/T2U, the catch-up read rate), then the ratios the issue asks for: T1/P1 and
T2/T2U per system (medians), and Sluice/Kafka per workload.
"""
import glob
import json
import os
import statistics
import sys

out = sys.argv[1]
runs = {}
for path in sorted(glob.glob(os.path.join(out, "*-r*/results.json"))):
    name = os.path.basename(os.path.dirname(path))
    system, rest = name.split("-", 1) if not name.startswith("kafka-fsync") else ("kafka-fsync", name[len("kafka-fsync-"):])
    workload, rep = rest.rsplit("-r", 1)
    r = json.load(open(path))
    r = r[0] if isinstance(r, list) else r
    row = {
        "rep": rep,
        "rate": r["publish"]["msgPerSec"],
        "p50": r["publishLatency"]["p50Ms"],
        "p99": r["publishLatency"]["p99Ms"],
        "read": (r.get("catchUp") or {}).get("readMsgPerSec", 0),
        "ok": r.get("failed", 0) + r.get("unacked", 0) + r.get("notReceived", 0) == 0,
    }
    runs.setdefault((system, workload), []).append(row)


def med(rows, k):
    return statistics.median([x[k] for x in rows]) if rows else 0


lines = ["# Transactions benchmark (issue 24)", "",
         "Every run (compare.sh, one system at a time, A-B-A-B), then medians. Publish latency of T1 is",
         "the time from a message's send to its transaction's commit.", "",
         "| system | workload | rep | publish msg/s | publish p50 ms | publish p99 ms | catch-up read msg/s | clean |",
         "|---|---|---|---:|---:|---:|---:|---|"]
for (system, workload), rows in sorted(runs.items()):
    for x in rows:
        lines.append(f"| {system} | {workload} | {x['rep']} | {x['rate']:.0f} | {x['p50']:.1f} | {x['p99']:.1f} | {x['read']:.0f} | {'yes' if x['ok'] else 'NO'} |")
    lines.append(f"| {system} | {workload} | **median** | **{med(rows, 'rate'):.0f}** | **{med(rows, 'p50'):.1f}** | **{med(rows, 'p99'):.1f}** | **{med(rows, 'read'):.0f}** | |")
lines += ["", "## Ratios (medians)", "", "| ratio | value |", "|---|---:|"]
systems = sorted({s for s, _ in runs})


def ratio(a, b, k):
    x, y = med(runs.get(a, []), k), med(runs.get(b, []), k)
    return f"{x / y:.2f}" if y else "n/a"


for s in systems:
    lines.append(f"| {s}: T1 / P1 publish rate (bar ≥ 0.8) | {ratio((s, 't1'), (s, 'p1'), 'rate')} |")
    lines.append(f"| {s}: T1M / P1M publish rate, 16 producers (bar ≥ 0.8) | {ratio((s, 't1m'), (s, 'p1m'), 'rate')} |")
    lines.append(f"| {s}: T2 / T2U catch-up read rate (bar ≥ 0.9) | {ratio((s, 't2'), (s, 't2u'), 'read')} |")
if "sluice" in systems:
    for k in [x for x in systems if x != "sluice"]:
        for w, key in (("p1", "rate"), ("t1", "rate"), ("p1m", "rate"), ("t1m", "rate"), ("t2u", "read"), ("t2", "read")):
            lines.append(f"| Sluice / {k}: {w.upper()} {'publish rate' if key == 'rate' else 'catch-up read rate'} | {ratio(('sluice', w), (k, w), key)} |")
open(os.path.join(out, "transactions.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
