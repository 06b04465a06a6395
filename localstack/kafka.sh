#!/usr/bin/env bash
# kafka.sh install|up|down [--wipe]|status|brokers|pids|env — three Apache Kafka 4.4 brokers in
# KRaft mode on 127.0.0.1, without Docker: the peer the benchmark harness (`sluice bench`)
# compares Sluice with.
#
#   install  resolve the broker's jars with Maven once (cached under $SLUICE_CACHE_DIR/kafka/lib)
#   up       install, format the three log dirs once, start the brokers, wait until all three serve
#   down     stop the brokers this checkout started; --wipe also deletes their data
#   status   one line per broker; exits non-zero unless all three are up
#   brokers  the bootstrap list: 127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
#   pids     the brokers' pids, comma-separated (for `sluice bench --server-pids`)
#   env      `export SLUICE_TEST_KAFKA=<bootstrap list>` for the integration tests
#
# Layout: node 1 is controller and broker (a one-voter KRaft quorum, formatted --standalone),
# nodes 2 and 3 are brokers only. Every topic gets replication factor 3 and
# min.insync.replicas=2, as the benchmark's acks=all producers expect. Kafka's default flush
# policy leaves fsync to the OS (acknowledged data sits in the page cache of 2 replicas);
# SLUICE_KAFKA_FLUSH_EVERY_MESSAGE=1 sets log.flush.interval.messages=1 (the broker-wide form of
# the topic setting flush.messages=1: fsync before acknowledging), so runs with and without it
# show what durability costs. The setting is rendered on every `up`: to switch, `down` then `up`.
#
# Environment: SLUICE_KAFKA_PORT_BASE (9092: brokers on BASE, BASE+1, BASE+2),
# SLUICE_KAFKA_CONTROLLER_PORT (BASE+3), SLUICE_KAFKA_HEAP (512M per broker),
# SLUICE_KAFKA_FLUSH_EVERY_MESSAGE (0), SLUICE_KAFKA_START_TIMEOUT (120),
# SLUICE_KAFKA_JAVA (a Java 17+ `java`; found if unset).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KAFKA_VERSION=4.4.0 # keep in step with localstack/kafka/pom.xml
TEMPLATES=$STACK_REPO/localstack/kafka
LIB=$SLUICE_CACHE_DIR/kafka/lib
MARKER=$LIB/.complete-$KAFKA_VERSION
DATA=$SLUICE_STACK_DIR/data/kafka
PORT_BASE=${SLUICE_KAFKA_PORT_BASE:-9092}
CONTROLLER_PORT=${SLUICE_KAFKA_CONTROLLER_PORT:-$((PORT_BASE + 3))}
HEAP=${SLUICE_KAFKA_HEAP:-512M}
FLUSH_EVERY_MESSAGE=${SLUICE_KAFKA_FLUSH_EVERY_MESSAGE:-0}
START_TIMEOUT=${SLUICE_KAFKA_START_TIMEOUT:-120}
NODES=(1 2 3)

[[ $PORT_BASE =~ ^[0-9]+$ && $CONTROLLER_PORT =~ ^[0-9]+$ ]] || die "kafka: SLUICE_KAFKA_PORT_BASE and SLUICE_KAFKA_CONTROLLER_PORT must be port numbers"
[[ $FLUSH_EVERY_MESSAGE == 0 || $FLUSH_EVERY_MESSAGE == 1 ]] || die "kafka: SLUICE_KAFKA_FLUSH_EVERY_MESSAGE must be 0 or 1, not '$FLUSH_EVERY_MESSAGE'"

name() { echo "kafka-$1"; }
port() { echo $((PORT_BASE + $1 - 1)); }
conf() { echo "$DATA/n$1.properties"; }
pid_of() { cat "$(pidfile "$(name "$1")")"; }

brokers() {
  local n out=""
  for n in "${NODES[@]}"; do out+="${out:+,}127.0.0.1:$(port "$n")"; done
  echo "$out"
}

# ours N: node N's pid file names a live process that is that Kafka node (not a reused pid).
ours() {
  is_running "$(name "$1")" || return 1
  ps -o args= -p "$(pid_of "$1")" 2>/dev/null | grep -q -- "kafka.Kafka $(conf "$1")"
}

# exiting N: node N's pid is a zombie (a killed JVM still winding down, ports maybe still open).
exiting() {
  is_running "$(name "$1")" || return 1
  [[ $(ps -o stat= -p "$(pid_of "$1")" 2>/dev/null) == Z* ]]
}

alive() { ours "$1" && ! exiting "$1"; }

# ready N: node N listens and its log says the server finished starting (for a broker that
# means it registered with the controller and was unfenced, so it can take replicas).
ready() {
  tcp_open "$(port "$1")" && grep -q 'Kafka Server started' "$(logfile "$(name "$1")")"
}

