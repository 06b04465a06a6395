#!/usr/bin/env python3
"""bench/span_report.py — where a transactional commit spends its time, from spans.

Reads the JSON spans OpenTelemetry's console exporter writes into the servers' logs and prints
the duration percentiles of the produce, transaction and ledger spans, then the slowest EndTxn
requests broken into the coordinator's `txn.store` and `txn.markers`. How it was used
(issue 24, docs/open-work.md "Transactions"): run a scenario with the exporter on for every
server process (clusterctl passes its environment on), e.g.

    OTEL_TRACES_EXPORTER=console SYSTEMS=sluice SCENARIOS=t1m REPS=1 \
      BENCH_ARGS="--rate 12000 --warmup-duration 15s --test-duration 30s" bash bench/compare.sh /tmp/t
    python3 bench/span_report.py .cache/bench-compare-logs/{ingest,bookie}-*.log

The exporter costs the servers much CPU at these rates (60 MB of JSON a minute): durations are
for comparing one span with another, not for quoting.
"""
import json, sys, re, collections, datetime
def ts(s):
    # 2026-12-07T12:00:00.123456789Z or with offset
    m = re.match(r'(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)', s)
    base = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc).timestamp()
    frac = float('0.' + (m.group(2) or '0'))
    return base + frac
spans = []
dec = json.JSONDecoder()
for f in sys.argv[1:]:
    txt = open(f, errors='replace').read()
    i = 0
    while True:
        j = txt.find('{"Name"', i)
        if j < 0: break
        try:
            o, end = dec.raw_decode(txt, j)
        except Exception:
            i = j + 1; continue
        i = end
        try:
            spans.append(dict(name=o['Name'], sid=o['SpanContext']['SpanID'], tid=o['SpanContext']['TraceID'],
                              parent=o['Parent']['SpanID'], start=ts(o['StartTime']), end=ts(o['EndTime']), file=f))
        except Exception as e:
            pass
print('spans', len(spans), collections.Counter(s['name'] for s in spans).most_common(12))
by_parent = collections.defaultdict(list)
for s in spans: by_parent[s['parent']].append(s)
def q(v, p):
    v = sorted(v); return v[min(len(v)-1, int(p*len(v)))] if v else None
for name in ['sluice.v1.ProducerService/EndTxn', 'sluice.v1.ProducerService/ProduceStream', 'sluice.v1.ProducerService/AddPartitionsToTxn', 'txn.store', 'txn.markers', 'ledger.add', 'bookie.journal.commit']:
    d = [ (s['end']-s['start'])*1000 for s in spans if s['name']==name]
    if d: print(f'{name:45} n={len(d):6} p50={q(d,.5):7.1f} p90={q(d,.9):7.1f} p99={q(d,.99):7.1f} max={max(d):7.1f} ms')
# slow EndTxn breakdown
ends = [s for s in spans if s['name']=='sluice.v1.ProducerService/EndTxn']
ends.sort(key=lambda s: s['end']-s['start'], reverse=True)
print('slowest EndTxn:')
for s in ends[:15]:
    kids = sorted(by_parent[s['sid']], key=lambda k: k['start'])
    parts = []
    for k in kids:
        sub = by_parent[k['sid']]
        subd = ','.join(f"{c['name']}:{(c['end']-c['start'])*1000:.0f}" for c in sub[:3])
        parts.append(f"{k['name']}@+{(k['start']-s['start'])*1000:.0f} {((k['end']-k['start'])*1000):.0f}ms[{subd}]")
    print(f"  {(s['end']-s['start'])*1000:6.0f} ms: " + '; '.join(parts))
