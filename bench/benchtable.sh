#!/usr/bin/env bash
# benchtable.sh [FILE...] — turn `go test -bench` output into a markdown table.
#
# One row per benchmark line (so -count N gives N rows per case): the benchmark name without
# its "Benchmark" / "BenchmarkIntegration<Backend>" prefix and GOMAXPROCS suffix, split at the
# first "/" into benchmark and case; the iteration count; then one column per reported unit,
# the usual ones first (ops/s, p50-ms, p99-ms, partitions/s), the rest in order of first
# appearance; "ns/op" is dropped when it is 0 (benchmarks that suppress it). The configuration
# lines ("key: value" — goos, cpu, pkg, and whatever the runner added) go above the table, each
# once. Reads the files, or stdin.
set -euo pipefail

awk '
function addunit(u) { if (!(u in seen)) { seen[u] = 1; units[++nunits] = u } }
BEGIN {
  split("ops/s p50-ms p99-ms partitions/s", first, " ")
  for (i = 1; i <= 4; i++) preferred[first[i]] = i
}
/^[a-z][A-Za-z0-9_.-]*: / { if (!($0 in hdr)) { hdr[$0] = 1; header[++nheader] = $0 }; next }
/^Benchmark/ && NF >= 4 {
  name = $1
  sub(/-[0-9]+$/, "", name)                                  # GOMAXPROCS suffix
  sub(/^Benchmark(Integration(Cassandra|DynamoDB|Embedded)?)?/, "", name)
  slash = index(name, "/")
  bench[++nrows] = slash ? substr(name, 1, slash - 1) : name
  kase[nrows] = slash ? substr(name, slash + 1) : "-"
  iters[nrows] = $2
  for (i = 3; i + 1 <= NF; i += 2) {
    v = $i; u = $(i + 1)
    if (u == "ns/op" && v + 0 == 0) continue
    val[nrows, u] = v
    addunit(u)
  }
}
END {
  if (nrows == 0) { print "benchtable: no benchmark lines in the input" > "/dev/stderr"; exit 1 }
  # Column order: preferred units in their order, then the others as seen.
  n = 0
  for (p = 1; p <= 4; p++) if (first[p] in seen) col[++n] = first[p]
  for (i = 1; i <= nunits; i++) if (!(units[i] in preferred)) col[++n] = units[i]
  for (i = 1; i <= nheader; i++) printf "`%s`  \n", header[i]
  if (nheader) print ""
  line = "| benchmark | case | calls measured |"; sep = "|---|---|---:|"
  for (c = 1; c <= n; c++) { line = line " " col[c] " |"; sep = sep "---:|" }
  print line; print sep
  for (r = 1; r <= nrows; r++) {
    line = "| " bench[r] " | " kase[r] " | " iters[r] " |"
    for (c = 1; c <= n; c++) line = line " " (((r, col[c]) in val) ? val[r, col[c]] : "") " |"
    print line
  }
}
' "$@"
