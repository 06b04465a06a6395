#!/usr/bin/env bash
# bench/compare.sh — issue 7's side-by-side run (`task bench:compare`).
#
# Systems, one at a time, never together, A-B-A-B (REPS repetitions of the whole list):
#   kafka        Apache Kafka 4.4, 3 KRaft brokers on 127.0.0.1 (localstack/kafka.sh), RF 3,
#                min.insync.replicas 2, acks=all, idempotent producers; Kafka's default flush
#                policy (acknowledged before fsync)
#   kafka-fsync  the same brokers, topics with flush.messages=1 (fsync before ack, as Sluice)
#   sluice       3 `sluice bookie` processes (E3/Qw3/Qa2, journal fsync before ack), one
#                `sluice ingest`, one `sluice fetch`; catalog on the AWS emulator (DynamoDB),
#                groups on Cassandra (localstack/stack.sh)
# Scenarios (bench/workloads): s1 (max durable produce, 1 KiB, 16 partitions, rate searched),
# p1 and t1 (P1's produce without and with a transaction every 100 messages), p1m and t1m (the
# same with 16 producers), t2 and t2u (a
# transactional backlog read with read_committed and with read_uncommitted),
# s2 (end-to-end latency at 10k msg/s, and at 50% of Kafka's S1 rate), s3 (catch-up), s4 (256
# and 1024 partitions), s5 (150% of the system's own S1 rate: loss, throttling, peak RSS).
# Every run writes OUT/<system>-<workload>-r<rep>/results.{json,md}; bench/report.py then
# writes OUT/results.json, OUT/README.md (absolute numbers and Sluice/Kafka ratios) and the
# PNG charts.
#
# Usage: bench/compare.sh [OUT_DIR]          (default bench/results/<UTC date>-compare)
#   REPS=2                 repetitions (A-B-A-B)
#   SYSTEMS="kafka kafka-fsync sluice"
#   SCENARIOS="s1 s2 s3 s4 s5"
#   FSYNC_SCENARIOS="s1 s2"  what kafka-fsync runs (the durability difference shows in throughput
#                          and latency; the rest would not fit the 45-minute budget; its S2 runs at
#                          10k msg/s only, not also at 50% of Kafka's S1 rate)
#   S4_WORKLOADS="s4-256 s4-1024"  the partition counts S4 runs (bench/workloads/<name>.yaml)
#   S4_REPS=1              S4 runs in the first S4_REPS repetitions only: at 1,024 partitions
#                          Sluice needs ~1.5 min for takeovers on the emulated catalog, and
#                          every S4 run of both systems in every repetition would not fit the
#                          45-minute budget
#   SLUICE_ARGS="..."      more harness/clusterctl `up` flags for Sluice's processes (e.g.
#                          "--ingest-arg=--cassandra-txn-buckets=4 --fetch-arg=--cassandra-txn-buckets=4");
#                          the results are then not the defaults'
#   WARM_SECONDS=60 WARM_RATE=2000  before the transactional runs of each started system, an
#                          unmeasured T1M at that rate (warm); WARM_SECONDS=0: none
#   BENCH_ARGS="..."       more `sluice bench` flags for every run (e.g. "--test-duration 120s"
#                          for a long look at one scenario); the results are then not the compare's
#   QUICK=1                short windows, one repetition, s4 at 256 only: proves the harness
#                          end to end in a few minutes; the numbers are not results
#   MIN_FREE_GIB=20        refuse to start with less free disk space (5 with QUICK=1): a disk that
#                          fills up stops the bookies
#   LEDGER=1               at the end, also the ledger tier vs Apache BookKeeper
#                          (bench/ledger-compare.sh, into OUT/ledger; QUICK applies)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/results/$(date -u +%F)-compare}
reps=${REPS:-2}
systems=${SYSTEMS:-kafka kafka-fsync sluice}
scenarios=${SCENARIOS:-s1 s2 s3 s4 s5}
fsync_scenarios=${FSYNC_SCENARIOS:-s1 s2}
quick=${QUICK:-0}
bin=.cache/sluice-bench
logs=.cache/bench-compare-logs   # server logs: large, not results
mkdir -p "$out" "$logs"

