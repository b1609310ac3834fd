#!/usr/bin/env bash
# Builds benches/hot_path.rs (release profile, as `cargo bench` does) and prints the path of its
# executable. Shared by the scripts that run that benchmark outside `cargo bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(cargo bench --bench hot_path --no-run --message-format=json 2>/dev/null \
  | sed -n 's/.*"executable":"\([^"]*hot_path[^"]*\)".*/\1/p' | tail -1)
[ -x "$bin" ] || { echo "could not build benches/hot_path.rs" >&2; exit 1; }
echo "$bin"
