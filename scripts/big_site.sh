#!/usr/bin/env bash
# Runs a bridge as a big site's for SECONDS: the simulator's 100 × 250 site with activity
# (target/release/casambi2mqtt's `sim`), datapoints on, mosquitto, the web listener. Two thirds
# in, Home Assistant comes online, a command goes out and the web page and the metrics are
# read; at the end the bridge stops on SIGTERM, as a service does. The workload behind
# link/hot-functions.txt (scripts/hot_functions.sh) and link/pgo.profdata
# (scripts/pgo_profile.sh).
#
#   scripts/big_site.sh SECONDS BRIDGE [WRAPPER ...]   (WRAPPER: a profiler that runs BRIDGE)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] && [[ "$1" =~ ^[0-9]+$ ]] || { echo "usage: $0 SECONDS BRIDGE [WRAPPER ...]" >&2; exit 2; }
run_for=$1
bridge_bin=$2
shift 2
for tool in mosquitto mosquitto_pub mosquitto_sub curl python3; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || { echo "big_site: $tool is missing" >&2; exit 1; }
done
export PATH="$PATH:/usr/sbin"
sim_bin=$PWD/target/release/casambi2mqtt
[ -x "$sim_bin" ] || { echo "big_site: build the simulator first (cargo build --release)" >&2; exit 1; }
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

"$sim_bin" sim --generate 100x250 --activity 50 --listen 127.0.0.1:0 >"$work/sim.log" 2>&1 &
mqtt_port=$(free_port)
mosquitto -p "$mqtt_port" >"$work/mosquitto.log" 2>&1 &
http_port=$(free_port)
sim=""
for _ in $(seq 100); do
  sim=$(grep -o '127\.0\.0\.1:[0-9]*' "$work/sim.log" | head -1 || true)
  [ -n "$sim" ] && break
  sleep 0.1
done
[ -n "$sim" ] || { echo "big_site: the simulator did not start" >&2; cat "$work/sim.log" >&2; exit 1; }
cat >"$work/config.yaml" <<EOC
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
EOC
"$@" "$bridge_bin" run --config "$work/config.yaml" >"$work/bridge.log" 2>&1 &
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
