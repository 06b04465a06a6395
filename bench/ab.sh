#!/usr/bin/env bash
# A-B-A-B comparison of two commits of Sluice on the issue benchmarks, in one run: the same load
# generator (built from the working tree) drives `sluice dev` built from REF_A, then from REF_B,
# alternating, ROUNDS times; each round starts each system fresh. Kafka is not involved: this is
# for "no regression" checks of a change (issue 23), not for ratios against a peer.
#
# Usage: bench/ab.sh REF_A REF_B [OUT_DIR]      (default bench/results/<UTC date>-ab)
#   WORKLOADS="p1 p2 c2 c3"   bench/workloads/<name>.yaml to run, in this order, per system start
#   ROUNDS=2                  A-B pairs
# Writes OUT/<a|b>-<workload>-r<round>/ (the load generator's results) and OUT/report.md
# (bench/ab_report.py): every run, and B/A ratios of the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
ref_a=${1:?usage: bench/ab.sh REF_A REF_B [OUT_DIR]}
ref_b=${2:?usage: bench/ab.sh REF_A REF_B [OUT_DIR]}
out=${3:-bench/results/$(date -u +%F)-ab}
workloads=${WORKLOADS:-p1 p2 c2 c3}
rounds=${ROUNDS:-2}
addr=127.0.0.1:17499
mkdir -p "$out" .cache

build() { # build REF BINARY: sluice at REF, from a temporary worktree
  local tmp; tmp=$(mktemp -d)
  git worktree add -q --detach "$tmp" "$1"
  (cd "$tmp" && go build -o "$OLDPWD/$2" ./cmd/sluice)
  git worktree remove --force "$tmp"
}
echo "bench/ab.sh: building A=$ref_a and B=$ref_b"
build "$ref_a" .cache/sluice-ab-a
build "$ref_b" .cache/sluice-ab-b
go build -o .cache/sluice-ab-loadgen ./cmd/sluice
{
  echo "A: $ref_a $(git rev-parse --short "$ref_a")"
  echo "B: $ref_b $(git rev-parse --short "$ref_b")"
  echo "load generator: working tree at $(git rev-parse --short HEAD)"
  echo "workloads: $workloads; rounds: $rounds; $(nproc) cores"
} > "$out/refs.txt"

dev=""
data=""
cleanup() {
  if [ -n "$dev" ]; then kill "$dev" 2>/dev/null || true; wait "$dev" 2>/dev/null || true; fi
  if [ -n "$data" ]; then rm -rf "$data"; fi
}
trap cleanup EXIT

run_system() { # run_system a|b ROUND
  data=$(mktemp -d)
  ".cache/sluice-ab-$1" dev --data-dir "$data" --addr "$addr" > ".cache/bench-ab-$1.log" 2>&1 &
  dev=$!
  for i in $(seq 100); do
    if curl -sf -X POST -H 'Content-Type: application/json' -d '{}' "http://$addr/grpc.health.v1.Health/Check" 2>/dev/null | grep -q '"status":"SERVING"'; then break; fi
    if [ "$i" = 100 ]; then echo "bench/ab.sh: sluice dev ($1) did not become ready; see .cache/bench-ab-$1.log" >&2; exit 1; fi
    sleep 0.2
  done
  for w in $workloads; do
    echo "$(date -u +%FT%TZ) $1 $w round $2: load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt"
    .cache/sluice-ab-loadgen bench --driver sluice --sluice-addr "$addr" --server-pids "sluice-dev=$dev" \
      --workload "bench/workloads/$w.yaml" --out "$out/$1-$w-r$2" --label "$1 $w r$2"
  done
  kill "$dev"; wait "$dev" || true
  dev=""
  rm -rf "$data"; data=""
}

for r in $(seq "$rounds"); do
  run_system a "$r"
  run_system b "$r"
done
python3 bench/ab_report.py "$out" > "$out/report.md"
echo "bench/ab.sh: results under $out (report.md)"