# find_java: Kafka 4.x brokers need Java 17 or newer. First suitable of $SLUICE_KAFKA_JAVA,
# $JAVA_HOME, PATH, /usr/lib/jvm/*.
find_java() {
  local c m
  local -a cands=()
  [[ -n ${SLUICE_KAFKA_JAVA:-} ]] && cands+=("$SLUICE_KAFKA_JAVA")
  [[ -n ${JAVA_HOME:-} ]] && cands+=("$JAVA_HOME/bin/java")
  command -v java >/dev/null && cands+=("$(command -v java)")
  cands+=(/usr/lib/jvm/*/bin/java)
  for c in "${cands[@]}"; do
    [[ -x $c ]] || continue
    m=$(java_major "$c")
    if [[ $m =~ ^[0-9]+$ ]] && ((m >= 17)); then
      echo "$c"
      return 0
    fi
    [[ $c == "${SLUICE_KAFKA_JAVA:-}" ]] && die "kafka: $c is Java $m; Kafka $KAFKA_VERSION needs Java 17 or newer"
  done
  die "kafka: no Java 17+ found (Debian: apt-get install openjdk-17-jre-headless; or set SLUICE_KAFKA_JAVA)"
}

install() {
  maven_classpath kafka "$TEMPLATES/pom.xml" "$LIB" "$MARKER" "kafka_2.13-$KAFKA_VERSION.jar" \
    "-Dkafka.version=$KAFKA_VERSION"
}

# render TEMPLATE OUT KEY=VALUE...: copy TEMPLATE to OUT replacing each @KEY@ with VALUE.
render() {
  local tmpl=$1 out=$2 text kv; shift 2
  text=$(<"$tmpl")
  for kv in "$@"; do
    text=${text//"@${kv%%=*}@"/"${kv#*=}"}
  done
  printf '%s\n' "$text" >"$out"
}

# write_config: node properties, regenerated on every `up` (ports, flush policy).
write_config() {
  local n roles listeners flush_line flush_note
  if [[ $FLUSH_EVERY_MESSAGE == 1 ]]; then
    flush_line="log.flush.interval.messages=1"
    flush_note="SLUICE_KAFKA_FLUSH_EVERY_MESSAGE=1: fsync every append before acknowledging it."
  else
    flush_line="# log.flush.interval.messages: Kafka's default (never forced; the OS writes back)"
    flush_note="Kafka's default."
  fi
  mkdir -p "$DATA"
  cp "$TEMPLATES/log4j2.properties" "$DATA/log4j2.properties"
  for n in "${NODES[@]}"; do
    mkdir -p "$DATA/n$n/logs"
    if [[ $n == 1 ]]; then
      roles=broker,controller
      listeners="PLAINTEXT://127.0.0.1:$(port "$n"),CONTROLLER://127.0.0.1:$CONTROLLER_PORT"
    else
      roles=broker
      listeners="PLAINTEXT://127.0.0.1:$(port "$n")"
    fi
    render "$TEMPLATES/server.properties.tmpl" "$(conf "$n")" \
      "NODE_ID=$n" "ROLES=$roles" "LISTENERS=$listeners" "PORT=$(port "$n")" \
      "CONTROLLER_PORT=$CONTROLLER_PORT" "LOG_DIR=$DATA/n$n/data" \
      "FLUSH_LINE=$flush_line" "FLUSH_NOTE=$flush_note"
  done
}

# format JAVA: give the three log dirs one cluster id, once. The controller's address is stored
# in its log by the format (a standalone voter), so a later change of the controller port needs
# a wipe: refuse with a clear message instead of starting a cluster that cannot elect a leader.
format() {
  local java=$1 n id stamp=$DATA/formatted-controller-port
  if [[ -f $stamp ]]; then
    [[ $(cat "$stamp") == "$CONTROLLER_PORT" ]] ||
      die "kafka: data was formatted for controller port $(cat "$stamp"), not $CONTROLLER_PORT; run 'localstack/kafka.sh down --wipe' first"
    return 0
  fi
  log "kafka: formatting log dirs under $DATA"
  rm -rf "$DATA"/n*/data
  id=$("$java" -cp "$LIB/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
  [[ $id =~ ^[A-Za-z0-9_-]{22}$ ]] || die "kafka: StorageTool random-uuid printed '$id', not a cluster id"
  for n in "${NODES[@]}"; do
    local -a extra=()
    [[ $n == 1 ]] && extra=(--standalone)
    "$java" "-Dlog4j2.configurationFile=$DATA/log4j2.properties" -cp "$LIB/*" kafka.tools.StorageTool \
      format "${extra[@]}" -t "$id" -c "$(conf "$n")" >"$DATA/n$n/logs/format.log" 2>&1 ||
      { cat "$DATA/n$n/logs/format.log" >&2; die "kafka: formatting node $n failed"; }
  done
  echo "$id" >"$DATA/cluster-id"
  echo "$CONTROLLER_PORT" >"$stamp"
}

start_node() {
  local java=$1 n=$2
  # The flags bin/kafka-server-start.sh and kafka-run-class.sh would add, made explicit, with a
  # small heap: three brokers share 2 cores with the load generator, and Kafka keeps its data in
  # the page cache, not the heap.
  local -a args=(
    "-Xms$HEAP" "-Xmx$HEAP"
    -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
    -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true
    "-Dlog4j2.configurationFile=$DATA/log4j2.properties"
    "-Dkafka.logs.dir=$DATA/n$n/logs"
    "-XX:ErrorFile=$DATA/n$n/logs/hs_err_%p.log"
    -cp "$LIB/*"
    kafka.Kafka "$(conf "$n")"
  )
  log "kafka: starting node $n on 127.0.0.1:$(port "$n") (log: $(logfile "$(name "$n")"))"
  start_bg "$(name "$n")" "$java" "${args[@]}"
}

up() {
  local n i p java started=0
  local -a todo=()
  for n in "${NODES[@]}"; do
    if alive "$n"; then continue; fi
    # A killed node whose threads are still exiting keeps its ports for a moment: let it go.
    for ((i = 0; i < 300; i++)); do
      exiting "$n" || break
      ((i == 0)) && log "kafka: previous node $n (pid $(pid_of "$n")) is still exiting; waiting"
      sleep 0.1
    done
    rm -f "$(pidfile "$(name "$n")")" "$(pidfile "$(name "$n")").start"
    todo+=("$n")
  done
  if ((${#todo[@]} == 0)); then
    for n in "${NODES[@]}"; do wait_for "$(name "$n")" "$START_TIMEOUT" ready "$n"; done
    log "kafka: already running: $(brokers) (pids $(pids))"
    return 0
  fi
  for n in "${todo[@]}"; do
    for p in "$(port "$n")" $([[ $n == 1 ]] && echo "$CONTROLLER_PORT"); do
      if tcp_open "$p"; then
        die "kafka: 127.0.0.1:$p is taken by a process this stack did not start (set SLUICE_KAFKA_PORT_BASE / SLUICE_KAFKA_CONTROLLER_PORT)"
      fi
    done
  done
  java=$(find_java)
  install
  write_config
  format "$java"
  # Node 1 is the controller; the brokers retry until it answers, so all start at once.
  for n in "${todo[@]}"; do
    start_node "$java" "$n"
    started=$((started + 1))
  done
  for n in "${NODES[@]}"; do wait_for "$(name "$n")" "$START_TIMEOUT" ready "$n"; done
  log "kafka: $KAFKA_VERSION up: $(brokers) (pids $(pids); flush every message: $FLUSH_EVERY_MESSAGE; started $started)"
}

down() {
  local n
  # Brokers first, the controller last, so the brokers shut down cleanly through it.
  for n in 3 2 1; do
    # A stale pid file (node gone, pid maybe reused) must not make stop_pid signal a stranger.
    if ! ours "$n" && ! exiting "$n"; then rm -f "$(pidfile "$(name "$n")")" "$(pidfile "$(name "$n")").start"; fi
    stop_pid "$(name "$n")"
  done
  if [[ ${1:-} == --wipe ]]; then
    log "kafka: removing data $DATA"
    rm -rf -- "$DATA"
  fi
}

status() {
  local n bad=0 flush
  flush=$(grep -q '^log.flush.interval.messages=1' "$(conf 1)" 2>/dev/null && echo "flush every message" || echo "default flush")
  for n in "${NODES[@]}"; do
    if alive "$n" && ready "$n"; then
      echo "kafka-$n: running (pid $(pid_of "$n")) 127.0.0.1:$(port "$n"), $flush"
    elif alive "$n"; then
      echo "kafka-$n: running (pid $(pid_of "$n")) 127.0.0.1:$(port "$n"), not ready (starting or stuck; log: $(logfile "$(name "$n")"))"
      bad=1
    else
      echo "kafka-$n: stopped (port $(port "$n"))"
      bad=1
    fi
  done
  return $bad
}

pids() {
  local n out=""
  for n in "${NODES[@]}"; do
    alive "$n" || die "kafka: node $n is not running (localstack/kafka.sh up)"
    out+="${out:+,}$(pid_of "$n")"
  done
  echo "$out"
}

case ${1:-} in
  install) install ;;
  up) up ;;
  down) down "${2:-}" ;;
  status) status ;;
  brokers) brokers ;;
  pids) pids ;;
  env) echo "export SLUICE_TEST_KAFKA=$(brokers)" ;;
  *) echo "usage: $0 install | up | down [--wipe] | status | brokers | pids | env" >&2; exit 2 ;;
esac
