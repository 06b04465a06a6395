"""Summarizes a bench/schema-ab.sh output directory: A = validation off, B = validation on.

Every run (the rate the search settled on, throughput, publish latency, server and load
generator CPU per record), B/A of the medians, B/A of each round's pair, and the server CPU a
validated record costs (B minus A). The runs are read by bench/ab_report.py's load (the same
directory names and per-run summary as bench/ab.sh's).

Usage: python3 bench/schema_ab_report.py OUT_DIR   (prints markdown)
"""

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ab_report import fmt, load  # noqa: E402

BAR = 0.8  # issue 25: throughput with validation on >= 0.8x off, same run

COLUMNS = [
    ("target msg/s", "targetRate", "{:.0f}"),
    ("published msg/s", "msgPerSec", "{:.0f}"),
    ("MiB/s", "mibPerSec", "{:.1f}"),
    ("publish p50 ms", "publishP50Ms", "{:.2f}"),
    ("publish p99 ms", "publishP99Ms", "{:.2f}"),
    ("publish p99.9 ms", "publishP999Ms", "{:.2f}"),
    ("server CPU µs/record", "cpuUsPerRecord", "{:.1f}"),
    ("load gen. CPU µs/record", "lgUsPerRecord", "{:.1f}"),
]


def add_load_generator_cpu(out, runs):
    """Adds the load generator's CPU per record, which ab_report's summary leaves out."""
    for r in runs:
        p = os.path.join(out, f"{r['side']}-{r['workload']}-r{r['round']}", "results.json")
        res = json.load(open(p))
        res = res[0] if isinstance(res, list) else res
        cpg = (res.get("cost") or {}).get("loadGeneratorCpuSecondsPerGiB")
        size = (res.get("workload") or {}).get("messageSize", 1024)
        r["lgUsPerRecord"] = cpg * size / 2**30 * 1e6 if cpg else None
        r["notes"] = res.get("notes") or []
        r["fixedRate"] = bool((res.get("workload") or {}).get("producerRate"))


def med(runs, side, key):
    vals = [r[key] for r in runs if r["side"] == side and r.get(key) is not None]
    return statistics.median(vals) if vals else None


def main(out):
    runs = [r for r in load(out) if r["side"] in ("a", "b")]
    add_load_generator_cpu(out, runs)
    print(f"# Validation at produce, off (A) and on (B): {out}\n")
    refs = os.path.join(out, "refs.txt")
    if os.path.exists(refs):
        print("```\n" + open(refs).read().strip() + "\n```\n")
    for w in sorted({r["workload"] for r in runs}, key=lambda w: [x["workload"] for x in runs].index(w)):
        ws = sorted([r for r in runs if r["workload"] == w], key=lambda r: (int(r["round"]), r["side"]))
        print(f"## {w}\n")
        print("| run | " + " | ".join(c[0] for c in COLUMNS) + " | sustained |")
        print("|---|" + "---:|" * len(COLUMNS) + "---|")
        for r in ws:
            print(f"| {r['side'].upper()} r{r['round']} | " + " | ".join(fmt(r.get(c[1]), c[2]) for c in COLUMNS)
                  + f" | {'yes' if r.get('sustained') else 'no'} |")
        for side in ("a", "b"):
            print(f"| median {side.upper()} | " + " | ".join(fmt(med(ws, side, c[1]), c[2]) for c in COLUMNS) + " | |")
        row = []
        for c in COLUMNS:
            a, b = med(ws, "a", c[1]), med(ws, "b", c[1])
            row.append("–" if not a or b is None else f"{b / a:.2f}")
        print("| **B/A of medians** | " + " | ".join(row) + " | |\n")

        # Each round's pair: B/A throughput, B−A server CPU per record.
        pairs = []
        for rnd in sorted({r["round"] for r in ws}, key=int):
            a = next((r for r in ws if r["round"] == rnd and r["side"] == "a"), None)
            b = next((r for r in ws if r["round"] == rnd and r["side"] == "b"), None)
            if a and b and a.get("msgPerSec"):
                cpu = None
                if a.get("cpuUsPerRecord") is not None and b.get("cpuUsPerRecord") is not None:
                    cpu = b["cpuUsPerRecord"] - a["cpuUsPerRecord"]
                pairs.append((rnd, b["msgPerSec"] / a["msgPerSec"], cpu))
        if pairs:
            print("| round | B/A msg/s | B−A server CPU µs/record |")
            print("|---|---:|---:|")
            for rnd, ratio, cpu in pairs:
                print(f"| r{rnd} | {ratio:.2f} | {fmt(cpu, '{:+.1f}')} |")
            ratios = [p[1] for p in pairs]
            print(f"\nB/A throughput per round: {', '.join(f'{x:.2f}' for x in ratios)}; "
                  f"median {statistics.median(ratios):.2f}, range {min(ratios):.2f}–{max(ratios):.2f}.")
        a_cpu, b_cpu = med(ws, "a", "cpuUsPerRecord"), med(ws, "b", "cpuUsPerRecord")
        if a_cpu is not None and b_cpu is not None:
            print(f"Server CPU per record, medians: A {a_cpu:.1f} µs, B {b_cpu:.1f} µs; "
                  f"a validated record costs {b_cpu - a_cpu:+.1f} µs of server CPU ({(b_cpu / a_cpu - 1) * 100:+.0f} %).")
        a_t, b_t = med(ws, "a", "msgPerSec"), med(ws, "b", "msgPerSec")
        if any(r["fixedRate"] for r in ws):
            print(f"Issue 25's bar (B/A >= {BAR} of the maximum throughput) does not apply: these runs offered a fixed "
                  "rate (the target), not the maximum a rate search finds; compare CPU per record here.")
        elif a_t and b_t is not None:
            verdict = "met" if b_t / a_t >= BAR else "NOT met"
            print(f"Issue 25's bar, B/A of the median throughput >= {BAR}: {b_t / a_t:.2f}, {verdict}.")
        notes = [(r, n) for r in ws for n in r["notes"]]
        if notes:
            print("\nThe load generator's notes:\n")
            for r, n in notes:
                print(f"- {r['side'].upper()} r{r['round']}: {n}")
        print()
    lt = os.path.join(out, "load.txt")
    if os.path.exists(lt):
        print("## Machine load before each run\n\n```\n" + open(lt).read().strip() + "\n```")


if __name__ == "__main__":
    main(sys.argv[1])
