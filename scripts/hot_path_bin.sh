#!/usr/bin/env bash
# Builds benches/hot_path.rs (release profile, as `cargo bench` does) and prints the path of its
# executable. Shared by the scripts that run that benchmark outside `cargo bench`. Built without
# the execution profile (link/rustc-with-profile), so that the hot path's counts follow the code
# and not the profile, in a target directory of its own: Cargo does not see the wrapper among a
# crate's inputs, and would reuse crates built with the profile.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(RUSTC_WRAPPER= cargo bench --bench hot_path --target-dir "${CARGO_TARGET_DIR:-target}/hot-path" --no-run --message-format=json 2>/dev/null \
  | sed -n 's/.*"executable":"\([^"]*hot_path[^"]*\)".*/\1/p' | tail -1)
[ -x "$bin" ] || { echo "could not build benches/hot_path.rs" >&2; exit 1; }
echo "$bin"
