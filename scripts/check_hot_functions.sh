#!/usr/bin/env bash
# Checks the release binary's code layout (docs/cli.md#build): most functions of
# link/hot-functions.txt are functions of the binary, and the linker placed them together. Fails
# when the list went stale (a new toolchain, an updated Cargo.lock: run scripts/hot_functions.sh)
# or when the build did not hand it to the linker.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin casambi2mqtt
python3 - link/hot-functions.txt target/release/casambi2mqtt <<'PY'
import subprocess, sys
listed = [l.strip() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
nm = subprocess.run(["nm", "-S", "--defined-only", sys.argv[2]], capture_output=True, text=True, check=True).stdout
where = {}
for parts in map(str.split, nm.splitlines()):
    if len(parts) == 4 and parts[2] in "tTwW":
        where[parts[3]] = (int(parts[0], 16), int(parts[1], 16))
found = [where[name] for name in listed if name in where]
share = len(found) / max(len(listed), 1)
size = sum(s for _, s in found)
span = max((a + s for a, s in found), default=0) - min((a for a, _ in found), default=0)
print(f"hot functions: {len(found)} of {len(listed)} listed are in the binary ({share:.0%}), "
      f"{size / 1e6:.2f} MB of code over {span / 1e6:.2f} MB")
# A tenth may go with a small change of the code (a function inlined away); more means the
# symbols changed under the list.
if share < 0.9:
    sys.exit("hot functions: FAILED: the list is stale; make it again with scripts/hot_functions.sh")
# Alignment padding between functions stays well under a fifth of their size.
if span > 1.2 * size:
    sys.exit("hot functions: FAILED: the linker did not place the listed functions together (build.rs)")
PY
