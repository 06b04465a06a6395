#!/usr/bin/env bash
# stack.sh up|down|status|env [services...] — the whole local stack, without Docker.
#
#   up      install (first run) and start the services, then print a summary table
#   down    stop them, in reverse order (only processes this checkout started)
#   status  one line per service; exits non-zero when any is down
#   env     print `export` lines for the integration tests:  eval "$(localstack/stack.sh env)"
#
# Services: the arguments, else $SERVICES, else "cassandra moto lambda". Each is localstack/<name>.sh
# with the same up|down|status interface. Cassandra is the slowest to boot, so `up` starts it in the
# background and brings up the others meanwhile, then waits for it.
# Ports and folders: see lib.sh (SLUICE_*_PORT, SLUICE_CACHE_DIR, SLUICE_STACK_DIR).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HERE=$STACK_REPO/localstack
DEFAULT_SERVICES="cassandra moto lambda"
SLOW_SERVICES=" cassandra "

cmd=${1:-}
[[ $# -gt 0 ]] && shift
if [[ $# -gt 0 ]]; then
  read -r -a services <<<"$*"
else
  read -r -a services <<<"${SERVICES:-$DEFAULT_SERVICES}"
fi
[[ ${#services[@]} -gt 0 ]] || die "no services given"

script() { echo "$HERE/$1.sh"; }

check_name() {
  [[ $1 =~ ^[a-z0-9][a-z0-9-]*$ && $1 != lib && $1 != stack ]] || die "'$1' is not a service name"
}

# require_scripts: every requested service must have its script, or nothing starts.
require_scripts() {
  local s missing=()
  for s in "${services[@]}"; do
    check_name "$s"
    [[ -f $(script "$s") ]] || missing+=("$s")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    for s in "${missing[@]}"; do
      log "service '$s': $(script "$s") is missing"
    done
    die "missing service script(s): ${missing[*]} (choose services with: localstack/stack.sh up moto lambda, or SERVICES=\"moto lambda\")"
  fi
}

endpoint() {
  case $1 in
    cassandra) echo "127.0.0.1:$SLUICE_CASSANDRA_PORT (CQL)" ;;
    moto) echo "http://127.0.0.1:$SLUICE_MOTO_PORT (S3, DynamoDB)" ;;
    lambda) echo "http://127.0.0.1:$SLUICE_LAMBDA_PORT (Lambda Invoke)" ;;
    *) echo "-" ;;
  esac
}

declare -A took result

# summary: a table of every requested service; returns non-zero when any is not up.
summary() {
  local s rc bad=0 state
  printf '\n%-10s %-6s %-8s %-38s %s\n' SERVICE STATE UP-TIME ENDPOINT LOG
  for s in "${services[@]}"; do
    if [[ -f $(script "$s") ]]; then
      bash "$(script "$s")" status >/dev/null 2>&1 && rc=0 || rc=$?
    else
      rc=1
    fi
    if ((rc == 0)); then state=up; else state=DOWN; bad=1; fi
    printf '%-10s %-6s %-8s %-38s %s\n' "$s" "$state" "${took[$s]:--}" "$(endpoint "$s")" "$(logfile "$s")"
    if ((rc != 0)) && [[ -n ${result[$s]:-} ]]; then
      printf '%-10s   %s\n' "" "${result[$s]}"
    fi
  done
  echo
  return $bad
}

up() {
  require_scripts
  local s pid rc t0 failed=0
  declare -A bg_pid bg_t0
  # Slow services first, in the background, while the others start in the foreground.
  if [[ ${#services[@]} -gt 1 ]]; then
    for s in "${services[@]}"; do
      [[ $SLOW_SERVICES == *" $s "* ]] || continue
      log "$s: starting in the background while the others come up"
      bg_t0[$s]=$SECONDS
      bash "$(script "$s")" up &
      bg_pid[$s]=$!
    done
  fi
  for s in "${services[@]}"; do
    [[ -n ${bg_pid[$s]:-} ]] && continue
    t0=$SECONDS
    if bash "$(script "$s")" up; then
      took[$s]="$((SECONDS - t0))s"
    else
      rc=$?; failed=1
      took[$s]="$((SECONDS - t0))s"
      result[$s]="'$s.sh up' failed (exit $rc); see its output above and the log"
    fi
  done
  for s in "${!bg_pid[@]}"; do
    pid=${bg_pid[$s]}
    if wait "$pid"; then
      took[$s]="$((SECONDS - bg_t0[$s]))s"
    else
      rc=$?; failed=1
      took[$s]="$((SECONDS - bg_t0[$s]))s"
      result[$s]="'$s.sh up' failed (exit $rc); see its output above and the log"
    fi
  done
  summary || failed=1
  if ((failed)); then die "stack not fully up"; fi
  log "stack up; for the integration tests: eval \"\$(localstack/stack.sh env)\""
}

down() {
  local i s failed=0
  for ((i = ${#services[@]} - 1; i >= 0; i--)); do
    s=${services[i]}
    check_name "$s"
    if [[ ! -f $(script "$s") ]]; then
      log "service '$s': $(script "$s") is missing; cannot stop it"
      failed=1
      continue
    fi
    bash "$(script "$s")" down || failed=1
  done
  ((failed == 0)) || die "some services could not be stopped (see above)"
}

status() {
  local s bad=0
  for s in "${services[@]}"; do
    check_name "$s"
    if [[ ! -f $(script "$s") ]]; then
      echo "$s: unknown ($(script "$s") is missing)"
      bad=1
      continue
    fi
    bash "$(script "$s")" status || bad=1
  done
  return $bad
}

env_lines() {
  local s
  for s in "${services[@]}"; do
    check_name "$s"
    case $s in
      cassandra) echo "export SLUICE_TEST_CASSANDRA=127.0.0.1:$SLUICE_CASSANDRA_PORT" ;;
      moto) echo "export SLUICE_TEST_AWS_ENDPOINT=http://127.0.0.1:$SLUICE_MOTO_PORT" ;;
      lambda) echo "export SLUICE_TEST_LAMBDA_ENDPOINT=http://127.0.0.1:$SLUICE_LAMBDA_PORT" ;;
    esac
  done
  # Dummy credentials and region for the emulators, kept when already set (expanded by the shell that evals this).
  # shellcheck disable=SC2016
  echo 'export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}" AWS_REGION="${AWS_REGION:-us-east-1}"'
}

case $cmd in
  up) up ;;
  down) down ;;
  status) status ;;
  env) env_lines ;;
  *) echo "usage: $0 up|down|status|env [services...]   (default: $DEFAULT_SERVICES; or set SERVICES)" >&2; exit 2 ;;
esac
