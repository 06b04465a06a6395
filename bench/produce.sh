#!/usr/bin/env bash
# Produce-only P1 (max durable rate) and P2 (latency at 10k msg/s): sluice dev (3 in-process
# bookies, fsync before ack on the ack quorum) vs 3 Kafka brokers (acks=all, RF 3,
# min.insync.replicas 2), one after the other. Usage: bench/produce.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/results/$(date -u +%F)-produce}
mkdir -p "$out"
go build -o .cache/sluice-bench ./cmd/sluice
data=$(mktemp -d)
.cache/sluice-bench dev --data-dir "$data" --addr 127.0.0.1:17499 > "$out/sluice-dev.log" 2>&1 &
dev=$!
trap 'kill "$dev" 2>/dev/null || true; rm -rf "$data"' EXIT
sleep 3
for w in p1 p2; do
  .cache/sluice-bench bench --driver sluice --sluice-addr 127.0.0.1:17499 --server-pids "sluice-dev=$dev" \
    --workload "bench/workloads/$w.yaml" --out "$out/sluice-$w" --label "sluice $w"
done
kill "$dev"; wait "$dev" || true
started=0
if ! bash localstack/kafka.sh status >/dev/null 2>&1; then started=1; fi
bash localstack/kafka.sh up
for w in p1 p2; do
  .cache/sluice-bench bench --driver kafka --brokers "$(bash localstack/kafka.sh brokers)" \
    --server-pids "$(bash localstack/kafka.sh pids)" \
    --workload "bench/workloads/$w.yaml" --out "$out/kafka-$w" --label "kafka $w" || true
done
if [ "$started" = 1 ]; then bash localstack/kafka.sh down; fi
echo "bench/produce.sh: results under $out"
