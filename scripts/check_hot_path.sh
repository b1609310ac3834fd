#!/usr/bin/env bash
# Guards the hot path against regressions: counts the instructions of one changed frame through
# the whole pipeline (parse, merge, diff, render, store) with scripts/bench_instructions.sh and
# fails when the count is more than 5 % above the baseline. An instruction count, unlike a time,
# does not move with the machine's load, so the guard can run on a shared CI machine.
#
#   scripts/check_hot_path.sh            check against the baseline below
#   BASELINE=N scripts/check_hot_path.sh check against N instead
#
# Raise the baseline only in a commit that says why the hot path costs more.
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=${BASELINE:-31553}
# Five per cent: the count moves by a few hundred instructions with the compiler's inlining
# choices when unrelated code changes; a real regression on this path is larger.
limit=$(( baseline * 105 / 100 ))
count=$(scripts/bench_instructions.sh pipeline_changed | awk '$1 == "pipeline_changed" { print $2 }')
[ -n "$count" ] || { echo "hot-path guard: no count from scripts/bench_instructions.sh" >&2; exit 1; }
change=$(awk -v c="$count" -v b="$baseline" 'BEGIN { printf "%+.1f", (c - b) * 100 / b }')
if [ "$count" -gt "$limit" ]; then
  echo "hot-path guard: FAILED: pipeline_changed costs $count instructions per frame, baseline $baseline ($change %), limit $limit" >&2
  exit 1
fi
echo "hot-path guard: ok: pipeline_changed costs $count instructions per frame, baseline $baseline ($change %), limit $limit"
