#!/usr/bin/env bash
# Timed runs of one hot-path stage, each pinned to one CPU (taking the machine's CPUs in turn),
# with the spread BENCHMARKS.md reports: per run the time and divan's fastest sample and median,
# then min / median / max over the runs. The runs are timestamped because on a shared virtual
# machine the speed changes in phases of seconds (BENCHMARKS.md, "Hot path → The slow phases are
# the host's"), and a run's median says which phase it ran in.
#
#   scripts/bench_hot_path.sh [RUNS] [STAGE] [PAUSE]
#
# RUNS defaults to 9 (odd, so the median is a run), STAGE to pipeline_changed (any benchmark of
# benches/hot_path.rs), PAUSE (seconds between runs) to 1. Needs `taskset` (util-linux).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-9}
stage=${2:-pipeline_changed}
pause=${3:-1}
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "RUNS must be a whole number of at least 1, got '$runs'" >&2; exit 2; }
[[ "$pause" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "PAUSE must be a number of seconds, got '$pause'" >&2; exit 2; }
command -v taskset >/dev/null || { echo "taskset is needed (util-linux)" >&2; exit 1; }
bin=$(scripts/hot_path_bin.sh)
cpus=$(nproc)
results=$(mktemp)
trap 'rm -f "$results"' EXIT
echo "stage $stage, $runs runs of 1,000 samples, pinned; µs per frame"
for i in $(seq 1 "$runs"); do
  cpu=$(( (i - 1) % cpus ))
  # divan's line for the stage: name, fastest, slowest, median, mean (each a value and a unit).
  line=$(taskset -c "$cpu" "$bin" --bench --exact "hot_path::$stage" --sample-count 1000 2>/dev/null | grep -E "[─ ]$stage " || true)
  [ -n "$line" ] || { echo "no result for stage $stage" >&2; exit 1; }
  # One line per run on the terminal, and "fastest median" in $results for the spread below.
  echo "$line" | awk -v s="$stage" -v run="$i" -v cpu="$cpu" -v at="$(date +%T)" -v out="$results" '
    function us(v, u) { return u == "ns" ? v / 1000 : (u == "ms" ? v * 1000 : v) }
    { for (i = 1; i <= NF; i++) if ($i == s) break
      fastest = us($(i + 1), $(i + 2)); median = us($(i + 7), $(i + 8))
      printf "run %2d  cpu %d  %s  fastest %.3f  median %.3f  (%.0f frames/s)\n", run, cpu, at, fastest, median, 1e6 / median
      print fastest, median >> out }'
  [ "$i" -eq "$runs" ] || sleep "$pause"
done
# min / median / max of one column of the results (1: fastest sample, 2: median of a run).
spread() {
  sort -n -k"$1" "$results" | awk -v c="$1" -v label="$2" '{ v[NR] = $c }
    END { mid = v[int((NR + 1) / 2)]
      printf "%s min / median / max: %.3f / %.3f / %.3f µs (%.0f / %.0f / %.0f frames/s)\n",
        label, v[1], mid, v[NR], 1e6 / v[1], 1e6 / mid, 1e6 / v[NR] }'
}
spread 2 "median of a run"
spread 1 "fastest sample "
