"""Summarizes a bench/security-ab.sh output directory: A = cleartext, no authentication;
B = TLS, bearer tokens (--auth required) and ACLs (--authorization acl).

Every run, B/A of the medians, B/A of each round's pair, server and load generator CPU per
record, and issue 26's bars: a rate-searched workload (P1) B/A throughput >= 0.85; a workload
with consumers (C2) B/A end-to-end p99 <= 1.2 (and its throughput, a fixed rate, >= 0.85).
The runs are read by bench/ab_report.py's load (the same directory names and per-run summary
as bench/ab.sh's).

Usage: python3 bench/security_ab_report.py OUT_DIR   (prints markdown)
"""

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ab_report import fmt, load  # noqa: E402

THROUGHPUT_BAR = 0.85  # issue 26: throughput with TLS + auth >= 0.85x without, same run
P99_BAR = 1.2  # issue 26: end-to-end p99 with TLS + auth <= 1.2x without, same run

COLUMNS = [
    ("target msg/s", "targetRate", "{:.0f}"),
    ("published msg/s", "msgPerSec", "{:.0f}"),
    ("MiB/s", "mibPerSec", "{:.1f}"),
    ("publish p50 ms", "publishP50Ms", "{:.2f}"),
    ("publish p99 ms", "publishP99Ms", "{:.2f}"),
    ("e2e p50 ms", "e2eP50Ms", "{:.2f}"),
    ("e2e p99 ms", "e2eP99Ms", "{:.2f}"),
    ("e2e p99.9 ms", "e2eP999Ms", "{:.2f}"),
    ("server CPU µs/record", "cpuUsPerRecord", "{:.1f}"),
    ("load gen. CPU µs/record", "lgUsPerRecord", "{:.1f}"),
]


def add_details(out, runs):
    """Adds the load generator's CPU per record (ab_report's summary leaves it out), the notes,
    and whether the workload had a fixed rate."""
    for r in runs:
        p = os.path.join(out, f"{r['side']}-{r['workload']}-r{r['round']}", "results.json")
        res = json.load(open(p))
        res = res[0] if isinstance(res, list) else res
        cpg = (res.get("cost") or {}).get("loadGeneratorCpuSecondsPerGiB")
        size = (res.get("workload") or {}).get("messageSize", 1024)
        r["lgUsPerRecord"] = cpg * size / 2**30 * 1e6 if cpg else None
        r["notes"] = res.get("notes") or []
        r["fixedRate"] = bool((res.get("workload") or {}).get("producerRate"))
        r["lost"] = (res.get("failed") or 0) + (res.get("notReceived") or 0) + (res.get("unacked") or 0)


def med(runs, side, key):
    vals = [r[key] for r in runs if r["side"] == side and r.get(key) is not None]
    return statistics.median(vals) if vals else None


def ratio(b, a):
    return None if a is None or b is None or not a else b / a


def order(out, runs):
    """The workloads in the order they ran (load.txt: "TIME SIDE WORKLOAD round N: ..."), else by name."""
    names = sorted({r["workload"] for r in runs})
    lt = os.path.join(out, "load.txt")
    if os.path.exists(lt):
        seen = []
        for line in open(lt):
            f = line.split()
            if len(f) > 2 and f[2] in names and f[2] not in seen:
                seen.append(f[2])
        names = seen + [w for w in names if w not in seen]
    return names


