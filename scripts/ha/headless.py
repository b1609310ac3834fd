#!/usr/bin/env python3
"""A headless Home Assistant for the end-to-end tests (docs/homeassistant.md).

Standard library only; Home Assistant itself runs from the venv that scripts/ha/setup.sh makes.
Every sub-command prints JSON (`requirements`: plain lines) on stdout and exits
non-zero with a message on stderr when it fails.

  headless.py --config DIR start --venv VENV --broker-port N --http-port N [--fresh]
  headless.py --config DIR entities [--count N] [--timeout S]
  headless.py --config DIR call DOMAIN/SERVICE JSON
  headless.py --config DIR roundtrip ENTITY DOMAIN/SERVICE JSON EXPECT [--timeout S]
  headless.py --config DIR wait ENTITY EXPECT [--timeout S]
  headless.py --config DIR triggers              (the MQTT device triggers per device)
  headless.py --config DIR log                  (a JSON list of WARNING and ERROR records)
  headless.py --config DIR stop
  VENV/bin/python headless.py requirements

`start` writes a configuration with the MQTT integration already set up (a config entry in
.storage, so no UI flow runs), starts `hass` with pip disabled (setup.sh installs every
requirement beforehand), creates the owner through the onboarding API and keeps its tokens in
the configuration directory for the other sub-commands.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import struct
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path

# What the tests load besides Home Assistant's defaults: the MQTT integration, the platforms the
# bridge's discovery uses, and the API the tests talk to.
TEST_INTEGRATIONS = (
    "api", "binary_sensor", "button", "device_automation", "event", "http", "image", "light",
    "logger", "mqtt", "number", "onboarding", "sensor", "switch",
)

CONFIGURATION = """\
homeassistant:
  name: casambi2mqtt e2e
  unit_system: metric
  time_zone: UTC
  country: DE
  currency: EUR
  language: en
  latitude: 50.0
  longitude: 8.0
  elevation: 0
http:
  server_host: 127.0.0.1
  server_port: {http_port}
api:
onboarding:
logger:
  default: warning
