#!/usr/bin/env bash
# Makes link/pgo.profdata, the execution profile optimised builds read (docs/cli.md#build): builds
# the bridge instrumented (-Cprofile-generate, in target/pgo/), runs it as bench_e2e's bridge
# under a stream of 5,000 events/s with commands, then as a big site's (scripts/big_site.sh:
# start-up of 100 × 250 units with datapoints, Home Assistant's birth, a command, the web page),
# and merges what the runs counted. Run it again when the code on the event path changes much,
# or with a new toolchain (link/pgo-llvm.txt names the LLVM the profile is for); then
# scripts/hot_functions.sh, whose list names the functions of the optimised build.
#
#   scripts/pgo_profile.sh     about 25 minutes on two cores (three release builds)
#
# Needs llvm-profdata of rustc's LLVM (apt-get install llvm-N, or rustup component add
# llvm-tools) and mosquitto.
set -euo pipefail
cd "$(dirname "$0")/.."
llvm=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
host=$(rustc -vV | sed -n 's/^host: //p')
profdata=""
for candidate in "llvm-profdata-$llvm" "/usr/lib/llvm-$llvm/bin/llvm-profdata" \
  "$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"; do
  if command -v "$candidate" >/dev/null 2>&1; then
    profdata=$candidate
    break
  fi
done
[ -n "$profdata" ] || { echo "pgo_profile: llvm-profdata of LLVM $llvm is missing (apt-get install llvm-$llvm)" >&2; exit 1; }

# The simulator and bench_e2e as usual, then the instrumented bridge, each built on its own: the
# profile names functions by their symbols, and those of a binary built beside an example differ
# (the dev-dependencies' features). Building the bridge runs its build scripts and procedural
# macros instrumented too; what they count is dropped before the runs.
cargo build --release --locked --bin casambi2mqtt
cargo build --release --locked --example bench_e2e
raw=$PWD/target/pgo/raw
RUSTFLAGS="-Cprofile-generate=$raw" cargo build --release --locked --bin casambi2mqtt --target-dir target/pgo
rm -rf "$raw"
bridge=$PWD/target/pgo/release/casambi2mqtt

BENCH_BRIDGE_BIN=$bridge target/release/examples/bench_e2e \
  --rate 5000 --seconds 30 --runs 1 --bursts 1 --ceiling 0 --commands 20 --max-load 2
scripts/big_site.sh 60 "$bridge"

"$profdata" merge --sparse -o link/pgo.profdata "$raw"
echo "$llvm" >link/pgo-llvm.txt
echo "pgo_profile: link/pgo.profdata ($(wc -c <link/pgo.profdata) bytes) for LLVM $llvm"
# Cargo does not see the profile among a dependency's inputs: only a clean build reads it.
cargo clean --release
echo "pgo_profile: target/release removed; the next release build reads the new profile"
