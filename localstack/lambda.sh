#!/usr/bin/env bash
# lambda.sh up|down|status — real aws-lambda-go code behind the real Lambda Invoke API, without Docker.
#
# cmd/lambdapool (internal/lambdapool) serves the Invoke API on 127.0.0.1:$SLUICE_LAMBDA_PORT for two
# function names, both running ./internal/functions/echo:
#   POST http://127.0.0.1:$SLUICE_LAMBDA_PORT/2015-03-31/functions/echo/invocations
#   POST http://127.0.0.1:$SLUICE_LAMBDA_PORT/2015-03-31/functions/function/invocations
# ("function" is the one name AWS's Runtime Interface Emulator serves alone; callers that use it keep
# working), so the aws-sdk-go-v2 Lambda client with a custom base endpoint invokes them like real
# functions. Each name runs $SLUICE_LAMBDA_INSTANCES emulator (RIE) processes, each on two loopback
# ports the pool picks: one RIE runs one invoke at a time (concurrent invokes crash it), so the pool
# hands each invoke to a free one and answers 429 TooManyRequestsException when all are busy, as
# Lambda does at a function's reserved concurrency. It also adds what the RIE lacks: the
# X-Amz-Function-Error header on function errors, 404 for unknown functions, 413 over 6 MB, and a
# restart of an RIE that died. `up`:
#   1. installs the RIE once with `go install` into $SLUICE_CACHE_DIR/bin;
#   2. builds cmd/lambdapool into $SLUICE_CACHE_DIR/bin and ./internal/functions/echo as
#      $SLUICE_STACK_DIR/data/lambda/bootstrap on every `up` (a few seconds; a running pool is
#      restarted only when a binary or the instance count changed);
#   3. starts the pool (it waits until every RIE listens) and waits until a real invoke of `echo`
#      with a probe Kafka event returns the expected answer (it also runs one instance's init).
#
# Environment: SLUICE_LAMBDA_PORT (9100), SLUICE_LAMBDA_INSTANCES (4, per function name),
# SLUICE_LAMBDA_START_TIMEOUT (30).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NAME=lambda
RIE_MODULE=github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie
RIE_VERSION=v0.0.0-20261030222936-bef5c4ba774d
BIN_DIR=$SLUICE_CACHE_DIR/bin
RIE=$BIN_DIR/aws-lambda-rie
RIE_MARKER=$BIN_DIR/.aws-lambda-rie-$RIE_VERSION
POOL=$BIN_DIR/lambdapool
FUNC_DIR=$SLUICE_STACK_DIR/data/lambda
BOOTSTRAP=$FUNC_DIR/bootstrap
ARGS_FILE=$FUNC_DIR/lambdapool.args
INSTANCES=${SLUICE_LAMBDA_INSTANCES:-4}
URL=http://127.0.0.1:$SLUICE_LAMBDA_PORT
INVOKE_URL=$URL/2015-03-31/functions/echo/invocations
START_TIMEOUT=${SLUICE_LAMBDA_START_TIMEOUT:-30}

[[ $INSTANCES =~ ^[1-9][0-9]*$ ]] && ((INSTANCES <= 64)) ||
  die "lambda: SLUICE_LAMBDA_INSTANCES=$INSTANCES is not a count in 1..64"

POOL_ARGS=(--listen "127.0.0.1:$SLUICE_LAMBDA_PORT" --rie "$RIE" --region "${AWS_REGION:-us-east-1}"
  --function "echo=$BOOTSTRAP" --function "function=$BOOTSTRAP" --instances "$INSTANCES")

# A Kafka event with one good and one failing record, and the echo function's exact answer.
PROBE_EVENT='{"eventSource":"SelfManagedKafka","records":{"probe-0":[{"topic":"probe","partition":0,"offset":1,"timestamp":0,"timestampType":"CREATE_TIME","value":"b2s=","headers":[]},{"topic":"probe","partition":0,"offset":2,"timestamp":0,"timestampType":"CREATE_TIME","value":"ZmFpbA==","headers":[]}]}}'
PROBE_WANT='{"records":2,"batchItemFailures":[{"itemIdentifier":{"partition":"probe-0","offset":2}}],"echo":["ok","fail"]}'

command -v go >/dev/null || die "lambda: the Go toolchain is required (go install / go build)"

