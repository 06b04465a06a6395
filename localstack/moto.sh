#!/usr/bin/env bash
# moto.sh up|down|status — the S3 + DynamoDB (+ Lambda control-plane) endpoint, without Docker.
#
# moto (Apache-2.0, pure Python) serves the AWS APIs on one port, like LocalStack's :4566.
# `up` installs it once into a venv under $SLUICE_CACHE_DIR/moto-venv, starts
#   localstack/moto/serve.py -H 127.0.0.1 -p $SLUICE_MOTO_PORT
# (moto_server with fixes to its DynamoDB's transactions, concurrency and queries; serve.py
# says why), waits until it answers, switches moto's own Lambda to "no Docker" mode (it then only
# echoes payloads; real functions run under localstack/lambda.sh instead), and runs the same
# resource hooks as LocalStack and compose (localstack/init/ready.d: the `sluice-segments` bucket).
# moto keeps all state in memory: every `up` after a `down` starts empty.
#
# Environment: SLUICE_MOTO_PORT (4566), SLUICE_PYTHON (python3), SLUICE_MOTO_START_TIMEOUT (60).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NAME=moto
MOTO_VERSION=5.2.5
VENV=$SLUICE_CACHE_DIR/moto-venv
CONSTRAINTS=$STACK_REPO/localstack/moto-constraints.txt
MARKER=$VENV/.installed-moto-$MOTO_VERSION-$(sha256sum "$CONSTRAINTS" | cut -c1-12)
URL=http://127.0.0.1:$SLUICE_MOTO_PORT
PYTHON=${SLUICE_PYTHON:-python3}
START_TIMEOUT=${SLUICE_MOTO_START_TIMEOUT:-60}

# answers: moto's own API replies on our port.
answers() { curl -fsS -o /dev/null --max-time 2 "$URL/moto-api/"; }

install() {
  if [[ -f $MARKER && -x $VENV/bin/moto_server ]]; then return 0; fi
  command -v "$PYTHON" >/dev/null || die "moto: $PYTHON not found (set SLUICE_PYTHON)"
  local t0=$SECONDS
  if [[ ! -x $VENV/bin/python ]]; then
    log "moto: creating venv $VENV"
    "$PYTHON" -m venv "$VENV" || die "moto: '$PYTHON -m venv' failed (Debian: apt-get install python3-venv)"
  fi
  log "moto: installing moto[server]==$MOTO_VERSION into $VENV (once; progress below)"
  # The constraints file pins the whole dependency closure to the versions verified with this script.
  "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar on \
    -c "$CONSTRAINTS" "moto[server]==$MOTO_VERSION" >&2 || die "moto: pip install failed"
  # The marker names the constraints' checksum too: editing the pins reinstalls once.
  touch "$MARKER"
  log "moto: installed in $((SECONDS - t0))s"
}

configure() {
  # moto's Lambda would otherwise try to reach a Docker daemon on Invoke; there is none here.
  curl -fsS -o /dev/null --max-time 5 -X POST "$URL/moto-api/config" \
    -H 'Content-Type: application/json' -d '{"lambda":{"use_docker":false}}' ||
    die "moto: POST $URL/moto-api/config failed"
}

# init_hooks: create the resources Sluice needs (the same hooks LocalStack and compose run).
init_hooks() {
  local f
  for f in "$STACK_REPO"/localstack/init/ready.d/*.sh; do
    [[ -f $f ]] || continue
    AWS_ENDPOINT_URL=$URL sh "$f" >&2 || die "moto: init hook $f failed"
  done
}

up() {
  if is_running "$NAME"; then
    if answers; then
      log "moto: already running (pid $(cat "$(pidfile "$NAME")")) at $URL"
      return 0
    fi
    wait_for "$NAME" "$START_TIMEOUT" answers
    configure
    init_hooks
    return 0
  fi
  rm -f "$(pidfile "$NAME")"
  if tcp_open "$SLUICE_MOTO_PORT"; then
    die "moto: 127.0.0.1:$SLUICE_MOTO_PORT is taken by a process this stack did not start (set SLUICE_MOTO_PORT)"
  fi
  install
  log "moto: starting on $URL (log: $(logfile "$NAME"))"
  start_bg "$NAME" "$VENV/bin/python" "$STACK_REPO/localstack/moto/serve.py" -H 127.0.0.1 -p "$SLUICE_MOTO_PORT"
  wait_for "$NAME" "$START_TIMEOUT" answers
  configure
  init_hooks
  log "moto: up at $URL (pid $(cat "$(pidfile "$NAME")"))"
}

down() {
  stop_pid "$NAME"
}

status() {
  if is_running "$NAME" && answers; then
    echo "moto: up (pid $(cat "$(pidfile "$NAME")")) $URL"
    return 0
  fi
  if is_running "$NAME"; then
    echo "moto: starting or unresponsive (pid $(cat "$(pidfile "$NAME")")) $URL"
  else
    echo "moto: down"
  fi
  return 1
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
