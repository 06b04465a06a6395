#!/usr/bin/env bash
# A-B-A-B of validation at produce (issue 25: "P1 with Avro validation on vs off, same run:
# >= 0.8x throughput; CPU per validated record reported"). ONE `sluice` binary, built from the
# working tree, serves as `sluice dev` and as the load generator; A runs the workload as it is,
# B with `--sluice-schema avro` (an Avro schema registered under <topic>-value, the topic
# created with schema.subject, every value a framed datum of the message size in total, so
# ingest validates each one). Each run gets a FRESH `sluice dev` (new data directory).
#
# Usage: bench/schema-ab.sh [OUT_DIR]      (default bench/results/<UTC date>-schema-ab)
#   WORKLOADS="p1"     bench/workloads/<name>.yaml to run, in this order, per system start
#   ROUNDS=3           A-B pairs
#   BENCH_ARGS="..."   extra `sluice bench` flags for every run (e.g. "--test-duration 5s")
#   PROFILE=1          after the rounds, one more B run of the first workload against a
#                      `sluice dev --pprof`, with a 20 s CPU profile of the server taken in its
#                      measured window: OUT/profile/ (not in the report's numbers)
#   PROFILE_AT=N       start that profile N s after the run starts (default: the workload's
#                      warm-up + 5 s; set it when BENCH_ARGS changes the warm-up)
# Writes OUT/<a|b>-<workload>-r<round>/ (the load generator's results), OUT/load.txt (the
# machine's load before each run), OUT/refs.txt and OUT/report.md (bench/schema_ab_report.py:
# every run, B/A of the medians, B/A per round, server CPU per validated record).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/results/$(date -u +%F)-schema-ab}
workloads=${WORKLOADS:-p1}
rounds=${ROUNDS:-3}
bench_args=${BENCH_ARGS:-}
addr=127.0.0.1:17499
bin=.cache/sluice-schema-ab
mkdir -p "$out" .cache

echo "bench/schema-ab.sh: building sluice from the working tree"
go build -o "$bin" ./cmd/sluice
dirty=""
if [ -n "$(git status --porcelain)" ]; then dirty=" (with uncommitted changes: below)"; fi
{
  echo "binary: sluice from the working tree at $(git rev-parse --short HEAD)$dirty, $(go version | cut -d' ' -f3)"
  echo "A: validation off (values: the load generator's payloads)"
  echo "B: validation on (--sluice-schema avro: topic schema.subject=<topic>-value, values framed Avro datums)"
  echo "workloads: $workloads; rounds: $rounds; extra bench flags: ${bench_args:-none}"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  # What the working tree held beyond HEAD (others may be editing it): which files, and a hash
  # of the tracked changes.
  if [ -n "$dirty" ]; then
    git status --porcelain | sed 's/^/  /'
    echo "  tracked changes: sha256 $(git diff HEAD | sha256sum | cut -c1-16)"
  fi
} > "$out/refs.txt"

dev=""
data=""
cleanup() {
  if [ -n "$dev" ]; then kill "$dev" 2>/dev/null || true; wait "$dev" 2>/dev/null || true; fi
  if [ -n "$data" ]; then rm -rf "$data"; fi
}
trap cleanup EXIT

start_dev() { # start_dev LOG [dev flags...]: a fresh sluice dev, waited for until it serves
  local log=$1; shift
  data=$(mktemp -d)
  "$bin" dev --data-dir "$data" --addr "$addr" "$@" > "$log" 2>&1 &
  dev=$!
  for i in $(seq 100); do
    if curl -sf -X POST -H 'Content-Type: application/json' -d '{}' "http://$addr/grpc.health.v1.Health/Check" 2>/dev/null | grep -q '"status":"SERVING"'; then return; fi
    if [ "$i" = 100 ]; then echo "bench/schema-ab.sh: sluice dev did not become ready; see $log" >&2; exit 1; fi
    sleep 0.2
  done
}

stop_dev() {
  kill "$dev"; wait "$dev" || true
  dev=""
  rm -rf "$data"; data=""
}

side_flags() { # side_flags a|b: the bench flags of a side
  if [ "$1" = b ]; then echo "--sluice-schema avro"; fi
}

run_side() { # run_side a|b ROUND
  start_dev ".cache/bench-schema-ab-$1.log"
  for w in $workloads; do
    echo "$(date -u +%FT%TZ) $1 $w round $2: load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt"
    # shellcheck disable=SC2046,SC2086  # word splitting of the flags is wanted
    "$bin" bench --driver sluice --sluice-addr "$addr" --server-pids "sluice-dev=$dev" $(side_flags "$1") $bench_args \
      --workload "bench/workloads/$w.yaml" --out "$out/$1-$w-r$2" --label "$1 $w r$2"
  done
  stop_dev
}

for r in $(seq "$rounds"); do
  run_side a "$r"
  run_side b "$r"
done

if [ -n "${PROFILE:-}" ]; then
  w=${workloads%% *}
  warmup=$(awk '/^warmupDuration:/ {print $2}' "bench/workloads/$w.yaml" | sed 's/s$//')
  at=${PROFILE_AT:-$(( ${warmup:-40} + 5 ))}
  mkdir -p "$out/profile"
  start_dev ".cache/bench-schema-ab-profile.log" --pprof
  echo "$(date -u +%FT%TZ) profile b $w: load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt"
  # By default the profile starts 5 s into the measured window (topic setup takes a few seconds
  # more), and it takes 20 s: within P1's 30 s window.
  (sleep "$at"; curl -sf -o "$out/profile/server-cpu.pprof" "http://$addr/debug/pprof/profile?seconds=20") &
  prof=$!
  # shellcheck disable=SC2086
  "$bin" bench --driver sluice --sluice-addr "$addr" --server-pids "sluice-dev=$dev" --sluice-schema avro $bench_args \
    --workload "bench/workloads/$w.yaml" --out "$out/profile/b-$w" --label "profile b $w"
  wait "$prof" || echo "bench/schema-ab.sh: the CPU profile was not taken" >&2
  stop_dev
fi

python3 bench/schema_ab_report.py "$out" > "$out/report.md"
echo "bench/schema-ab.sh: results under $out (report.md)"
