#!/usr/bin/env bash
# cassandra.sh up|down [--wipe]|status — a real one-node Apache Cassandra 5.0 on 127.0.0.1, without Docker.
#
# There is no tarball download: `up` resolves org.apache.cassandra:cassandra-all and its runtime
# closure with Maven once (cached under $SLUICE_CACHE_DIR/cassandra/lib, the same jars as the
# release's lib/), renders the config templates in localstack/cassandra/ into
# $SLUICE_STACK_DIR/data/cassandra/conf, starts CassandraDaemon in the foreground under start_bg and
# waits until the native port answers a CQL OPTIONS frame. Data survives `down`; `down --wipe`
# deletes it.
#
# Environment: SLUICE_CASSANDRA_PORT (9042), SLUICE_CASSANDRA_STORAGE_PORT (7000),
# SLUICE_CASSANDRA_JMX_PORT (7199), SLUICE_CASSANDRA_START_TIMEOUT (180),
# SLUICE_CASSANDRA_HEAP (1G), SLUICE_CASSANDRA_JAVA (a Java 11 or 17 `java`; found if unset),
# SLUICE_CASSANDRA_JVM_OPTS (extra JVM flags, space-separated, e.g. GC settings to try).
# GC pauses are logged to DATA/logs/gc.log (with wall-clock times, to line up with traces).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NAME=cassandra
CASSANDRA_VERSION=5.0.8 # keep in step with localstack/cassandra/pom.xml
TEMPLATES=$STACK_REPO/localstack/cassandra
JAR_DIR=$SLUICE_CACHE_DIR/cassandra
LIB=$JAR_DIR/lib
MARKER=$LIB/.complete-$CASSANDRA_VERSION
DATA=$SLUICE_STACK_DIR/data/cassandra
CONF=$DATA/conf
START_TIMEOUT=${SLUICE_CASSANDRA_START_TIMEOUT:-180}
HEAP=${SLUICE_CASSANDRA_HEAP:-1G}
PORT=$SLUICE_CASSANDRA_PORT

