# shellcheck shell=bash
# Shared helpers for the no-Docker local stack scripts. Sourced, never run.
#
# Layout (all ignored by git):
#   $SLUICE_CACHE_DIR  (default <repo>/.cache)  downloads: Cassandra jars, moto venv, Go-built binaries
#   $SLUICE_STACK_DIR  (default <repo>/.stack)  run state: data/<svc>/, log/<svc>.log, run/<svc>.pid
#
# Every service script implements: up | down | status, and is idempotent.

set -euo pipefail

STACK_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SLUICE_CACHE_DIR=${SLUICE_CACHE_DIR:-$STACK_REPO/.cache}
SLUICE_STACK_DIR=${SLUICE_STACK_DIR:-$STACK_REPO/.stack}
mkdir -p "$SLUICE_CACHE_DIR" "$SLUICE_STACK_DIR/run" "$SLUICE_STACK_DIR/log" "$SLUICE_STACK_DIR/data"

# Ports: override with the environment so two runs on one machine never collide.
SLUICE_CASSANDRA_PORT=${SLUICE_CASSANDRA_PORT:-9042}
SLUICE_CASSANDRA_STORAGE_PORT=${SLUICE_CASSANDRA_STORAGE_PORT:-7000}
SLUICE_CASSANDRA_JMX_PORT=${SLUICE_CASSANDRA_JMX_PORT:-7199}
SLUICE_MOTO_PORT=${SLUICE_MOTO_PORT:-4566}
SLUICE_LAMBDA_PORT=${SLUICE_LAMBDA_PORT:-9100}

log() { printf '[stack] %s\n' "$*" >&2; }
die() { printf '[stack] error: %s\n' "$*" >&2; exit 1; }

pidfile() { echo "$SLUICE_STACK_DIR/run/$1.pid"; }
logfile() { echo "$SLUICE_STACK_DIR/log/$1.log"; }

# proc_start PID: the process's start time in clock ticks since boot (field 22 of /proc/PID/stat),
# which together with the pid names one process for good: a recycled pid has another start time.
proc_start() {
  local stat f
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }          # drop "pid (comm) ", comm may hold spaces
  read -r -a f <<<"$stat"
  echo "${f[19]}"            # field 22 overall = index 19 after pid and comm
}

# is_running NAME: true when NAME's pid file names a live process that is the one we started
# (same start time), so a stale pid file never makes us signal a stranger.
is_running() {
  local f pid want; f=$(pidfile "$1")
  [[ -f $f ]] || return 1
  pid=$(cat "$f")
  kill -0 "$pid" 2>/dev/null || return 1
  [[ -f $f.start ]] || return 0
  want=$(cat "$f.start")
  [[ $(proc_start "$pid") == "$want" ]]
}

# start_bg NAME CMD...: start CMD detached in its own session, output to NAME's log, pid to NAME's pid file.
start_bg() {
  local name=$1; shift
  local lf; lf=$(logfile "$name")
  : >"$lf"
  setsid "$@" >>"$lf" 2>&1 </dev/null &
  echo $! >"$(pidfile "$name")"
  proc_start $! >"$(pidfile "$name").start" || rm -f "$(pidfile "$name").start"
}

# stop_pid NAME: stop only the process group we started (pid file), TERM then KILL after 20 s.
stop_pid() {
  local name=$1 f pid i
  f=$(pidfile "$name")
  if [[ ! -f $f ]]; then log "$name: not started by us"; return 0; fi
  pid=$(cat "$f")
  if is_running "$name"; then
    log "$name: stopping pid $pid"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 200; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name: still alive after 20 s, sending KILL"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$f" "$f.start"
}

# wait_for NAME DEADLINE_SECONDS CHECK_CMD...: poll CHECK_CMD every 0.5 s with progress; on timeout or
# if the process died, print the log tail and fail, pointing at the log.
wait_for() {
  local name=$1 deadline=$2; shift 2
  local start=$SECONDS last=-1 lf; lf=$(logfile "$name")
  while ! "$@" >/dev/null 2>&1; do
    if ! is_running "$name"; then
      tail -n 40 "$lf" >&2 || true
      die "$name exited during start-up; full log: $lf"
    fi
    if ((SECONDS - start >= deadline)); then
      tail -n 40 "$lf" >&2 || true
      die "$name not ready after ${deadline}s; full log: $lf"
    fi
    if (((SECONDS - start) / 5 != last)); then
      last=$(((SECONDS - start) / 5))
      log "$name: waiting for readiness ($((SECONDS - start))s / ${deadline}s)"
    fi
    sleep 0.5
  done
  log "$name: ready after $((SECONDS - start))s"
}

# tcp_open PORT: true when something listens on 127.0.0.1:PORT.
tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# java_major JAVA: prints the feature version (8, 11, 17, 25...) of that java binary.
java_major() {
  local v
  v=$("$1" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)
  v=${v#1.} # 1.8.0_x -> 8
  echo "${v%%[.+-]*}"
}

# maven_classpath NAME POM LIB MARKER CHECK_JAR [MAVEN_ARG...]: copy the runtime closure of the
# classpath-only project POM (Maven Central artifacts) into the folder LIB, once. Maven's local
# repository lives in the cache dir too ($SLUICE_CACHE_DIR/m2), so nothing lands in ~/.m2. The
# copy goes to LIB.partial first and MARKER is written only after a complete copy that holds
# CHECK_JAR, so an interrupted run retries. Maven runs in a copy of POM beside LIB, so it writes
# nothing inside the repository.
maven_classpath() {
  local name=$1 pom=$2 lib=$3 marker=$4 check=$5; shift 5
  if [[ -f $marker ]]; then return 0; fi
  command -v mvn >/dev/null || die "$name: mvn not found (Debian: apt-get install maven)"
  local t0=$SECONDS dir tmp=$lib.partial n
  dir=$(dirname "$lib")
  log "$name: downloading jars from Maven Central (first run only, ~1-3 min)..."
  mkdir -p "$dir"
  rm -rf "$tmp"
  cp "$pom" "$dir/pom.xml"
  # Debian's Maven 3.8 prints bare colour resets even with -B; sed drops them (pipefail keeps
  # mvn's exit status).
  (cd "$dir" && mvn -q -B -Dstyle.color=never \
    -Dmaven.repo.local="$SLUICE_CACHE_DIR/m2" "$@" \
    dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$tmp" 2>&1 | sed $'s/\e\\[[0-9;]*m//g' >&2) ||
    die "$name: Maven could not resolve $pom (see output above)"
  [[ -f $tmp/$check ]] || die "$name: $check missing after the Maven run"
  rm -rf "$lib"
  mv "$tmp" "$lib"
  n=$(find "$lib" -name '*.jar' | wc -l)
  touch "$marker"
  log "$name: $n jars in $lib ($((SECONDS - t0))s)"
}