"""

OWNER = {"name": "E2E", "username": "e2e", "password": "e2e-password-not-secret", "language": "en"}


def fail(message: str) -> None:
    print(f"headless.py: {message}", file=sys.stderr)
    sys.exit(1)


class Hass:
    """One Home Assistant configuration directory and the instance running on it."""

    def __init__(self, config: Path) -> None:
        self.config = config
        self.state_file = config / ".e2e.json"

    # -- bookkeeping -------------------------------------------------------------------------
    def load(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            fail(f"no instance set up in {self.config} (run `start` first)")
            raise  # unreachable

    def save(self, state: dict) -> None:
        self.state_file.write_text(json.dumps(state))

    def base(self) -> str:
        return f"http://127.0.0.1:{self.load()['http_port']}"

    # -- HTTP --------------------------------------------------------------------------------
    def http(self, method: str, path: str, body=None, *, form: bool = False, auth: bool = True, base=None):
        headers = {}
        data = None
        if body is not None:
            if form:
                data = urllib.parse.urlencode(body).encode()
                headers["Content-Type"] = "application/x-www-form-urlencoded"
            else:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
        if auth:
            headers["Authorization"] = f"Bearer {self.token()}"
        request = urllib.request.Request((base or self.base()) + path, data, headers, method=method)
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace")

    def token(self) -> str:
        """The owner's access token, refreshed when it is near its 30-minute end."""
        state = self.load()
        if time.time() - state.get("token_time", 0) > 20 * 60:
            answer = self.http(
                "POST", "/auth/token",
                {"grant_type": "refresh_token", "refresh_token": state["refresh"], "client_id": state["client_id"]},
                form=True, auth=False,
            )
            state["token"] = answer["access_token"]
            state["token_time"] = time.time()
            self.save(state)
        return state["token"]

    # -- start / stop ------------------------------------------------------------------------
    def write_config(self, broker_port: int, http_port: int) -> None:
        storage = self.config / ".storage"
        storage.mkdir(parents=True, exist_ok=True)
        (self.config / "configuration.yaml").write_text(CONFIGURATION.format(http_port=http_port))
        entries = storage / "core.config_entries"
        entry = {
            "entry_id": "e2e0mqtt0000000000000000000000001",
            "domain": "mqtt",
            "title": f"127.0.0.1:{broker_port}",
            "data": {"broker": "127.0.0.1", "port": broker_port, "discovery": True},
            "options": {},
            "source": "user",
            "unique_id": None,
            "version": 1,
            "minor_version": 1,
            "disabled_by": None,
            "pref_disable_new_entities": False,
            "pref_disable_polling": False,
        }
        if entries.exists():
            # A restart keeps Home Assistant's own (migrated) file; only the broker's port moves.
            current = json.loads(entries.read_text())
            for e in current["data"]["entries"]:
                if e["domain"] == "mqtt":
                    e["data"]["port"] = broker_port
            entries.write_text(json.dumps(current))
        else:
            entries.write_text(json.dumps(
                {"version": 1, "minor_version": 1, "key": "core.config_entries", "data": {"entries": [entry]}}
            ))

    def start(self, venv: Path, broker_port: int, http_port: int, fresh: bool, timeout: float) -> None:
        if fresh and self.config.exists():
            subprocess.run(["rm", "-rf", str(self.config)], check=True)
        self.write_config(broker_port, http_port)
        previous = json.loads(self.state_file.read_text()) if self.state_file.exists() else {}
        hass = venv / "bin" / "hass"
        if not hass.exists():
            fail(f"{hass} not found: run scripts/ha/setup.sh")
        out = open(self.config / "hass.out", "ab")
        started = time.monotonic()
        proc = subprocess.Popen(
            [str(hass), "--config", str(self.config), "--skip-pip"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
        state = {**previous, "pid": proc.pid, "http_port": http_port, "broker_port": broker_port}
        self.save(state)
        base = f"http://127.0.0.1:{http_port}"
        deadline = started + timeout
        while True:
            if proc.poll() is not None:
                fail(f"hass exited with {proc.returncode}; see {self.config}/hass.out")
            try:
                onboarding = self.http("GET", "/api/onboarding", auth=False, base=base)
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    fail("the HTTP API did not come up")
                time.sleep(0.5)
        if "refresh" not in state:
            self.onboard(base, onboarding)
        while True:
            entries = self.http("GET", "/api/config/config_entries/entry?domain=mqtt") or []
            if any(e.get("state") == "loaded" for e in entries):
                break
            if time.monotonic() > deadline:
                fail(f"the MQTT config entry did not load: {entries}")
            time.sleep(0.5)
        print(json.dumps({"pid": proc.pid, "seconds": round(time.monotonic() - started, 1)}))

    def onboard(self, base: str, onboarding) -> None:
        users = next((s for s in onboarding if s.get("step") == "user"), None)
        if users is None or users.get("done"):
            fail("the owner is already onboarded but its tokens are gone; start with --fresh")
        client_id = base + "/"
        created = self.http("POST", "/api/onboarding/users", {"client_id": client_id, **OWNER}, auth=False, base=base)
        tokens = self.http(
            "POST", "/auth/token",
            {"grant_type": "authorization_code", "code": created["auth_code"], "client_id": client_id},
            form=True, auth=False, base=base,
        )
        state = self.load()
        state.update(
            token=tokens["access_token"], refresh=tokens["refresh_token"], token_time=time.time(), client_id=client_id
        )
        self.save(state)

    def stop(self) -> None:
        try:
            state = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return
        pid = state.pop("pid", None)
        self.save(state)
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        for _ in range(300):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    # -- queries -----------------------------------------------------------------------------
    def entities(self, count: int, timeout: float) -> list:
        """Every MQTT entity: id, platform, device name, state, attributes, timestamps."""
        template = (
            "{% set ns = namespace(out=[]) %}{% for e in integration_entities('mqtt') %}"
            "{% set ns.out = ns.out + [[e, device_attr(device_id(e), 'name')]] %}"
            "{% endfor %}{{ ns.out | tojson }}"
        )
        deadline = time.monotonic() + timeout
        while True:
            rendered = self.http("POST", "/api/template", {"template": template})
            pairs = json.loads(rendered) if isinstance(rendered, str) else rendered
            if len(pairs) >= count or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        devices = dict(pairs)
        out = []
        for s in self.http("GET", "/api/states"):
            if s["entity_id"] in devices:
                s["device"] = devices[s["entity_id"]]
                s["platform"] = s["entity_id"].split(".", 1)[0]
                out.append(s)
        # Entities registered but without a state object (not set up) show as such.
        known = {s["entity_id"] for s in out}
        for eid, dev in pairs:
            if eid not in known:
                out.append({"entity_id": eid, "device": dev, "platform": eid.split(".", 1)[0], "state": None, "attributes": {}})
        return sorted(out, key=lambda s: s["entity_id"])

    def call(self, service: str, data: dict):
        domain, _, name = service.partition("/")
        return self.http("POST", f"/api/services/{domain}/{name}", data)

    def roundtrip(self, entity: str, service: str, data: dict, expect: dict, timeout: float) -> dict:
        """Calls `service` and waits until `entity`'s state matches `expect`; the time it took."""
        path = f"/api/states/{entity}"
        called_at = datetime.fromisoformat(self.http("GET", path)["last_reported"])
        started = time.monotonic()
        self.call(service, data)
        while True:
            now = self.http("GET", path)
            if matches(now, expect, called_at):
                return {"ms": round((time.monotonic() - started) * 1000, 1), "state": now}
            if time.monotonic() - started > timeout:
                fail(f"{entity} never matched {json.dumps(expect)} after {service}; last: {json.dumps(now)}")
            time.sleep(0.01)

    def triggers(self) -> list:
        """The MQTT device triggers Home Assistant registered, per device (over its WebSocket API:
        device triggers are no entities, so REST does not list them)."""
        template = (
            "{% set ns = namespace(out=[]) %}{% for d in integration_entities('mqtt') | map('device_id') | unique %}"
            "{% if d %}{% set ns.out = ns.out + [[d, device_attr(d, 'name')]] %}{% endif %}"
            "{% endfor %}{{ ns.out | tojson }}"
        )
        rendered = self.http("POST", "/api/template", {"template": template})
        devices = json.loads(rendered) if isinstance(rendered, str) else rendered
        ws = WebSocket(self.load()["http_port"], "/api/websocket")
        try:
            ws.receive()  # auth_required
            ws.send({"type": "auth", "access_token": self.token()})
            if ws.receive().get("type") != "auth_ok":
                fail("the WebSocket API refused the token")
            out = []
            for n, (device_id, name) in enumerate(devices, start=1):
                ws.send({"id": n, "type": "device_automation/trigger/list", "device_id": device_id})
                answer = ws.receive()
                if not answer.get("success"):
                    fail(f"trigger/list of {name}: {answer}")
                for t in answer["result"]:
                    if t.get("domain") == "mqtt":
                        out.append({"device": name, "type": t.get("type"), "subtype": t.get("subtype")})
            return out
        finally:
            ws.close()

    def wait(self, entity: str, expect: dict, timeout: float) -> dict:
        """Waits until `entity`'s state matches `expect`."""
        started = time.monotonic()
        epoch = datetime.fromtimestamp(0).astimezone()
        while True:
            now = self.http("GET", f"/api/states/{entity}")
            if matches(now, expect, epoch):
                return now
            if time.monotonic() - started > timeout:
                fail(f"{entity} never matched {json.dumps(expect)}; last: {json.dumps(now)}")
            time.sleep(0.05)

    def log(self) -> list[str]:
        """The WARNING and ERROR records of home-assistant.log, each with its continuation lines."""
        path = self.config / "home-assistant.log"
        if not path.exists():
            return []
        records: list[str] = []
        keep = False
        for line in path.read_text(errors="replace").splitlines():
            starts_record = len(line) > 23 and line[:4].isdigit() and line[4] == "-"
            if starts_record:
                keep = " WARNING " in line or " ERROR " in line or " CRITICAL " in line
                if keep:
                    records.append(line)
            elif keep and records:
                records[-1] += "\n" + line
        return records


class WebSocket:
    """The little of RFC 6455 the WebSocket API needs: text frames, masked from the client."""

    def __init__(self, port: int, path: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                fail("the WebSocket handshake was cut")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            fail(f"no WebSocket upgrade: {head!r}")

    def exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                fail("the WebSocket closed")
            data += chunk
        return data

    def send(self, message: dict) -> None:
        payload = json.dumps(message).encode()
        n = len(payload)
        head = bytes([0x81])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def receive(self) -> dict:
        data = b""
        while True:
            first, second = self.exact(2)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack(">H", self.exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self.exact(8))[0]
            data += self.exact(n)
            opcode = first & 0x0F
            if opcode == 0x8:
                fail("the WebSocket API closed the connection")
            if opcode in (0x9, 0xA):  # ping / pong: Home Assistant does not send them unasked
                data = b""
                continue
            if first & 0x80:
                return json.loads(data)

    def close(self) -> None:
        self.sock.close()


def close(a, b) -> bool:
    """Whether an expected value `a` matches `b`: numbers within 1 (Home Assistant rounds colour
    and brightness conversions), lists element by element, everything else equal."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return a == b


def matches(state: dict, expect: dict, called_at: datetime) -> bool:
    if "state" in expect and state.get("state") != expect["state"]:
        return False
    if "state_num" in expect:
        try:
            if not close(expect["state_num"], float(state.get("state"))):
                return False
        except (TypeError, ValueError):
            return False
    for key, want in expect.get("attributes", {}).items():
        if not close(want, state.get("attributes", {}).get(key)):
            return False
    if expect.get("reported_after_call") and datetime.fromisoformat(state["last_reported"]) <= called_at:
        return False
    return True


def requirements() -> list[str]:
    """The pip requirements of Home Assistant's default integrations and the tests' ones, with
    their dependencies (run with the venv's Python)."""
    from homeassistant import bootstrap  # noqa: PLC0415 (only inside the venv)
    import homeassistant.components as components  # noqa: PLC0415

    root = Path(components.__file__).parent
    todo = list(bootstrap.CORE_INTEGRATIONS | bootstrap.DEFAULT_INTEGRATIONS | set(TEST_INTEGRATIONS))
    seen: set[str] = set()
    reqs: set[str] = set()
    while todo:
        domain = todo.pop()
        if domain in seen:
            continue
        seen.add(domain)
        manifest = json.loads((root / domain / "manifest.json").read_text())
        reqs.update(manifest.get("requirements", []))
        todo.extend(manifest.get("dependencies", []))
    return sorted(reqs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=Path("target/ha-config"))
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("start")
    p.add_argument("--venv", type=Path, required=True)
    p.add_argument("--broker-port", type=int, required=True)
    p.add_argument("--http-port", type=int, required=True)
    p.add_argument("--fresh", action="store_true")
    p.add_argument("--timeout", type=float, default=180)
    p = sub.add_parser("entities")
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--timeout", type=float, default=60)
    p = sub.add_parser("call")
    p.add_argument("service")
    p.add_argument("data")
    p = sub.add_parser("roundtrip")
    p.add_argument("entity")
    p.add_argument("service")
    p.add_argument("data")
    p.add_argument("expect")
    p.add_argument("--timeout", type=float, default=15)
    p = sub.add_parser("wait")
    p.add_argument("entity")
    p.add_argument("expect")
    p.add_argument("--timeout", type=float, default=15)
    sub.add_parser("log")
    sub.add_parser("triggers")
    sub.add_parser("stop")
    sub.add_parser("requirements")
    args = parser.parse_args()
    hass = Hass(args.config.resolve())
    if args.command == "start":
        hass.start(args.venv.resolve(), args.broker_port, args.http_port, args.fresh, args.timeout)
    elif args.command == "entities":
        print(json.dumps(hass.entities(args.count, args.timeout)))
    elif args.command == "call":
        print(json.dumps(hass.call(args.service, json.loads(args.data))))
    elif args.command == "roundtrip":
        result = hass.roundtrip(args.entity, args.service, json.loads(args.data), json.loads(args.expect), args.timeout)
        print(json.dumps(result))
    elif args.command == "wait":
        print(json.dumps(hass.wait(args.entity, json.loads(args.expect), args.timeout)))
    elif args.command == "triggers":
        print(json.dumps(hass.triggers()))
    elif args.command == "log":
        print(json.dumps(hass.log()))
    elif args.command == "stop":
        hass.stop()
    else:
        print("\n".join(requirements()))


if __name__ == "__main__":
    try:
        main()
    except urllib.error.HTTPError as err:
        fail(f"{err.url}: HTTP {err.code} {err.read().decode(errors='replace')[:500]}")
    except urllib.error.URLError as err:
        fail(f"Home Assistant did not answer: {err.reason}")
