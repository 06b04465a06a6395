"""Summarizes a bench/ab.sh output directory: every run, and B/A ratios of the medians.

Usage: python3 bench/ab_report.py OUT_DIR   (prints markdown)
"""

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))
from report import summary  # noqa: E402  (the same per-run summary as bench/report.py)

COLUMNS = [
    ("published msg/s", "msgPerSec", "{:.0f}"),
    ("publish p50 ms", "publishP50Ms", "{:.2f}"),
    ("publish p99 ms", "publishP99Ms", "{:.2f}"),
    ("publish p99.9 ms", "publishP999Ms", "{:.2f}"),
    ("e2e p50 ms", "e2eP50Ms", "{:.2f}"),
    ("e2e p99 ms", "e2eP99Ms", "{:.2f}"),
    ("catch-up read msg/s", "catchUpReadMsgPerSec", "{:.0f}"),
    ("server CPU µs/record", "cpuUsPerRecord", "{:.1f}"),
]


def load(out):
    runs = []
    for name in sorted(os.listdir(out)):
        p = os.path.join(out, name, "results.json")
        if not os.path.exists(p):
            continue
        side, _, rest = name.partition("-")
        workload, _, rnd = rest.rpartition("-r")
        r = json.load(open(p))
        r = r[0] if isinstance(r, list) else r
        s = summary(r)
        size = r.get("workload", {}).get("messageSize", 1024) if isinstance(r.get("workload"), dict) else 1024
        cpg = s.get("serverCpuSecondsPerGiB")
        s["cpuUsPerRecord"] = cpg * size / 2**30 * 1e6 if cpg else None
        runs.append({"side": side, "workload": workload, "round": rnd, **s})
    return runs


def fmt(v, f):
    return "–" if v is None else f.format(v)


def main(out):
    runs = load(out)
    print(f"# A-B comparison: {out}\n")
    refs = os.path.join(out, "refs.txt")
    if os.path.exists(refs):
        print("```\n" + open(refs).read().strip() + "\n```\n")
    for w in sorted({r["workload"] for r in runs}, key=lambda w: [x["workload"] for x in runs].index(w)):
        cols = [c for c in COLUMNS if any(r.get(c[1]) is not None for r in runs if r["workload"] == w)]
        print(f"## {w}\n")
        print("| run | " + " | ".join(c[0] for c in cols) + " |")
        print("|---|" + "---:|" * len(cols))
        ws = sorted([r for r in runs if r["workload"] == w], key=lambda r: (r["round"], r["side"]))
        for r in ws:
            print(f"| {r['side'].upper()} r{r['round']} | " + " | ".join(fmt(r.get(c[1]), c[2]) for c in cols) + " |")
        row = []
        for c in cols:
            med = {}
            for side in ("a", "b"):
                vals = [r[c[1]] for r in ws if r["side"] == side and r.get(c[1]) is not None]
                med[side] = statistics.median(vals) if vals else None
            row.append("–" if not med["a"] or med["b"] is None else f"{med['b'] / med['a']:.2f}")
        print("| **B/A of medians** | " + " | ".join(row) + " |\n")


if __name__ == "__main__":
    main(sys.argv[1])
