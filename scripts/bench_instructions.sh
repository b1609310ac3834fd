#!/usr/bin/env bash
# Instructions per frame of the hot-path benchmarks, counted by valgrind (cachegrind) instead of
# timed: the count does not move with the machine's load or the hypervisor's stolen time, so two
# versions of the code compare on a noisy machine.
#
#   scripts/bench_instructions.sh [BENCH...]     (default: every stage of benches/hot_path.rs)
#
# Each stage runs twice under cachegrind, with 20 and 40 samples of 500 iterations; the difference
# divided by 10,000 is the cost of one iteration, without the harness's start-up and fixtures. It
# includes divan's allocation counting (a few instructions per allocation), as the timed runs do.
# A stage is picked by its exact name: divan's filter is otherwise a pattern, and `render` would
# also run `render_cold` (the `render` figures before this script said so were the two summed).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install -y valgrind)" >&2; exit 1; }
bin=$(scripts/hot_path_bin.sh)
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(parse diff_unchanged diff_changed render render_cold scene_one_by_one scene_together pipeline_unchanged pipeline_changed)
count() {
  valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
    "$bin" --bench --exact "hot_path::$1" --sample-count "$2" --sample-size 500 2>&1 >/dev/null \
    | sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' | tr -d ,
}
printf '%-20s %s\n' stage instructions/frame
for b in "${benches[@]}"; do
  small=$(count "$b" 20)
  big=$(count "$b" 40)
  printf '%-20s %d\n' "$b" $(( (big - small) / 10000 ))
done
