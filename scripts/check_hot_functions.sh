#!/usr/bin/env bash
# Checks the release binary's code layout and execution profile (docs/cli.md#build): most
# functions of link/hot-functions.txt are functions of the binary, the linker placed them
# together, and most of them still match link/pgo.profdata. Fails when the list went stale (a new
# toolchain, an updated Cargo.lock: run scripts/hot_functions.sh), when the build did not hand it
# to the linker, or when the code changed under the profile (run scripts/pgo_profile.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# LLVM names each function whose control flow no longer matches its counts in the profile, when
# the wrapper lets it (CASAMBI2MQTT_PGO_WARN). The bridge's two crates are compiled again so that
# they are named now, not replayed from an earlier build that had them unnamed; the dependencies
# change only with Cargo.lock, which renames their functions rather than changing them.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
touch src/lib.rs src/main.rs
CASAMBI2MQTT_PGO_WARN=1 cargo build --release --locked --bin casambi2mqtt 2>"$log" || { cat "$log" >&2; exit 1; }
grep -v -e "hash mismatch" -e "^$" "$log" >&2 || true
python3 - link/hot-functions.txt target/release/casambi2mqtt "$log" <<'PY'
import re, subprocess, sys
listed = [l.strip() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
changed = set(re.findall(r"hash mismatch\) (\S+)", open(sys.argv[3]).read()))
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
hot_changed = [name for name in listed if name in changed]
print(f"execution profile: {len(changed)} functions changed since it was made, "
      f"{len(hot_changed)} of them hot ({len(hot_changed) / max(len(listed), 1):.0%} of the list)")
for name in hot_changed[:20]:
    print(f"  {name}")
# The same tenth: a few hot functions edited since is the normal course of work; more means the
# shipped build no longer runs as profiled.
if len(hot_changed) > 0.1 * len(listed):
    sys.exit("execution profile: FAILED: the code changed under it; make it again with scripts/pgo_profile.sh")
PY