say() { echo "[compare $(date -u +%T)] $*" >&2; }
die() { say "error: $*"; exit 1; }

read -r -a s4 <<< "${S4_WORKLOADS:-s4-256 s4-1024}"
s4_reps=${S4_REPS:-1}
# Runs that miss their rate wait this long for the stragglers before they end.
extra=(--drain-timeout 20s)
if [ "$quick" = 1 ]; then
  reps=1
  read -r -a s4 <<< "${S4_WORKLOADS:-s4-256}"
  extra=(--warmup-duration 12s --test-duration 8s --drain-timeout 15s)
fi
if [ -n "${BENCH_ARGS:-}" ]; then
  read -r -a more <<< "$BENCH_ARGS"
  extra+=("${more[@]}")
fi

# A full compare writes ~15 GiB (bookie journals and entry logs, Kafka's logs); a disk that fills
# up mid-run stops bookies ("no space left on device": restart required) and spoils the run.
min_free=${MIN_FREE_GIB:-20}
if [ "$quick" = 1 ]; then min_free=${MIN_FREE_GIB:-5}; fi
free_gib=$(df -Pk . | awk 'NR == 2 { print int($4 / 1048576) }')
if [ "$free_gib" -lt "$min_free" ]; then
  die "only $free_gib GiB free here; want $min_free (MIN_FREE_GIB). Free space first, e.g. the Go build cache: go clean -cache"
fi

say "building sluice"
go build -o "$bin" ./cmd/sluice
clusterctl=.cache/clusterctl-bench # starts Sluice's processes (harness/localcluster, as localstack/cluster.sh does)
go build -o "$clusterctl" ./harness/clusterctl

# --- the servers ---------------------------------------------------------------------------

