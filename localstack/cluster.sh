#!/usr/bin/env bash
# cluster.sh up|down|status|pids [flags] — Sluice as separate processes on the local stack.
#
#   up      start the stack (localstack/stack.sh up) if needed, build the sluice binary, then start
#           3 bookies, 2 ingest, 1 fetch and 1 compactor process (flags: --bookies N --ingests N
#           --fetches N --compactors 0|1 --base-port P --pprof ...; see `cluster.sh up --help`),
#           wait until each serves, and print their addresses. Run it again after a process died:
#           it starts the missing ones with the same flags and data.
#   down    stop the processes it started (--wipe: also delete their table, keyspace and data)
#   status  one line per process; exits non-zero when any is down
#   pids    name=pid,... of the running processes (sluice bench --server-pids); `pids NAME`: one pid
#
# Processes, flags and start order: harness/localcluster (the integration tests, bench/compare.sh
# and the chaos harness start theirs from the same plan). Folder: $SLUICE_CLUSTER_DIR (default
# .stack/cluster): cluster.json (what runs), data/<process>/, log/<process>.log.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SLUICE_CLUSTER_DIR=${SLUICE_CLUSTER_DIR:-$SLUICE_STACK_DIR/cluster}
BIN_DIR=$SLUICE_CACHE_DIR/bin

# build PKG NAME: go build into the cache (atomically: a running process keeps its old binary).
build() {
  mkdir -p "$BIN_DIR"
  (cd "$STACK_REPO" && go build -o "$BIN_DIR/$2.new" "$1") || die "go build $1 failed"
  mv -f "$BIN_DIR/$2.new" "$BIN_DIR/$2"
}

ctl() { "$BIN_DIR/clusterctl" "$@" --dir "$SLUICE_CLUSTER_DIR"; }

cmd=${1:-}
[[ $# -gt 0 ]] && shift
case $cmd in
  up)
    for a in "$@"; do [[ $a == -h || $a == --help ]] && { build ./harness/clusterctl clusterctl; ctl up --help; exit 0; }; done
    bash "$STACK_REPO/localstack/stack.sh" up >&2
    eval "$(bash "$STACK_REPO/localstack/stack.sh" env)"
    log "building sluice and clusterctl"
    build ./cmd/sluice sluice
    build ./harness/clusterctl clusterctl
    ctl up --bin "$BIN_DIR/sluice" "$@"
    log "cluster up; logs in $SLUICE_CLUSTER_DIR/log; stop it with: localstack/cluster.sh down"
    ;;
  down | status | pids)
    if [[ ! -f $SLUICE_CLUSTER_DIR/cluster.json ]]; then
      [[ $cmd == down ]] && { log "no cluster was started from $SLUICE_CLUSTER_DIR"; exit 0; }
      die "no cluster was started from $SLUICE_CLUSTER_DIR (localstack/cluster.sh up)"
    fi
    build ./harness/clusterctl clusterctl # cheap when cached; never a stale tool
    if [[ $cmd == down ]]; then
      # --wipe drops the keyspace and the table: it needs the stack's addresses.
      eval "$(bash "$STACK_REPO/localstack/stack.sh" env)"
    fi
    ctl "$cmd" "$@"
    ;;
  *) echo "usage: $0 up|down|status|pids [flags]   (up --help for up's flags)" >&2; exit 2 ;;
esac