def main(out):
    runs = [r for r in load(out) if r["side"] in ("a", "b")]
    add_details(out, runs)
    print(f"# TLS and authentication, off (A) and on (B): {out}\n")
    refs = os.path.join(out, "refs.txt")
    if os.path.exists(refs):
        print("```\n" + open(refs).read().strip() + "\n```\n")
    print("Latencies in ms from each message's intended send time (no coordinated omission); publish = until "
          "acknowledged (after fsync on the ack quorum), e2e = until delivered to the consumer group. CPU per "
          "record: the `sluice dev` process's (server) and the load generator's, both on the same machine.\n")
    verdicts = []
    for w in order(out, runs):
        ws = sorted([r for r in runs if r["workload"] == w], key=lambda r: (int(r["round"]), r["side"]))
        has_e2e = any(r.get("e2eP99Ms") is not None for r in ws)
        cols = [c for c in COLUMNS if has_e2e or not c[1].startswith("e2e")]
        print(f"## {w}\n")
        print("| run | " + " | ".join(c[0] for c in cols) + " | sustained | lost |")
        print("|---|" + "---:|" * len(cols) + "---|---:|")
        for r in ws:
            print(f"| {r['side'].upper()} r{r['round']} | " + " | ".join(fmt(r.get(c[1]), c[2]) for c in cols)
                  + f" | {'yes' if r.get('sustained') else 'no'} | {r['lost']} |")
        for side in ("a", "b"):
            print(f"| median {side.upper()} | " + " | ".join(fmt(med(ws, side, c[1]), c[2]) for c in cols) + " | | |")
        row = [fmt(ratio(med(ws, "b", c[1]), med(ws, "a", c[1])), "{:.2f}") for c in cols]
        print("| **B/A of medians** | " + " | ".join(row) + " | | |\n")

        # Each round's pair.
        keys = [("msgPerSec", "B/A msg/s")]
        if has_e2e:
            keys += [("e2eP50Ms", "B/A e2e p50"), ("e2eP99Ms", "B/A e2e p99"), ("e2eP999Ms", "B/A e2e p99.9")]
        else:
            keys += [("publishP50Ms", "B/A publish p50"), ("publishP99Ms", "B/A publish p99")]
        pairs = []
        for rnd in sorted({r["round"] for r in ws}, key=int):
            a = next((r for r in ws if r["round"] == rnd and r["side"] == "a"), None)
            b = next((r for r in ws if r["round"] == rnd and r["side"] == "b"), None)
            if a and b:
                cpu = None
                if a.get("cpuUsPerRecord") is not None and b.get("cpuUsPerRecord") is not None:
                    cpu = b["cpuUsPerRecord"] - a["cpuUsPerRecord"]
                lg = None
                if a.get("lgUsPerRecord") is not None and b.get("lgUsPerRecord") is not None:
                    lg = b["lgUsPerRecord"] - a["lgUsPerRecord"]
                pairs.append((rnd, [ratio(b.get(k), a.get(k)) for k, _ in keys], cpu, lg))
        if pairs:
            print("| round | " + " | ".join(h for _, h in keys) + " | B−A server CPU µs/record | B−A load gen. CPU µs/record |")
            print("|---|" + "---:|" * (len(keys) + 2))
            for rnd, rs, cpu, lg in pairs:
                print(f"| r{rnd} | " + " | ".join(fmt(x, "{:.2f}") for x in rs) + f" | {fmt(cpu, '{:+.1f}')} | {fmt(lg, '{:+.1f}')} |")
            print()
            for i, (k, h) in enumerate(keys):
                xs = [p[1][i] for p in pairs if p[1][i] is not None]
                if xs:
                    print(f"- {h} per round: {', '.join(f'{x:.2f}' for x in xs)} (range {min(xs):.2f}–{max(xs):.2f}); "
                          f"of the medians {fmt(ratio(med(ws, 'b', k), med(ws, 'a', k)), '{:.2f}')}.")
        for key, what in (("cpuUsPerRecord", "server"), ("lgUsPerRecord", "load generator")):
            a_c, b_c = med(ws, "a", key), med(ws, "b", key)
            if a_c is not None and b_c is not None:
                print(f"- {what.capitalize()} CPU per record, medians: A {a_c:.1f} µs, B {b_c:.1f} µs "
                      f"({b_c - a_c:+.1f} µs, {(b_c / a_c - 1) * 100:+.0f} %).")

        # Issue 26's bars, on the medians.
        t = ratio(med(ws, "b", "msgPerSec"), med(ws, "a", "msgPerSec"))
        fixed = any(r["fixedRate"] for r in ws)
        if t is not None:
            what = "throughput (a fixed offered rate: held or not)" if fixed else "throughput (the rate search's maximum)"
            ok = t >= THROUGHPUT_BAR
            verdicts.append(f"{w}: B/A {what} of the medians {t:.2f} (bar >= {THROUGHPUT_BAR}): {'met' if ok else 'NOT met'}")
        if has_e2e:
            p = ratio(med(ws, "b", "e2eP99Ms"), med(ws, "a", "e2eP99Ms"))
            if p is not None:
                verdicts.append(f"{w}: B/A e2e p99 of the medians {p:.2f} (bar <= {P99_BAR}): {'met' if p <= P99_BAR else 'NOT met'}")
        notes = [(r, n) for r in ws for n in r["notes"]]
        if notes:
            print("\nThe load generator's notes:\n")
            for r, n in notes:
                print(f"- {r['side'].upper()} r{r['round']}: {n}")
        print()
    if verdicts:
        print("## Issue 26's bars\n")
        for v in verdicts:
            print(f"- {v}")
        print()
    lt = os.path.join(out, "load.txt")
    if os.path.exists(lt):
        print("## Machine load before each run\n\n```\n" + open(lt).read().strip() + "\n```")


if __name__ == "__main__":
    main(sys.argv[1])
