#!/usr/bin/env bash
# A-B-A-B of transport security and authentication (issue 26: "P1 and C2 with TLS + auth on vs
# off, same run: throughput >= 0.85x, e2e p99 <= 1.2x"). ONE `sluice` binary, built from the
# working tree, serves as `sluice dev` and as the load generator.
#   A: `sluice dev` as it runs by default: cleartext HTTP/2 (h2c), no authentication, no ACLs.
#   B: `sluice dev --tls-cert/--tls-key` (HTTPS only), `--auth required` with bearer JWTs checked
#      against a JWKS, and `--authorization acl`: the load generator authenticates as User:bench,
#      which may do only what ACLs grant it (create, delete, produce and consume on topics named
#      sluice-bench*, consume and commit on groups named sluice-bench*), granted after each start
#      by User:admin (the only super-user) with `sluice acl add`. The load generator's clients
#      (producers, consumers, admin calls) speak TLS and send the token
#      (`sluice bench --sluice-tls-ca --sluice-token`).
# The CA, the server certificate (127.0.0.1/localhost), the identity provider's signing key, its
# JWKS and the tokens are made by this script in a temporary directory (openssl, `sluice auth`)
# and deleted at the end. Each run gets a FRESH `sluice dev` (new data directory); in each
# round the workloads run in order, A then B for each.
#
# Usage: bench/security-ab.sh [OUT_DIR]      (default bench/results/<UTC date>-security-ab)
#   WORKLOADS="p1 c2"  bench/workloads/<name>.yaml to run, in this order, per round
#   ROUNDS=3           A-B pairs per workload
#   BENCH_ARGS="..."   extra `sluice bench` flags for every run (e.g. "--test-duration 5s")
# Writes OUT/<a|b>-<workload>-r<round>/ (the load generator's results), OUT/load.txt (the
# machine's load before each run), OUT/acls.txt (the ACLs of a B run, as `sluice acl list`
# prints them), OUT/refs.txt and OUT/report.md (bench/security_ab_report.py: every run, B/A of
# the medians and per round, the issue's bars, server CPU per record).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/results/$(date -u +%F)-security-ab}
workloads=${WORKLOADS:-p1 c2}
rounds=${ROUNDS:-3}
bench_args=${BENCH_ARGS:-}
addr=127.0.0.1:17499
bin=.cache/sluice-security-ab
issuer=https://idp.example
audience=sluice
mkdir -p "$out" .cache

echo "bench/security-ab.sh: building sluice from the working tree"
go build -o "$bin" ./cmd/sluice

sec=$(mktemp -d)
dev=""
data=""
cleanup() {
  if [ -n "$dev" ]; then kill "$dev" 2>/dev/null || true; wait "$dev" 2>/dev/null || true; fi
  if [ -n "$data" ]; then rm -rf "$data"; fi
  rm -rf "$sec"
}
trap cleanup EXIT

# The CA, the server's certificate and the identity provider (README.md, "Run it securely").
(
  cd "$sec"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=sluice-bench-ca \
    -keyout ca.key -out ca.pem 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=localhost \
    -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout server.key -out server.csr 2>/dev/null
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -copy_extensions copy -out server.pem 2>/dev/null
  openssl ecparam -name prime256v1 -genkey -noout -out idp.key
)
"$bin" auth jwks --key "$sec/idp.key" --kid idp-1 > "$sec/jwks.json"
for who in admin bench; do
  "$bin" auth token --key "$sec/idp.key" --kid idp-1 --issuer "$issuer" --audience "$audience" --subject "$who" --ttl 24h > "$sec/$who.jwt"
done

