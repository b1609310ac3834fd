#!/usr/bin/env bash
# Makes link/hot-functions.txt, the functions the release link places first (build.rs): runs the
# release binary under callgrind as a big site's bridge (scripts/big_site.sh), then lists every
# function of the binary that ran, the busiest first. Run it again when the toolchain,
# Cargo.lock, the dependencies or the execution profile (scripts/pgo_profile.sh, which comes
# first) change (CI's scripts/check_hot_functions.sh says when): the list names functions by
# their symbols, which change with them (docs/cli.md#build).
#
#   scripts/hot_functions.sh            about 5 minutes after the release build
#   SECONDS_UNDER_PROFILER=N scripts/hot_functions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
run_for=${SECONDS_UNDER_PROFILER:-200}
command -v valgrind >/dev/null || { echo "hot_functions: valgrind is missing" >&2; exit 1; }
cargo build --release --locked --bin casambi2mqtt
bin=$PWD/target/release/casambi2mqtt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
scripts/big_site.sh "$run_for" "$bin" valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" \
  --dump-instr=no --compress-strings=no --compress-pos=no --demangle=no

python3 - "$work/callgrind.out" "$bin" >link/hot-functions.txt <<'PY'
import subprocess, sys
profile, binary = sys.argv[1], sys.argv[2]
cost, obj, fn = {}, None, None
for line in open(profile):
    if line.startswith("ob="):
        obj = line[3:].strip()
    elif line.startswith("fn="):
        # A name ending in 'N is callgrind's N-th level of a recursion: the same function.
        fn = line[3:].strip().split("'")[0] if obj == binary else None
        if fn:
            cost.setdefault(fn, 0)
    elif fn and line[:1].isdigit():
        fields = line.split()
        cost[fn] += int(fields[1]) if len(fields) > 1 else 0
symbols = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
code = {parts[2] for parts in map(str.split, symbols.splitlines()) if len(parts) == 3 and parts[1] in "tTwW"}
ran = sorted((f for f in cost if f in code), key=lambda f: (-cost[f], f))
print("# The functions a big site's bridge ran, by the instructions run in them and in what they")
print("# call, most first: the release link places them together (build.rs). Made by")
print("# scripts/hot_functions.sh; do not edit.")
print("\n".join(ran))
PY
echo "hot_functions: $(grep -vc '^#' link/hot-functions.txt) functions in link/hot-functions.txt"
