#!/usr/bin/env bash
# Consume path (issue 5): C1 and C2 (end-to-end latency at a fixed 1,000 and 10,000 records/s of
# 1 KiB on 16 partitions, one consumer group) and C3 (catch-up: a 30 s backlog drained while
# production goes on). sluice dev (ingest, fetch and 3 bookies in one process, E3/Qw3/Qa2, fsync
# before ack) first, then 3 Kafka brokers (acks=all, RF 3, min.insync.replicas 2): one after the
# other, never together. The load average goes into load.txt before every run.
#
# Usage: bench/consume.sh [OUT_DIR]      (default bench/results/<UTC date>-consume)
#   WORKLOADS="c1 c2 c3"   which workloads (bench/workloads/<name>.yaml) to run
#   SYSTEMS="sluice kafka" which systems to run
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/results/$(date -u +%F)-consume}
workloads=${WORKLOADS:-c1 c2 c3}
systems=${SYSTEMS:-sluice kafka}
addr=127.0.0.1:17499
mkdir -p "$out"
go build -o .cache/sluice-bench ./cmd/sluice

load() { echo "$(date -u +%FT%TZ) before $1: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min), $(nproc) cores" | tee -a "$out/load.txt"; }

dev=""
data=""
kafka_started=0
cleanup() {
  if [ -n "$dev" ]; then kill "$dev" 2>/dev/null || true; wait "$dev" 2>/dev/null || true; fi
  if [ -n "$data" ]; then rm -rf "$data"; fi
  if [ "$kafka_started" = 1 ]; then bash localstack/kafka.sh down || true; fi
}
trap cleanup EXIT

if [[ " $systems " == *" sluice "* ]]; then
  data=$(mktemp -d)
  devlog=.cache/bench-consume-sluice-dev.log  # not with the results: hundreds of lines of INFO
  .cache/sluice-bench dev --data-dir "$data" --addr "$addr" > "$devlog" 2>&1 &
  dev=$!
  # Ready when the health check answers SERVING (Connect protocol, JSON).
  for i in $(seq 100); do
    if curl -sf -X POST -H 'Content-Type: application/json' -d '{}' "http://$addr/grpc.health.v1.Health/Check" 2>/dev/null | grep -q '"status":"SERVING"'; then break; fi
    if [ "$i" = 100 ]; then echo "bench/consume.sh: sluice dev did not become ready; see $devlog" >&2; exit 1; fi
    sleep 0.2
  done
  for w in $workloads; do
    load "sluice $w"
    .cache/sluice-bench bench --driver sluice --sluice-addr "$addr" --server-pids "sluice-dev=$dev" \
      --workload "bench/workloads/$w.yaml" --out "$out/sluice-$w" --label "sluice $w"
  done
  kill "$dev"; wait "$dev" || true
  dev=""
  rm -rf "$data"; data=""
fi

if [[ " $systems " == *" kafka "* ]]; then
  if ! bash localstack/kafka.sh status >/dev/null 2>&1; then kafka_started=1; fi
  bash localstack/kafka.sh up
  for w in $workloads; do
    load "kafka $w"
    .cache/sluice-bench bench --driver kafka --brokers "$(bash localstack/kafka.sh brokers)" \
      --server-pids "$(bash localstack/kafka.sh pids)" \
      --workload "bench/workloads/$w.yaml" --out "$out/kafka-$w" --label "kafka $w" || true
  done
fi
echo "bench/consume.sh: results under $out"
