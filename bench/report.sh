#!/usr/bin/env bash
# bench/report.sh OUT_DIR: runs bench/report.py with matplotlib from a virtualenv under .cache
# (created on first use, pinned version).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.cache/bench-venv
if ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "matplotlib==3.11.2"
fi
"$venv/bin/python" bench/report.py "$1"