# cql_answers: the native port replies to a CQL v4 OPTIONS request (header 04 00 0000 05, empty
# body) with a v4 response (0x84) carrying opcode SUPPORTED (0x06). A bare TCP connect is not
# enough: Cassandra may accept connections before it serves requests.
cql_answers() {
  local reply b
  # shellcheck disable=SC2016 # $1 expands in the child shell, on purpose
  reply=$(timeout 3 bash -c '
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf "\x04\x00\x00\x00\x05\x00\x00\x00\x00" >&3
    head -c 5 <&3 | od -An -tx1' _ "$PORT" 2>/dev/null) || return 1
  read -r -a b <<<"$reply"
  [[ ${#b[@]} -eq 5 && ${b[0]} == 84 && ${b[4]} == 06 ]]
}

# ours: our pid file names a live process that is a Cassandra node (not a reused pid after a
# reboot or crash, which stop_pid would otherwise signal).
ours() {
  is_running "$NAME" || return 1
  ps -o args= -p "$(cat "$(pidfile "$NAME")")" 2>/dev/null | grep -q CassandraDaemon
}

# exiting: the pid in our pid file is a zombie. A SIGKILLed JVM stays one for a moment while its
# other threads wind down and still holds its ports; kill -0 (is_running) succeeds on it.
exiting() {
  is_running "$NAME" || return 1
  [[ $(ps -o stat= -p "$(cat "$(pidfile "$NAME")")" 2>/dev/null) == Z* ]]
}

# alive: ours and not on its way out.
alive() { ours && ! exiting; }

# find_java: Cassandra 5.0 runs on Java 11 or 17 only (a newer default JDK, e.g. 25, fails), so
# take the first suitable one of: $SLUICE_CASSANDRA_JAVA, $JAVA_HOME, PATH, /usr/lib/jvm/*.
find_java() {
  local c m
  local -a cands=()
  [[ -n ${SLUICE_CASSANDRA_JAVA:-} ]] && cands+=("$SLUICE_CASSANDRA_JAVA")
  [[ -n ${JAVA_HOME:-} ]] && cands+=("$JAVA_HOME/bin/java")
  command -v java >/dev/null && cands+=("$(command -v java)")
  cands+=(/usr/lib/jvm/*17*/bin/java /usr/lib/jvm/*11*/bin/java)
  for c in "${cands[@]}"; do
    [[ -x $c ]] || continue
    m=$(java_major "$c")
    if [[ $m == 17 || $m == 11 ]]; then
      echo "$c"
      return 0
    fi
    [[ $c == "${SLUICE_CASSANDRA_JAVA:-}" ]] && die "cassandra: $c is Java $m; Cassandra 5.0 needs Java 11 or 17"
  done
  die "cassandra: no Java 11 or 17 found (Debian: apt-get install openjdk-17-jre-headless; or set SLUICE_CASSANDRA_JAVA)"
}

# ensure_jars: copy cassandra-all's runtime classpath (the release's lib/) into $LIB once.
ensure_jars() {
  maven_classpath cassandra "$TEMPLATES/pom.xml" "$LIB" "$MARKER" "cassandra-all-$CASSANDRA_VERSION.jar" \
    "-Dcassandra.version=$CASSANDRA_VERSION"
}

# render TEMPLATE OUT KEY=VALUE...: copy TEMPLATE to OUT replacing each @KEY@ with VALUE (plain
# bash substitution: no sed escaping issues with paths).
render() {
  local tmpl=$1 out=$2 text kv; shift 2
  text=$(<"$tmpl")
  for kv in "$@"; do
    text=${text//"@${kv%%=*}@"/"${kv#*=}"}
  done
  printf '%s\n' "$text" >"$out"
}

# write_config: regenerate conf/ on every `up` (cheap; picks up port changes and template edits).
write_config() {
  mkdir -p "$CONF/triggers" "$DATA/data" "$DATA/commitlog" "$DATA/saved_caches" "$DATA/hints" "$DATA/cdc_raw" "$DATA/logs"
  render "$TEMPLATES/cassandra.yaml.tmpl" "$CONF/cassandra.yaml" \
    "DATA_DIR=$DATA" "CQL_PORT=$PORT" "STORAGE_PORT=$SLUICE_CASSANDRA_STORAGE_PORT"
  cp "$TEMPLATES/logback.xml" "$CONF/logback.xml"
}

up() {
  if alive; then
    if cql_answers; then
      log "cassandra: already running (pid $(cat "$(pidfile "$NAME")")) on 127.0.0.1:$PORT"
      return 0
    fi
    # Started by an earlier `up` that is still booting (or was interrupted while waiting).
    wait_for "$NAME" "$START_TIMEOUT" cql_answers
    return 0
  fi
  # A killed node whose threads are still exiting keeps its ports open for a moment: let it go.
  local i p
  for ((i = 0; i < 300; i++)); do
    exiting || break
    if ((i == 0)); then log "cassandra: previous node (pid $(cat "$(pidfile "$NAME")")) is still exiting; waiting"; fi
    sleep 0.1
  done
  rm -f "$(pidfile "$NAME")"
  for p in "$PORT" "$SLUICE_CASSANDRA_STORAGE_PORT" "$SLUICE_CASSANDRA_JMX_PORT"; do
    if tcp_open "$p"; then
      die "cassandra: 127.0.0.1:$p is taken by a process this stack did not start (set SLUICE_CASSANDRA_PORT / _STORAGE_PORT / _JMX_PORT)"
    fi
  done

  local java
  java=$(find_java)
  ensure_jars
  write_config

  local jamm
  jamm=$(find "$LIB" -maxdepth 1 -name 'jamm-*.jar' | head -n 1)
  [[ -n $jamm ]] || die "cassandra: jamm agent jar missing in $LIB (delete $LIB and retry)"

  # Flags the stock bin/cassandra + cassandra-env.sh would add, made explicit. We do not use
  # bin/cassandra (not in the Maven artifact); its root check does not exist in CassandraDaemon,
  # so this runs as root and as a normal user alike.
  local -a args=(
    "@$TEMPLATES/jvm17-server.options"
    "-Xms$HEAP" "-Xmx$HEAP"
    "-javaagent:$jamm" # Cassandra measures memtable sizes with jamm; start-up fails without it.
    -Dcassandra-foreground=yes
    "-Dcassandra.config=file://$CONF/cassandra.yaml"
    "-Dcassandra.storagedir=$DATA"
    "-Dcassandra.logdir=$DATA/logs"
    "-Dcassandra.triggers_dir=$CONF/triggers" # else a warning on every schema change
    "-Dlogback.configurationFile=$CONF/logback.xml"
    "-Dcassandra.jmx.local.port=$SLUICE_CASSANDRA_JMX_PORT" # JMX on localhost only
    -Dcassandra.skip_wait_for_gossip_to_settle=0 # one node: no gossip to wait for
    -Dcassandra.unsafesystem=true                # no fsync for system tables: faster schema changes
    "-XX:ErrorFile=$DATA/logs/hs_err_%p.log"
    "-Xlog:gc:file=$DATA/logs/gc.log:time,uptime:filecount=3,filesize=10m"
    -cp "$CONF:$LIB/*"
    org.apache.cassandra.service.CassandraDaemon
  )
  if [[ -n ${SLUICE_CASSANDRA_JVM_OPTS:-} ]]; then
    local -a extra
    read -r -a extra <<< "$SLUICE_CASSANDRA_JVM_OPTS"
    args=("${extra[@]}" "${args[@]}")
  fi
  log "cassandra: starting $CASSANDRA_VERSION on 127.0.0.1:$PORT with $java (log: $(logfile "$NAME"))"
  start_bg "$NAME" "$java" "${args[@]}"
  wait_for "$NAME" "$START_TIMEOUT" cql_answers
  log "cassandra: up on 127.0.0.1:$PORT (pid $(cat "$(pidfile "$NAME")"))"
}

down() {
  # A stale pid file (node gone, pid maybe reused) must not make stop_pid signal a stranger.
  if ! ours && ! exiting; then rm -f "$(pidfile "$NAME")"; fi
  stop_pid "$NAME"
  if [[ ${1:-} == --wipe ]]; then
    log "cassandra: removing data $DATA"
    rm -rf -- "$DATA"
  fi
}

status() {
  local pid
  if alive; then
    pid=$(cat "$(pidfile "$NAME")")
    if cql_answers; then
      echo "cassandra: running (pid $pid) 127.0.0.1:$PORT, CQL answers"
      return 0
    fi
    echo "cassandra: running (pid $pid) 127.0.0.1:$PORT, CQL not answering (starting or stuck; log: $(logfile "$NAME"))"
    return 1
  fi
  echo "cassandra: stopped (port $PORT)"
  return 1
}

case ${1:-} in
  up) up ;;
  down) down "${2:-}" ;;
  status) status ;;
  *) echo "usage: $0 up | down [--wipe] | status" >&2; exit 2 ;;
esac
