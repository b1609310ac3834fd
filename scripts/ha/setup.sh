#!/usr/bin/env bash
# Installs Home Assistant into a virtual environment for the end-to-end tests
# (tests/homeassistant_e2e.rs, docs/homeassistant.md#checked-by-home-assistant).
#
# Usage: scripts/ha/setup.sh [VENV]   (prints the venv's path on stdout, progress on stderr)
#
# The default VENV, $XDG_CACHE_HOME/casambi2mqtt/ha-venv-<version> (~/.cache/…), outlives a
# clone, so a machine installs Home Assistant once; the tests look there when
# CASAMBI2MQTT_HA_VENV is unset.
#
# Idempotent: a venv that already holds the pinned version is left as it is. Needs a Python of at
# least 3.13 on the machine (python3.13, python3, or a pyenv build) and network access to PyPI.
set -euo pipefail
cd "$(dirname "$0")/../.."

HA_VERSION=2026.2.3
VENV=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/casambi2mqtt/ha-venv-$HA_VERSION}
mkdir -p "$(dirname "$VENV")"
VENV=$(cd "$(dirname "$VENV")" && pwd)/$(basename "$VENV")

ready() {
  [ -x "$VENV/bin/hass" ] && "$VENV/bin/python" - "$HA_VERSION" <<'PY' 2>/dev/null
import sys
import homeassistant.const as c
import paho.mqtt  # the MQTT integration's requirement, installed below
sys.exit(c.__version__ != sys.argv[1])
PY
}

if ready; then
  echo "Home Assistant $HA_VERSION already in $VENV" >&2
  echo "$VENV"
  exit 0
fi

# The newest Python >= 3.13 the machine has: on PATH, or built by pyenv.
python=""
best=""
for cand in python3.14 python3.13 python3 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[3-9]*/bin/python3; do
  command -v "$cand" >/dev/null 2>&1 || continue
  v=$("$cand" -c 'import sys; print("%d.%03d.%03d" % sys.version_info[:3]) if sys.version_info >= (3, 13) else None' 2>/dev/null || true)
  case "$v" in ''|None) continue ;; esac
  if [ -z "$best" ] || [[ "$v" > "$best" ]]; then best=$v; python=$cand; fi
done
if [ -z "$python" ]; then
  echo "scripts/ha/setup.sh: no Python >= 3.13 found (python3.13 on PATH or a pyenv build)" >&2
  exit 1
fi
echo "Installing Home Assistant $HA_VERSION into $VENV with $python ($best)" >&2

[ -x "$VENV/bin/python" ] || "$python" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check --upgrade pip >&2
# Home Assistant's metadata asks for a newer patch release of 3.13 than some machines can get;
# its discovery and MQTT code do not depend on it.
"$VENV/bin/pip" install --quiet --disable-pip-version-check --ignore-requires-python "homeassistant==$HA_VERSION" >&2

# The same relaxation for Home Assistant's own start-up check: the minimum becomes the running
# interpreter's version when that is lower.
"$VENV/bin/python" - <<'PY' >&2
import pathlib, re, sys
import homeassistant
const = pathlib.Path(homeassistant.__file__).with_name("const.py")
text = const.read_text()
pattern = re.compile(r"^(REQUIRED_PYTHON_VER: Final\[tuple\[int, int, int\]\] = )\((\d+), (\d+), (\d+)\)", re.M)
m = pattern.search(text)
if m is None:
    sys.exit("REQUIRED_PYTHON_VER not found in " + str(const))
required = tuple(int(x) for x in m.groups()[1:])
running = tuple(sys.version_info[:3])
if running < required:
    text = pattern.sub(lambda m: m.group(1) + repr(running), text, count=1)
    const.write_text(text)
    print("lowered REQUIRED_PYTHON_VER from", required, "to", running)
PY

# The requirements of the integrations the tests load, installed now rather than by Home
# Assistant at its first start (which the tests run with --skip-pip).
mapfile -t reqs < <("$VENV/bin/python" scripts/ha/headless.py requirements)
if [ ${#reqs[@]} -gt 0 ]; then
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "${reqs[@]}" >&2
fi

ready || { echo "scripts/ha/setup.sh: Home Assistant $HA_VERSION did not install into $VENV" >&2; exit 1; }
echo "$VENV"
