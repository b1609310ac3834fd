#!/usr/bin/env bash
# Writes a CycloneDX 1.5 JSON SBOM of the bridge (casambi2mqtt.cdx.json) and validates it
# against the CycloneDX schema. Ready for upload to an SBOM analysis service's
# `POST /api/v1/bom` (e.g. as the `bom` field of a multipart form).
#
# Needs: cargo-cyclonedx (`cargo install cargo-cyclonedx --locked`) and, for the validation,
# Python with `pip install "cyclonedx-python-lib[json-validation]"`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo cyclonedx --format json --spec-version 1.5 --override-filename casambi2mqtt.cdx
python3 - <<'PY'
import json, sys
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
text = open("casambi2mqtt.cdx.json").read()
error = JsonStrictValidator(SchemaVersion.V1_5).validate_str(text)
if error is not None:
    sys.exit(f"casambi2mqtt.cdx.json is not valid CycloneDX 1.5: {error}")
bom = json.loads(text)
print(f"casambi2mqtt.cdx.json: valid CycloneDX {bom['specVersion']}, {len(bom.get('components', []))} components")
PY