sluice_pids="" # name=pid,... for --server-pids
data=""
stop_sluice() {
  if [ -n "$data" ]; then
    "$clusterctl" down --dir "$data" --grace 10s >/dev/null 2>&1 || true
    cp "$data"/log/*.log "$logs/" 2>/dev/null || true
    rm -rf "$data"; data=""
  fi
  sluice_pids=""
}
kafka_up=0
stop_kafka() { if [ "$kafka_up" = 1 ]; then bash localstack/kafka.sh down >/dev/null 2>&1 || true; kafka_up=0; fi; }
# Cassandra and the AWS emulator: stopped at the end when this script started them, left running
# when they ran before it (another checkout's stack on the same ports would clash otherwise).
stack_before=$( (bash localstack/stack.sh status 2>/dev/null || true) | awk -F: '$2 ~ /^ (running|up)/ {print $1}' | tr '\n' ' ')
stack_used=0
stop_stack() {
  [ "$stack_used" = 1 ] || return 0
  local svc
  for svc in moto cassandra; do
    case " $stack_before " in
      *" $svc "*) ;;
      *) bash localstack/stack.sh down "$svc" >/dev/null 2>&1 || true ;;
    esac
  done
  stack_used=0
}
trap 'stop_sluice; stop_kafka; stop_stack' EXIT

healthy() { # ADDR: the gRPC health check answers SERVING (Connect protocol, JSON)
  curl -sf -m 2 -X POST -H 'Content-Type: application/json' -d '{}' "http://$1/grpc.health.v1.Health/Check" 2>/dev/null | grep -q '"status":"SERVING"'
}
wait_healthy() { # NAME ADDR LOG
  for _ in $(seq 120); do
    if healthy "$2"; then return 0; fi
    sleep 0.5
  done
  die "$1 did not become healthy on $2; see $3"
}

ingest_addr=127.0.0.1:17521 # harness/localcluster's addresses at --base-port 17500
fetch_addr=127.0.0.1:17541
start_sluice() {
  # A fresh AWS emulator (in memory): its TransactWriteItems deep-copies every table it holds,
  # so a catalog that grew through earlier runs (or earlier tables) slows every takeover.
  stack_used=1
  bash localstack/stack.sh down moto >&2
  case " $stack_before " in
    *" cassandra "*) ;;
    *)
      # Not someone else's: start from an empty node once per compare. Every run adds a keyspace,
      # and so do the integration tests; a node that had gathered 168 keyspaces (~1,200 tables)
      # started with 30 compactions pending and spent CPU on them during the runs.
      if [ "${cassandra_wiped:-0}" = 0 ]; then
        bash localstack/cassandra.sh down --wipe >&2
        cassandra_wiped=1
      fi ;;
  esac
  bash localstack/stack.sh up cassandra moto >&2
  eval "$(bash localstack/stack.sh env)"
  export AWS_ENDPOINT_URL=$SLUICE_TEST_AWS_ENDPOINT
  local ts table keyspace
  ts=$(date +%s)
  table=sluice-bench-$ts
  keyspace=sluice_bench_$ts
  data=$(mktemp -d -p "$PWD/.cache" bench-sluice.XXXXXX) # the repo's disk, like Kafka's logs
  # 3 bookies (E3/Qw3/Qa2, journal fsync before ack), one ingest copy (with the keyspace too:
  # producer ids and transactions, issue 24), one fetch copy; no compactor (nothing is old enough
  # to offload during a run). Flags and start order: harness/localcluster.
  if ! "$clusterctl" up --dir "$data" --bin "$bin" --bookies 3 --ingests 1 --fetches 1 --compactors 0 \
      --base-port 17500 --pprof --table "$table" --keyspace "$keyspace" \
      --aws-endpoint "$SLUICE_TEST_AWS_ENDPOINT" --cassandra "$SLUICE_TEST_CASSANDRA" --lambda-endpoint "" ${SLUICE_ARGS:-} >&2; then
    cp "$data"/log/*.log "$logs/" 2>/dev/null || true
    die "sluice did not start; see $logs"
  fi
  sluice_pids=$("$clusterctl" pids --dir "$data")
  # Cassandra does Sluice's work too (producer ids, transactions' compare-and-sets, group
  # offsets and leases; Kafka keeps those in its brokers), so its CPU is server CPU.
  local cass
  if cass=$(pgrep -f CassandraDaemon | head -1); then sluice_pids+=",cassandra=$cass"; fi
  sleep 2 # bookies' first registry heartbeats
  settle_cassandra
  say "sluice up: ingest $ingest_addr, fetch $fetch_addr, 3 bookies, catalog table $table"
}

# settle_cassandra waits (at most 90 s) until Cassandra uses under 0.15 of a core over 3 s. Just
# started, or just given a run's keyspace, it used 0.3-1.0 core for about a minute (JIT, schema
# and system-table work), on the same 2 cores as the servers measured; a long-running one is idle
# at this load. From 2026-12-06 its CPU is in Sluice's server CPU figures (start_sluice).
settle_cassandra() {
  local pid hz t1 t2 i
  pid=$(pgrep -f CassandraDaemon | head -1) || return 0
  hz=$(getconf CLK_TCK)
  for i in $(seq 30); do
    t1=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null) || return 0
    sleep 3
    t2=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null) || return 0
    if [ $(( (t2 - t1) * 100 / (3 * hz) )) -lt 15 ]; then
      say "cassandra settled after $((i * 3)) s ($(( (t2 - t1) * 100 / (3 * hz) ))% of a core)"
      return 0
    fi
  done
  say "cassandra still busy after 90 s; running anyway"
}

start_kafka() {
  bash localstack/kafka.sh up >&2
  kafka_up=1
}

# --- one run -----------------------------------------------------------------------------------

# driver_args SYSTEM: appends to args the `sluice bench` flags that aim it at the running SYSTEM.
driver_args() {
  case $1 in
    kafka) args+=(--driver kafka --brokers "$(bash localstack/kafka.sh brokers)" --server-pids "$(bash localstack/kafka.sh pids)") ;;
    kafka-fsync) args+=(--driver kafka --brokers "$(bash localstack/kafka.sh brokers)" --server-pids "$(bash localstack/kafka.sh pids)"
      --kafka-topic-config flush.messages=1) ;;
    sluice) args+=(--driver sluice --sluice-addr "$ingest_addr" --sluice-fetch-addr "$fetch_addr" --server-pids "$sluice_pids") ;;
  esac
}

# warm SYSTEM SCENARIOS: before a system's runs of a repetition that include a transactional one (t1, t1m, t2, t2u), an
# unmeasured T1M at WARM_RATE msg/s (default 2000, below what either system holds) for
# WARM_SECONDS (default 60; 0: none), its results in the logs directory. The JVMs are fresh at
# that point — Kafka's brokers every repetition, Cassandra (Sluice's transaction coordinator's
# store) once per compare — and their transaction paths were not compiled yet: a JFR recording
# of Cassandra in Sluice's first T1M put its JIT compiler threads at three times the CPU of its
# request threads, and the first T1M of a compare used 13 s of Cassandra's CPU per window
# against 8.6 s by the third. Both systems are warmed the same way; a long-running deployment
# is warm.
warm() {
  local sys=$1 secs=${WARM_SECONDS:-60} args
  [ "$secs" -gt 0 ] && [ "$quick" != 1 ] || return 0
  case " $2 " in *" t1 "* | *" t1m "* | *" t2 "* | *" t2u "*) ;; *) return 0 ;; esac
  say "$sys: warming its transaction paths (T1M at ${WARM_RATE:-2000} msg/s for $secs s; not measured)"
  args=(--workload bench/workloads/t1m.yaml --out "$logs/warm-$sys" --label "$sys warm-up"
    --rate "${WARM_RATE:-2000}" --warmup-duration 0s --test-duration "${secs}s" --drain-timeout 20s)
  driver_args "$sys"
  "$bin" bench "${args[@]}" > "$logs/warm-$sys.out" 2>&1 || say "$sys warm-up failed (see $logs/warm-$sys.out); measuring anyway"
}

# run SYSTEM WORKLOAD REP [bench flags...]: one workload against the running SYSTEM.
run() {
  local sys=$1 w=$2 rep=$3
  shift 3
  local dir="$out/$sys-$w-r$rep"
  local args=(--workload "bench/workloads/$w.yaml" --out "$dir" --label "$sys $w r$rep" "${extra[@]}" "$@")
  driver_args "$sys"
  # Cassandra works on after a transactional run (memtable flushes, compactions of the Paxos
  # state): let it settle before each of Sluice's runs, not only the first, so one run's
  # aftermath is not the next one's load.
  if [ "$sys" = sluice ]; then settle_cassandra; fi
  say "$sys $w (rep $rep)"
  profile "$sys" "$w" "$rep"
  echo "$(date -u +%FT%TZ) $sys $w r$rep: load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"
  if ! "$bin" bench "${args[@]}" > "$logs/$sys-$w-r$rep.out" 2>&1; then
    say "$sys $w (rep $rep) failed; see $logs/$sys-$w-r$rep.out"
    tail -5 "$logs/$sys-$w-r$rep.out" >&2
    return 0 # the report shows the missing run; the others still run
  fi
}

# profile SYSTEM WORKLOAD REP: for Sluice's S1, S2, S3 and S4-1024, a 20 s CPU profile of the ingest
# copy, the fetch copy and one bookie taken inside the measured window (after the warm-up; in
# S3, during the catch-up), saved with a `go tool pprof -top` summary under OUT/profiles: where
# the time goes when a target is missed.
profile() {
  local sys=$1 w=$2 rep=$3 delay
  [ "$sys" = sluice ] && [ "$quick" != 1 ] || return 0
  case $w in s1) delay=50 ;; s2) delay=20 ;; s3) delay=32 ;; s4-1024) delay=130 ;; *) return 0 ;; esac
  mkdir -p "$out/profiles"
  (
    sleep "$delay"
    for target in "ingest=$ingest_addr" "fetch=$fetch_addr" "bookie-1=127.0.0.1:17501"; do
      f="$out/profiles/$sys-$w-r$rep-${target%%=*}.pprof"
      curl -sf -m 40 -o "$f" "http://${target#*=}/debug/pprof/profile?seconds=20" &
    done
    wait
  ) &
}

# summarize_profiles: a `go tool pprof -top` summary beside every profile. Run after all the
# runs: `go tool pprof` (re)builds pprof and costs a core for a moment, which inside a
# measured window showed up in S2's tail.
summarize_profiles() {
  local f
  for f in "$out"/profiles/*.pprof; do
    [ -s "$f" ] && go tool pprof -top -nodecount 25 "$bin" "$f" > "${f%.pprof}.top.txt" 2>/dev/null || true
  done
}

# rate_of DIR: the publish rate a finished run held (0 when it did not finish).
rate_of() {
  python3 - "$1/results.json" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    r = r[0] if isinstance(r, list) else r
    print(int(r["publish"]["msgPerSec"]))
except Exception:
    print(0)
EOF
}

scenario() { # SYSTEM SCENARIO REP
  local sys=$1 s=$2 rep=$3
  case $s in
    s1) run "$sys" s1 "$rep" ;;
    s2)
      run "$sys" s2 "$rep"
      local k
      k=$(rate_of "$out/kafka-s1-r$rep")
      if [ "$sys" = kafka-fsync ]; then
        say "kafka-fsync: S2 at 10k msg/s only (the 45-minute budget)"
      elif [ "$k" -gt 0 ]; then
        run "$sys" s2 "$rep-half" --rate $((k / 2)) --label "$sys s2 at 50% of Kafka S1 ($((k / 2)) msg/s) r$rep"
      else
        say "no Kafka S1 result in rep $rep: skipping S2 at 50% of Kafka's S1 rate"
      fi ;;
    s3) run "$sys" s3 "$rep" --warmup-duration 0s ;; # its backlog phase is the warm-up
    s4)
      if [ "${rep%%-*}" -gt "$s4_reps" ]; then
        say "$sys: S4 in the first $s4_reps repetition(s) only (the 45-minute budget)"
        return 0
      fi
      for w in "${s4[@]}"; do
        # Each partition count on a fresh Sluice and catalog: the emulated catalog slows down
        # with every item it holds (see start_sluice), which real DynamoDB does not.
        if [ "$sys" = sluice ]; then stop_sluice; start_sluice; fi
        run "$sys" "$w" "$rep"
      done ;;
    s5)
      local own
      own=$(rate_of "$out/$sys-s1-r$rep")
      if [ "$own" -gt 0 ]; then
        run "$sys" s5 "$rep" --rate $((own * 3 / 2)) --recovery-rate $((own / 2)) \
          --label "$sys s5 at 150% of its S1 ($((own * 3 / 2)) msg/s), then 50% r$rep"
      else
        say "no $sys S1 result in rep $rep: skipping S5 (150% of S1)"
      fi ;;
    p1 | t1 | p1m | t1m) run "$sys" "$s" "$rep" ;;             # issue 24: produce, plain and transactional
    t2 | t2u) run "$sys" "$s" "$rep" --warmup-duration 0s ;; # issue 24: read_committed catch-up (backlog phase)
    *) die "unknown scenario $s (want s1..s5, p1, t1, p1m, t1m, t2, t2u)" ;;
  esac
}

start=$(date +%s)
for rep in $(seq "$reps"); do
  for sys in $systems; do
    case $sys in
      kafka | kafka-fsync) if [ "$kafka_up" = 0 ]; then stop_sluice; start_kafka; fi ;;
      sluice) stop_kafka; stop_sluice; start_sluice ;;
      *) die "unknown system $sys (want kafka, kafka-fsync, sluice)" ;;
    esac
    list=$scenarios
    if [ "$sys" = kafka-fsync ]; then
      list=""
      for s in $scenarios; do if [[ " $fsync_scenarios " == *" $s "* ]]; then list+=" $s"; fi; done
    fi
    warm "$sys" "$list"
    for s in $list; do scenario "$sys" "$s" "$rep"; done
  done
  stop_kafka
  stop_sluice
done
if [ "${LEDGER:-0}" = 1 ]; then
  say "ledger tier vs BookKeeper: bench/ledger-compare.sh $out/ledger"
  QUICK=$quick bash bench/ledger-compare.sh "$out/ledger" || say "ledger-compare failed; see its output above"
fi
say "all runs done in $(( ($(date +%s) - start) / 60 )) min; writing the report"
summarize_profiles
bash bench/report.sh "$out"