dirty=""
if [ -n "$(git status --porcelain)" ]; then dirty=" (with uncommitted changes: below)"; fi
{
  echo "binary: sluice from the working tree at $(git rev-parse --short HEAD)$dirty, $(go version | cut -d' ' -f3)"
  echo "A: sluice dev (cleartext HTTP/2, --auth none, --authorization none); the load generator without TLS or token"
  echo "B: sluice dev --tls-cert/--tls-key (ECDSA P-256 certificate), --auth required (ES256 JWTs, --auth-jwks file), --authorization acl (--super-users User:admin);"
  echo "   the load generator as User:bench over TLS with its token (--sluice-tls-ca, --sluice-token), allowed by ACLs on the prefix sluice-bench (acls.txt)"
  echo "workloads: $workloads; rounds: $rounds; extra bench flags: ${bench_args:-none}"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo); openssl: $(openssl version | cut -d' ' -f1-2)"
  # What the working tree held beyond HEAD (others may be editing it): which files, and a hash
  # of the tracked changes.
  if [ -n "$dirty" ]; then
    git status --porcelain | sed 's/^/  /'
    echo "  tracked changes: sha256 $(git diff HEAD | sha256sum | cut -c1-16)"
  fi
} > "$out/refs.txt"

dev_flags() { # dev_flags a|b
  if [ "$1" = b ]; then
    echo "--tls-cert $sec/server.pem --tls-key $sec/server.key --auth required --auth-jwks $sec/jwks.json" \
      "--auth-issuer $issuer --auth-audience $audience --authorization acl --super-users User:admin"
  fi
}

start_dev() { # start_dev a|b LOG: a fresh sluice dev, waited for until it serves
  local side=$1 log=$2 scheme=http curl_tls=()
  if [ "$side" = b ]; then scheme=https; curl_tls=(--cacert "$sec/ca.pem"); fi
  data=$(mktemp -d)
  # shellcheck disable=SC2046  # word splitting of the flags is wanted
  "$bin" dev --data-dir "$data" --addr "$addr" $(dev_flags "$side") > "$log" 2>&1 &
  dev=$!
  for i in $(seq 100); do
    # The health check is served without credentials, also with --auth required.
    if curl -sf "${curl_tls[@]}" -X POST -H 'Content-Type: application/json' -d '{}' "$scheme://$addr/grpc.health.v1.Health/Check" 2>/dev/null | grep -q '"status":"SERVING"'; then break; fi
    if [ "$i" = 100 ]; then echo "bench/security-ab.sh: sluice dev did not become ready; see $log" >&2; exit 1; fi
    sleep 0.2
  done
  if [ "$side" = b ]; then
    # User:bench gets what the load generator does, and nothing else: topics and groups
    # named sluice-bench* (harness/loadgen's DefaultTopicPrefix). describe comes with these.
    local acl=("$bin" acl --addr "$addr" --tls-ca "$sec/ca.pem" --token "$(cat "$sec/admin.jwt")")
    "${acl[@]}" add --principal User:bench --topic sluice-bench --prefix --operation create,delete,produce,consume > /dev/null
    "${acl[@]}" add --principal User:bench --group sluice-bench --prefix --operation consume,commit > /dev/null
    "${acl[@]}" list > "$out/acls.txt"
  fi
}

stop_dev() {
  kill "$dev"; wait "$dev" || true
  dev=""
  rm -rf "$data"; data=""
}

side_flags() { # side_flags a|b: the bench flags of a side
  if [ "$1" = b ]; then echo "--sluice-tls-ca $sec/ca.pem --sluice-token $(cat "$sec/bench.jwt")"; fi
}

run_one() { # run_one a|b WORKLOAD ROUND
  start_dev "$1" ".cache/bench-security-ab-$1.log"
  echo "$(date -u +%FT%TZ) $1 $2 round $3: load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt"
  # shellcheck disable=SC2046,SC2086  # word splitting of the flags is wanted
  "$bin" bench --driver sluice --sluice-addr "$addr" --server-pids "sluice-dev=$dev" $(side_flags "$1") $bench_args \
    --workload "bench/workloads/$2.yaml" --out "$out/$1-$2-r$3" --label "$1 $2 r$3"
  stop_dev
}

for r in $(seq "$rounds"); do
  for w in $workloads; do
    run_one a "$w" "$r"
    run_one b "$w" "$r"
  done
done

python3 bench/security_ab_report.py "$out" > "$out/report.md"
echo "bench/security-ab.sh: results under $out (report.md)"
