"""aiocasambi, the Python cloud library of the Home Assistant integration that came before this
bridge, as a second client of bench_e2e's stream (`--aiocasambi`, BENCHMARKS.md): its own code
logs in, loads the networks, opens their wires and takes every frame, so that its CPU per event
compares with the bridge's on the same kind of events, on the same machine.

    python aiocasambi_peer.py BASE_URL API_KEY EMAIL PASSWORD

Only the service's address is changed (aiocasambi has the real service's address in its code).
It prints `ready UNITS units, VERSIONS` once every wire is open, then answers each `mark` line
on its standard input with one JSON line of counts since it started: `frames` (unitChanged
frames handled), CPU seconds in two readings of the library's parse-only cost, `handling_s`
(`json.loads` of each frame and the controller's handler of it, which finds the network and
updates the unit) and `unit_s` (`json.loads` and the unit's update alone), and `process_s`
(the process's CPU time).
"""
import asyncio
import json
import platform
import sys
import threading
import time
from importlib import metadata

import aiohttp
from aiocasambi import controller as controller_module
from aiocasambi import units as units_module
from aiocasambi import websocket as websocket_module

base, api_key, email, password = sys.argv[1:5]
frames = 0
handler_s = 0.0
loads_s = 0.0
unit_s = 0.0


class TimedJson:
    """The websocket module's `json`, with the time of `loads` counted: the frame's parse."""

    dumps = staticmethod(json.dumps)

    @staticmethod
    def loads(data):
        global loads_s
        start = time.thread_time()
        try:
            return json.loads(data)
        finally:
            loads_s += time.thread_time() - start


websocket_module.json = TimedJson
handle = controller_module.Controller.session_handler


def timed_handler(self, signal, wire_id):
    """The controller's handling of a frame, timed and counted."""
    global frames, handler_s
    start = time.thread_time()
    try:
        if signal == websocket_module.SIGNAL_DATA:
            client = self.websocket.get(self._wire_id_to_network_id.get(wire_id))
            message = client.data if client is not None else None
            if isinstance(message, dict) and message.get("method") == "unitChanged":
                frames += 1
        return handle(self, signal, wire_id)
    finally:
        handler_s += time.thread_time() - start


controller_module.Controller.session_handler = timed_handler
process_unit_event = units_module.Units.process_unit_event


def timed_unit_event(self, message):
    """The update of a unit from its frame, timed: the narrowest reading of the library's parse."""
    global unit_s
    start = time.thread_time()
    try:
        return process_unit_event(self, message)
    finally:
        unit_s += time.thread_time() - start


units_module.Units.process_unit_event = timed_unit_event
SERVICE = "https://door.casambi.com/v1"
request = controller_module.Controller.request


async def local_request(self, method, url=None, **kwargs):
    """The controller's requests, sent to the simulator (one of them names the service itself)."""
    return await request(self, method, url=url.replace(SERVICE, base + "/v1", 1), **kwargs)


controller_module.Controller.request = local_request
open_client = websocket_module.WSClient.__init__


def local_client(self, **kwargs):
    open_client(self, **kwargs)
    self.url = base.replace("http", "ws", 1) + "/v1/bridge/"


websocket_module.WSClient.__init__ = local_client


def answer_marks():
    for line in sys.stdin:
        if line.strip() == "mark":
            counts = {
                "frames": frames,
                "handling_s": loads_s + handler_s,
                "unit_s": loads_s + unit_s,
                "process_s": time.process_time(),
            }
            print(json.dumps(counts), flush=True)


async def main():
    async with aiohttp.ClientSession() as http:
        # The integration's callback hands changes on to Home Assistant; here they stop.
        c = controller_module.Controller(
            email=email,
            api_key=api_key,
            websession=http,
            network_password=password,
            callback=lambda signal, data: None,
        )
        await c.create_network_session()
        await c.initialize()
        await c.start_websockets()
        while not c.websocket or any(w.state != websocket_module.STATE_RUNNING for w in c.websocket.values()):
            await asyncio.sleep(0.05)
        units = sum(len(u.units) for u in c.units.values())
        versions = ", ".join(f"{p} {metadata.version(p)}" for p in ("aiocasambi", "aiohttp"))
        print(f"ready {units} units, {versions}, Python {platform.python_version()}", flush=True)
        threading.Thread(target=answer_marks, daemon=True).start()
        while True:
            await asyncio.sleep(3600)


asyncio.run(main())
