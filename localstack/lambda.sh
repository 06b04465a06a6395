#!/usr/bin/env bash
# lambda.sh up|down|status — real aws-lambda-go code behind the real Lambda Invoke API, without Docker.
#
# AWS's Runtime Interface Emulator (RIE) runs a Lambda `bootstrap` binary as a child process and serves
#   POST http://127.0.0.1:$SLUICE_LAMBDA_PORT/2015-03-31/functions/function/invocations
# (the function name in the path is always `function`), so the aws-sdk-go-v2 Lambda client with a
# custom base endpoint invokes it like a real function. `up`:
#   1. installs the RIE once with `go install` into $SLUICE_CACHE_DIR/bin;
#   2. builds ./internal/functions/echo as $SLUICE_STACK_DIR/data/lambda/bootstrap on every `up`
#      (a few seconds; a running RIE is restarted only when the binary changed);
#   3. starts the RIE and waits until a real invoke of a probe Kafka event returns the expected
#      answer (the first invoke also runs the function's init).
#
# Concurrency: the RIE serves ONE invoke at a time. Concurrent invokes crash it (nil-pointer panic,
# seen with 40 parallel curls), so callers must serialise per RIE process (or run several on other
# ports). Its "managed instances" mode (AWS_LAMBDA_MAX_CONCURRENCY set) would run invokes in
# parallel, but this RIE version then ignores the bootstrap argument and only looks in /var/task,
# /var/runtime and /opt: usable in a container, not here, so this script never sets it.
# A function error comes back as HTTP 200 with {"errorMessage","errorType"} and, unlike real
# Lambda, no X-Amz-Function-Error header.
#
# Environment: SLUICE_LAMBDA_PORT (9100), SLUICE_LAMBDA_RUNTIME_PORT (9101), SLUICE_LAMBDA_START_TIMEOUT (30).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NAME=lambda
RIE_MODULE=github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie
RIE_VERSION=v0.0.0-20261030222936-bef5c4ba774d
BIN_DIR=$SLUICE_CACHE_DIR/bin
RIE=$BIN_DIR/aws-lambda-rie
RIE_MARKER=$BIN_DIR/.aws-lambda-rie-$RIE_VERSION
FUNC_DIR=$SLUICE_STACK_DIR/data/lambda
BOOTSTRAP=$FUNC_DIR/bootstrap
URL=http://127.0.0.1:$SLUICE_LAMBDA_PORT
INVOKE_URL=$URL/2015-03-31/functions/function/invocations
START_TIMEOUT=${SLUICE_LAMBDA_START_TIMEOUT:-30}

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

# build: compile the function to $BOOTSTRAP.new; prints "changed" or "same".
build() {
  local t0=$SECONDS
  mkdir -p "$FUNC_DIR"
  (cd "$STACK_REPO" && CGO_ENABLED=0 go build -tags lambda.norpc -o "$BOOTSTRAP.new" ./internal/functions/echo) ||
    die "lambda: building ./internal/functions/echo failed"
  log "lambda: built ./internal/functions/echo in $((SECONDS - t0))s"
  if [[ -f $BOOTSTRAP ]] && cmp -s "$BOOTSTRAP" "$BOOTSTRAP.new"; then
    rm -f "$BOOTSTRAP.new"
    echo same
  else
    echo changed
  fi
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
  local p
  for p in "$SLUICE_LAMBDA_PORT" "$SLUICE_LAMBDA_RUNTIME_PORT"; do
    tcp_open "$p" && die "lambda: 127.0.0.1:$p is taken by a process this stack did not start (set SLUICE_LAMBDA_PORT / SLUICE_LAMBDA_RUNTIME_PORT)"
  done
  # env -u: an inherited AWS_LAMBDA_MAX_CONCURRENCY would switch the RIE to a mode that cannot run here.
  local envs=(-u AWS_LAMBDA_MAX_CONCURRENCY AWS_LAMBDA_FUNCTION_NAME=echo AWS_REGION="${AWS_REGION:-us-east-1}")
  log "lambda: starting aws-lambda-rie on $URL (runtime API 127.0.0.1:$SLUICE_LAMBDA_RUNTIME_PORT; log: $(logfile "$NAME"))"
  # The RIE runs the bootstrap in its own working directory: start it from the function's folder.
  cd "$FUNC_DIR"
  start_bg "$NAME" env "${envs[@]}" "$RIE" \
    --runtime-interface-emulator-address "127.0.0.1:$SLUICE_LAMBDA_PORT" \
    --runtime-api-address "127.0.0.1:$SLUICE_LAMBDA_RUNTIME_PORT" \
    "$BOOTSTRAP"
  cd - >/dev/null
  wait_for "$NAME" "$START_TIMEOUT" ready
  log "lambda: up at $INVOKE_URL (pid $(cat "$(pidfile "$NAME")"))"
}

up() {
  install_rie
  local built
  built=$(build)
  if is_running "$NAME"; then
    if [[ $built == same ]]; then
      if tcp_open "$SLUICE_LAMBDA_PORT"; then
        log "lambda: already running (pid $(cat "$(pidfile "$NAME")")) with the current build at $INVOKE_URL"
        return 0
      fi
      wait_for "$NAME" "$START_TIMEOUT" ready
      return 0
    fi
    log "lambda: function changed, restarting"
    stop_pid "$NAME"
  fi
  [[ -f $BOOTSTRAP.new ]] && mv -f "$BOOTSTRAP.new" "$BOOTSTRAP"
  start
}

down() {
  stop_pid "$NAME"
}

status() {
  # No probe invoke here: status must never queue behind (or collide with) a caller's invoke.
  if is_running "$NAME" && tcp_open "$SLUICE_LAMBDA_PORT"; then
    echo "lambda: up (pid $(cat "$(pidfile "$NAME")")) $INVOKE_URL"
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
