#!/usr/bin/env bash
# Makes link/hot-functions.txt, the functions the release link places first (build.rs): runs the
# release binary under callgrind as a big site's bridge (the simulator's 100 × 250 site with
# activity, datapoints on, mosquitto, the web listener), announces Home Assistant, sends a
# command and loads the web page, then lists every function of the binary that ran, the busiest
# first. Run it again when the toolchain, Cargo.lock or the dependencies change (CI's
# scripts/check_hot_functions.sh says when): the list names functions by their symbols, which
# change with them (docs/cli.md#build).
#
#   scripts/hot_functions.sh            about 5 minutes after the release build
#   SECONDS_UNDER_PROFILER=N scripts/hot_functions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
run_for=${SECONDS_UNDER_PROFILER:-200}
for tool in valgrind mosquitto mosquitto_pub mosquitto_sub curl python3; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || { echo "hot_functions: $tool is missing" >&2; exit 1; }
done
export PATH="$PATH:/usr/sbin"
cargo build --release --locked --bin casambi2mqtt
bin=$PWD/target/release/casambi2mqtt
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

"$bin" sim --generate 100x250 --activity 50 --listen 127.0.0.1:0 >"$work/sim.log" 2>&1 &
mqtt_port=$(free_port)
mosquitto -p "$mqtt_port" >"$work/mosquitto.log" 2>&1 &
http_port=$(free_port)
sim=""
for _ in $(seq 100); do
  sim=$(grep -o '127\.0\.0\.1:[0-9]*' "$work/sim.log" | head -1 || true)
  [ -n "$sim" ] && break
  sleep 0.1
done
[ -n "$sim" ] || { echo "hot_functions: the simulator did not start" >&2; cat "$work/sim.log" >&2; exit 1; }
cat >"$work/config.yaml" <<EOF
cloud:
  base_url: http://$sim
  ws_url: ws://$sim/v1/bridge/
  api_key: demo-key
  max_requests_per_minute: 100000
  max_concurrent_requests: 16
networks:
  - email: demo@example.com
    password: demo
mqtt:
  url: mqtt://127.0.0.1:$mqtt_port
http:
  listen: 127.0.0.1:$http_port
log:
  level: warn
EOF
valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" --dump-instr=no \
  --compress-strings=no --compress-pos=no --demangle=no \
  "$bin" run --config "$work/config.yaml" >"$work/bridge.log" 2>&1 &
bridge=$!
sleep $(( run_for * 2 / 3 ))
# What a running bridge also does: republish for Home Assistant, take a command, serve the page.
mosquitto_pub -p "$mqtt_port" -t homeassistant/status -m online
unit=$(mosquitto_sub -p "$mqtt_port" -t 'casambi/+/unit/+' -C 1 -F '%t' -W 30)
mosquitto_pub -p "$mqtt_port" -t "$unit/set" -m ON
curl -fsS "http://127.0.0.1:$http_port/" >/dev/null
curl -fsS "http://127.0.0.1:$http_port/metrics" >/dev/null
sleep $(( run_for / 3 ))
kill -TERM "$bridge"
wait "$bridge" || true

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
