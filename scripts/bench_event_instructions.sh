#!/usr/bin/env bash
# The bridge's instructions per event end to end, counted by valgrind (callgrind) in its own
# process while bench_e2e drives it: like bench_instructions.sh for the hot path, a count that does
# not move with the host's load, but of the whole path (WebSocket, core, MQTT client, runtime).
#
#   scripts/bench_event_instructions.sh [RATE] [SHORT] [LONG]   (default: 500 events/s, 10 and 40 s)
#
# Two runs, of SHORT and LONG seconds of events; their difference divided by the events between
# them is the cost of one event without start-up. Under callgrind the bridge runs some fifty times
# slower, so the rate stays low: an event or two a wake-up, not the ~5 of 5,000/s. The total moves
# a few per cent between runs with how events fall into wake-ups and when datapoints are fetched;
# a stage's own figure compares versions better. Callgrind counts a `rep stosb` or `rep movsb`
# once per byte: the WebSocket read buffer's zero-fill (memset, a few KiB a read) counts thousands
# of instructions that take the CPU well under a microsecond. bench_e2e's variables apply (for
# example CASAMBI2MQTT_DATAPOINTS__ENABLED=false). Needs valgrind and mosquitto; builds what it
# runs.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in valgrind callgrind_annotate python3; do
  command -v "$tool" >/dev/null || { echo "$tool is needed (apt-get install -y valgrind python3)" >&2; exit 1; }
done
rate=${1:-500}
short=${2:-10}
long=${3:-40}
[[ "$rate$short$long" =~ ^[0-9]+$ && "$rate" -gt 0 && "$long" -gt "$short" && "$short" -gt 0 ]] \
  || { echo "usage: $0 [RATE] [SHORT] [LONG], whole numbers, RATE > 0, LONG > SHORT > 0" >&2; exit 2; }
# Two builds: built beside an example, the bridge would take the dev-dependencies' features, and
# with them other symbols than the shipped build's, which the code layout and the execution
# profile name (docs/cli.md#build).
cargo build --release --locked --bin casambi2mqtt >&2
cargo build --release --locked --example bench_e2e >&2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# Runs bench_e2e for $1 seconds with the bridge under callgrind; prints the events it injected.
run() {
  BENCH_BRIDGE_BIN=target/release/casambi2mqtt \
    BENCH_BRIDGE_WRAP="valgrind --tool=callgrind --callgrind-out-file=$dir/cg$1.out" \
    target/release/examples/bench_e2e --rate "$rate" --seconds "$1" --runs 1 --bursts 0 --ceiling 0 --commands 0 \
    >"$dir/bench$1.log" 2>&1 || { cat "$dir/bench$1.log" >&2; exit 1; }
  sed -n 's/.*run 1: injected \([0-9]*\) .*/\1/p' "$dir/bench$1.log" | head -1
}
events_short=$(run "$short")
events_long=$(run "$long")
[ -n "$events_short" ] && [ -n "$events_long" ] || { echo "bench_e2e reported no events" >&2; exit 1; }

python3 - "$dir/cg$short.out" "$dir/cg$long.out" $((events_long - events_short)) <<'PY'
import re, subprocess, sys

short_file, long_file, events = sys.argv[1], sys.argv[2], int(sys.argv[3])

def costs(path, inclusive):
    """Instructions by function (demangled name, object file dropped) from callgrind_annotate."""
    out = subprocess.run(
        ["callgrind_annotate", "--threshold=100", f"--inclusive={'yes' if inclusive else 'no'}", path],
        capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(?:\S*?:)?(.*?)(?: \[[^\]]*\])?$", line)
        if m and "PROGRAM TOTALS" not in line:
            table[m.group(2)] = table.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
        elif m:
            table["PROGRAM TOTALS"] = int(m.group(1).replace(",", ""))
    return table

def per_event(inclusive):
    a, b = costs(short_file, inclusive), costs(long_file, inclusive)
    return {k: (v - a.get(k, 0)) / events for k, v in b.items()}

inc = per_event(True)
total = inc.get("PROGRAM TOTALS", 0)
print(f"instructions per event: {total:,.0f} ({events} events between the runs)")
# A stage is the inclusive cost of one function of the optimised build; inlining decides which
# functions are left, so a stage whose function is gone prints as missing, not as nothing.
stages = [
    ("WebSocket task", "casambi2mqtt::cloud::channel::task::run::{{closure}}"),
    ("  frame deserialize", "<casambi2mqtt::cloud::model::frame::_::<impl serde_core::de::Deserialize for "
     "casambi2mqtt::cloud::model::frame::Frame>::deserialize::__Visitor as serde_core::de::Visitor>::visit_map"),
    ("network task", "casambi2mqtt::bridge::network::Supervisor::run::{{closure}}"),
    ("publisher", "casambi2mqtt::mqtt::publisher::Publisher::run::{{closure}}"),
    ("  render a unit's state", "casambi2mqtt::mqtt::plan::unit_state_ops"),
    ("  hand-over to the MQTT client",
     "casambi2mqtt::mqtt::publisher::send::<impl casambi2mqtt::mqtt::publisher::Publisher>::send::{{closure}}"),
    ("MQTT client loop (MQTT 5)", "rumqttc::v5::eventloop::EventLoop::poll::{{closure}}"),
    ("MQTT client loop (3.1.1)", "rumqttc::eventloop::EventLoop::poll::{{closure}}"),
    ("runtime park", "tokio::runtime::driver::Driver::park"),
]
# The bridge speaks one of the two MQTT versions: the other's loop is missing by design.
mqtt_loops = [name for label, name in stages if label.startswith("MQTT client loop")]
for label, name in stages:
    if name in inc:
        print(f"  {label:32} {inc[name]:8,.0f}  {100 * inc[name] / total:5.1f} %")
    elif name not in mqtt_loops or not any(n in inc for n in mqtt_loops):
        print(f"  {label:32}  missing: no function {name[:70]}")
# What no top-level stage holds: other tasks, the runtime's own work between them.
rest = total - sum(inc.get(name, 0) for label, name in stages if not label.startswith(" "))
print(f"  {'elsewhere':32} {rest:8,.0f}  {100 * rest / total:5.1f} %")
print("most instructions of their own:")
own = per_event(False)
for name, v in sorted(own.items(), key=lambda kv: -kv[1])[:15]:
    if name != "PROGRAM TOTALS":
        print(f"  {v:8,.0f}  {100 * v / total:5.1f} %  {name[:110]}")
PY
