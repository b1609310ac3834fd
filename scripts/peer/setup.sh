#!/usr/bin/env bash
# Installs aiocasambi, the cloud library of the Home Assistant integration before this bridge,
# into a virtual environment for bench_e2e's comparison (`--aiocasambi`, BENCHMARKS.md).
#
# Usage: scripts/peer/setup.sh [VENV]   (prints the venv's Python on stdout, progress on stderr)
#
# The default VENV, $XDG_CACHE_HOME/casambi2mqtt/aiocasambi-venv-<version> (~/.cache/…), outlives
# a clone. Idempotent: a venv that already holds the pinned version is left as it is. Needs
# python3 (3.9 or later) and network access to PyPI.
set -euo pipefail

AIOCASAMBI_VERSION=0.285
VENV=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/casambi2mqtt/aiocasambi-venv-$AIOCASAMBI_VERSION}
mkdir -p "$(dirname "$VENV")"
VENV=$(cd "$(dirname "$VENV")" && pwd)/$(basename "$VENV")

if "$VENV/bin/python" - "$AIOCASAMBI_VERSION" 2>/dev/null <<'PY'; then
import sys
from importlib import metadata
sys.exit(metadata.version("aiocasambi") != sys.argv[1])
PY
  echo "aiocasambi $AIOCASAMBI_VERSION already in $VENV" >&2
  echo "$VENV/bin/python"
  exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "aiocasambi==$AIOCASAMBI_VERSION" >&2
echo "aiocasambi $AIOCASAMBI_VERSION installed in $VENV" >&2
echo "$VENV/bin/python"
