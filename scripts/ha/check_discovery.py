#!/usr/bin/env python3
"""Checks discovery configs with Home Assistant's own schemas (docs/homeassistant.md).

Run with the Python of the venv scripts/ha/setup.sh makes:

  VENV/bin/python scripts/ha/check_discovery.py FILE [--prefix homeassistant]

FILE holds retained messages as `topic<TAB>payload` lines (the tests' golden format). Every
config under the prefix goes the way Home Assistant's MQTT discovery takes it: the topic is
matched, abbreviations are expanded, a device config is checked by the device schema and split
into its components (with the root's shared options handed down), and every component is
checked by its platform's discovery schema (a device trigger by the trigger schema). Besides
errors, a key Home Assistant drops is a failure: a key of the root it does not hand down, or a
key of a component its platform's schema removes. The one key allowed to be dropped is a group
light's `group`, which newer Home Assistant releases read (IGNORED below).

Prints a JSON summary; exits 1 when anything failed.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import tempfile
import json
import sys
from collections import Counter

import voluptuous as vol
from homeassistant.components.mqtt import device_automation, device_trigger, discovery, schemas
from homeassistant.components.mqtt.const import CONF_COMPONENTS, CONF_ORIGIN
from homeassistant.const import CONF_DEVICE, CONF_PLATFORM
from homeassistant.core import HomeAssistant

# Keys a newer Home Assistant release reads and this one drops, per platform: sent on purpose.
IGNORED = {("light", "group"): "read from Home Assistant 2026.4 on, which shows group lights as groups"}

# Root keys of a device config Home Assistant uses: the blocks it attaches to every component,
# the components, the topic base, and the options it hands down (schemas.SHARED_OPTIONS).
ROOT_KEYS = {CONF_DEVICE, CONF_ORIGIN, CONF_COMPONENTS, "~", *schemas.SHARED_OPTIONS}


def read(path: str) -> dict[str, str]:
    configs = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            topic, _, payload = line.partition("\t")
            configs[topic] = payload
    return configs


class Checker:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.errors: list[str] = []
        self.dropped: list[str] = []
        self.ignored: list[str] = []
        self.platforms: Counter[str] = Counter()
        self.configs = 0

    def check(self, topic: str, payload: str) -> None:
        rest = topic.removeprefix(self.prefix + "/")
        if rest == topic or not rest.endswith("/config"):
            return
        match = discovery.TOPIC_MATCHER.fullmatch(rest)
        if match is None:
            self.errors.append(f"{topic}: not a discovery topic Home Assistant accepts")
            return
        if payload == "":
            return  # a removal
        self.configs += 1
        try:
            config = json.loads(payload)
        except ValueError as err:
            self.errors.append(f"{topic}: not JSON: {err}")
            return
        if not isinstance(config, dict):
            self.errors.append(f"{topic}: not a JSON object")
            return
        if match["component"] == CONF_DEVICE:
            self.device(topic, config)
        else:
            discovery._replace_all_abbreviations(config)
            if CONF_ORIGIN in config:
                self.validate(topic, "origin", schemas.MQTT_ORIGIN_INFO_SCHEMA, config[CONF_ORIGIN])
            self.component(topic, match["component"], config, set(config))

    def device(self, topic: str, config: dict) -> None:
        discovery._replace_all_abbreviations(config)
        if self.validate(topic, "device config", schemas.DEVICE_DISCOVERY_SCHEMA, config) is None:
            return
        for key in sorted(set(config) - ROOT_KEYS):
            self.dropped.append(f"{topic}: root key {key!r} is not handed down to the components")
        for key, component in config[CONF_COMPONENTS].items():
            component = dict(component)
            platform = component.pop(CONF_PLATFORM)
            own = set(component)
            if not component:
                continue  # a component being removed
            # What discovery.py builds for each component of a device config.
            component[CONF_DEVICE] = config[CONF_DEVICE]
            component[CONF_ORIGIN] = config.get(CONF_ORIGIN)
            discovery._merge_common_device_options(component, config)
            self.component(f"{topic} [{key}]", platform, component, own)

    def component(self, where: str, platform: str, config: dict, own: set[str]) -> None:
        """Checks one component; `own` are the keys its publisher set (not handed down)."""
        self.platforms[platform] += 1
        if "~" in config:
            discovery._replace_topic_base(config)
            own.discard("~")
        if platform == "device_automation":
            if self.validate(where, platform, device_automation.DISCOVERY_SCHEMA, dict(config)) is None:
                return
            out = self.validate(where, "device trigger", device_trigger.TRIGGER_DISCOVERY_SCHEMA, dict(config))
        else:
            module = importlib.import_module(f"homeassistant.components.mqtt.{platform}")
            out = self.validate(where, platform, module.DISCOVERY_SCHEMA, dict(config))
        if out is None:
            return
        for key in sorted(own - set(out)):
            reason = IGNORED.get((platform, key))
            if reason:
                self.ignored.append(f"{where}: {platform} {key!r} ({reason})")
            else:
                self.dropped.append(f"{where}: {platform} drops {key!r}")

    def validate(self, where: str, what: str, schema, value):
        try:
            return schema(value)
        except vol.Invalid as err:
            self.errors.append(f"{where}: {what}: {err}")
        except Exception as err:  # noqa: BLE001 - a schema that raises otherwise is a finding too
            self.errors.append(f"{where}: {what}: {type(err).__name__}: {err}")
        return None


async def check_all(args: argparse.Namespace) -> Checker:
    """Runs the checks inside an event loop with a (not started) Home Assistant instance, as the
    template validator asks for one: templates are compiled, so a syntax error fails."""
    with tempfile.TemporaryDirectory() as config_dir:
        HomeAssistant(config_dir)
        checker = Checker(args.prefix)
        for path in args.files:
            for topic, payload in read(path).items():
                checker.check(topic, payload)
        return checker


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--prefix", default="homeassistant")
    args = parser.parse_args()
    checker = asyncio.run(check_all(args))
    summary = {
        "configs": checker.configs,
        "components": dict(sorted(checker.platforms.items())),
        "errors": checker.errors,
        "dropped": checker.dropped,
        "ignored": checker.ignored,
    }
    print(json.dumps(summary, indent=1))
    return 1 if checker.errors or checker.dropped or checker.configs == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
