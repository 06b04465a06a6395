#!/usr/bin/env bash
# pyclients.sh install|env — third-party Python clients the integration tests drive Sluice with.
#
#   install  install confluent-kafka[avro,json,protobuf,schemaregistry] once into a venv under
#            $SLUICE_CACHE_DIR/pyclients-venv, every package pinned by pyclients-constraints.txt
#   env      `export SLUICE_TEST_CONFLUENT_PYTHON=<the venv's python>` for the integration tests
#
# Confluent's own client (its SchemaRegistryClient, Avro, Protobuf and JSON Schema serializers) is how the schema
# registry's tests prove that existing serializers work against Sluice unchanged.
#
# Environment: SLUICE_PYTHON (python3).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONFLUENT_VERSION=2.16.1
VENV=$SLUICE_CACHE_DIR/pyclients-venv
CONSTRAINTS=$STACK_REPO/localstack/pyclients-constraints.txt
MARKER=$VENV/.installed-$CONFLUENT_VERSION-$(sha256sum "$CONSTRAINTS" | cut -c1-12)
PYTHON=${SLUICE_PYTHON:-python3}

install() {
  if [[ -f $MARKER && -x $VENV/bin/python ]]; then return 0; fi
  command -v "$PYTHON" >/dev/null || die "pyclients: $PYTHON not found (set SLUICE_PYTHON)"
  local t0=$SECONDS
  if [[ ! -x $VENV/bin/python ]]; then
    log "pyclients: creating venv $VENV"
    "$PYTHON" -m venv "$VENV" || die "pyclients: '$PYTHON -m venv' failed (Debian: apt-get install python3-venv)"
  fi
  log "pyclients: installing confluent-kafka[avro,json,protobuf,schemaregistry]==$CONFLUENT_VERSION into $VENV (once)"
  "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar on \
    -c "$CONSTRAINTS" "confluent-kafka[avro,json,protobuf,schemaregistry]==$CONFLUENT_VERSION" >&2 || die "pyclients: pip install failed"
  "$VENV/bin/python" -c 'from confluent_kafka.schema_registry.avro import AvroSerializer; from confluent_kafka.schema_registry.protobuf import ProtobufSerializer; from confluent_kafka.schema_registry.json_schema import JSONSerializer' ||
    die "pyclients: the installed client does not import"
  touch "$MARKER"
  log "pyclients: installed in $((SECONDS - t0))s"
}

case ${1:-} in
  install) install ;;
  env) echo "export SLUICE_TEST_CONFLUENT_PYTHON=$VENV/bin/python" ;;
  *) echo "usage: $0 install|env" >&2; exit 2 ;;
esac