install_rie() {
  if [[ -x $RIE && -f $RIE_MARKER ]]; then return 0; fi
  local t0=$SECONDS
  log "lambda: installing aws-lambda-rie@$RIE_VERSION into $BIN_DIR (once)"
  mkdir -p "$BIN_DIR"
  (cd "$STACK_REPO" && GOBIN=$BIN_DIR go install "$RIE_MODULE@$RIE_VERSION") ||
    die "lambda: go install $RIE_MODULE@$RIE_VERSION failed"
  touch "$RIE_MARKER"
  log "lambda: aws-lambda-rie installed in $((SECONDS - t0))s"
}

# build_one OUT PKG [GO_BUILD_ARG...]: compile PKG to OUT.new; prints "changed" or "same".
# -buildvcs=false: a new commit alone does not change the binary (nor restart the pool).
build_one() {
  local out=$1 pkg=$2 t0=$SECONDS; shift 2
  mkdir -p "$(dirname "$out")"
  (cd "$STACK_REPO" && go build -buildvcs=false "$@" -o "$out.new" "$pkg") || die "lambda: building $pkg failed"
  log "lambda: built $pkg in $((SECONDS - t0))s"
  if [[ -f $out ]] && cmp -s "$out" "$out.new"; then
    rm -f "$out.new"
    echo same
  else
    echo changed
  fi
}

# build: both binaries and the pool's arguments; prints "changed" when any differs from the running pool's.
build() {
  local pool fn args
  pool=$(build_one "$POOL" ./cmd/lambdapool)
  fn=$(CGO_ENABLED=0 build_one "$BOOTSTRAP" ./internal/functions/echo -tags lambda.norpc)
  args=same
  [[ -f $ARGS_FILE && $(cat "$ARGS_FILE") == "${POOL_ARGS[*]}" ]] || args=changed
  if [[ $pool == same && $fn == same && $args == same ]]; then echo same; else echo changed; fi
}

# install_builds: put the new binaries (if any) in place, for a start.
install_builds() {
  local f
  for f in "$POOL" "$BOOTSTRAP"; do
    if [[ -f $f.new ]]; then mv -f "$f.new" "$f"; fi
  done
  echo "${POOL_ARGS[*]}" >"$ARGS_FILE"
}

# invoke_probe: one real invoke; true when the answer is exactly the expected one.
invoke_probe() {
  local got
  got=$(curl -sS --max-time 10 -X POST "$INVOKE_URL" -H 'Content-Type: application/json' -d "$PROBE_EVENT") || return 1
  [[ $got == "$PROBE_WANT" ]]
}

ready() { tcp_open "$SLUICE_LAMBDA_PORT" && invoke_probe; }

start() {
  rm -f "$(pidfile "$NAME")"
  tcp_open "$SLUICE_LAMBDA_PORT" &&
    die "lambda: 127.0.0.1:$SLUICE_LAMBDA_PORT is taken by a process this stack did not start (set SLUICE_LAMBDA_PORT)"
  log "lambda: starting lambdapool on $URL: echo and function, $INSTANCES RIE processes each (log: $(logfile "$NAME"))"
  # The pool removes AWS_LAMBDA_MAX_CONCURRENCY from its RIEs' environment (it would switch them to a
  # mode that cannot run here) and stops them (and their bootstraps) when it gets SIGTERM.
  start_bg "$NAME" "$POOL" "${POOL_ARGS[@]}"
  wait_for "$NAME" "$START_TIMEOUT" ready
  log "lambda: up at $URL/2015-03-31/functions/{echo,function}/invocations (pid $(cat "$(pidfile "$NAME")"))"
}

up() {
  install_rie
  local built
  built=$(build)
  if is_running "$NAME"; then
    if [[ $built == same ]]; then
      if tcp_open "$SLUICE_LAMBDA_PORT"; then
        log "lambda: already running (pid $(cat "$(pidfile "$NAME")")) with the current build at $URL"
        return 0
      fi
      wait_for "$NAME" "$START_TIMEOUT" ready
      return 0
    fi
    log "lambda: a binary or the instance count changed, restarting"
    stop_pid "$NAME"
  fi
  install_builds
  start
}

down() {
  stop_pid "$NAME"
}

status() {
  # No probe invoke here: status must never take an instance a caller's invoke needs.
  if is_running "$NAME" && tcp_open "$SLUICE_LAMBDA_PORT"; then
    echo "lambda: up (pid $(cat "$(pidfile "$NAME")")) $URL (functions echo, function)"
    return 0
  fi
  if is_running "$NAME"; then
    echo "lambda: starting or unresponsive (pid $(cat "$(pidfile "$NAME")")) $URL"
  else
    echo "lambda: down"
  fi
  return 1
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
