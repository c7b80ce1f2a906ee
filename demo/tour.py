"""The demo's fault tour: each step injects one fault, says what fabricmon should find, and clears it.

A tour is YAML (``demo/tours/*.yaml`` built in, or a file)::

    name: tour
    steps:
      - title: a leaf uplink goes down
        fault: {kind: link_down, switch: lf-g1-r3}
        expect: {rule: oversubscription_drift, key: lf-g1-r3}   # rule: one or a list; key, or key_prefix
        story: the leaf now runs 64:63 ...

A fault may name its port by place instead of by name, ``port_at: N`` (the N-th port of the
switch in its design's order), so one tour serves every naming (``swp65``, ``Ethernet33/1``,
``et-0/0/32:0``); ``{port}`` in ``key``, ``key_prefix``, ``title`` and ``story`` is then the
port's name (:meth:`Step.bind`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from fabric.errors import FabricmonError
from fabric.model import Fabric

TOURS = Path(__file__).resolve().parent / "tours"


class TourError(FabricmonError, ValueError):
    """A tour file that cannot be used."""


@dataclass(frozen=True, slots=True)
class Step:
    """One fault and what fabricmon must conclude from it."""

    title: str
    fault: dict[str, Any]
    rules: tuple[str, ...]
    key: str | None = None
    key_prefix: str | None = None
    story: str = ""

    @property
    def rule(self) -> str:
        return " or ".join(self.rules)

    def bind(self, fabric: Fabric) -> Step:
        """This step with a ``port_at`` fault port named as ``fabric`` names it, and ``{port}`` filled in."""
        at = self.fault.get("port_at")
        if at is None:
            return self
        switch = self.fault.get("switch")
        ports = fabric.ports(str(switch)) if switch in fabric.switches else []
        if not isinstance(at, int) or not 1 <= at <= len(ports):
            raise TourError(f"{self.title}: port_at {at!r} is not a port of {switch!r} (1..{len(ports)})")
        port = ports[at - 1].name
        fault = {k: v for k, v in self.fault.items() if k != "port_at"} | {"port": port}

        def fill(text: str | None) -> str | None:
            return None if text is None else text.replace("{port}", port)

        return replace(
            self,
            fault=fault,
            key=fill(self.key),
            key_prefix=fill(self.key_prefix),
            title=fill(self.title) or self.title,
            story=fill(self.story) or "",
        )

    def matches(self, rule: str, key: str) -> bool:
        if rule not in self.rules:
            return False
        if self.key is not None:
            return key == self.key
        return self.key_prefix is None or key.startswith(self.key_prefix)


def builtin_tours() -> list[str]:
    """Names of the built-in tours."""
    return sorted(p.stem for p in TOURS.glob("*.yaml"))


def load_tour(name_or_file: str) -> tuple[str, list[Step]]:
    """A built-in tour by name, or a tour file."""
    path = Path(name_or_file)
    if not path.exists():
        path = TOURS / f"{name_or_file}.yaml"
    if not path.exists():
        raise TourError(f"no tour {name_or_file!r} (built-in: {', '.join(builtin_tours())})")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise TourError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list) or not data["steps"]:
        raise TourError(f"{path}: a tour is a mapping with a non-empty 'steps' list")
    steps = []
    for i, raw in enumerate(data["steps"]):
        where = f"{path}: steps[{i}]"
        if (
            not isinstance(raw, dict)
            or not isinstance(raw.get("fault"), dict)
            or not isinstance(raw.get("expect"), dict)
        ):
            raise TourError(f"{where}: needs 'fault' and 'expect' mappings")
        expect = raw["expect"]
        rules = expect.get("rule")
        rules = [rules] if isinstance(rules, str) else rules
        if not isinstance(rules, list) or not rules or not all(isinstance(r, str) for r in rules):
            raise TourError(f"{where}: expect.rule is required (a rule, or a list of acceptable rules)")
        steps.append(
            Step(
                title=str(raw.get("title") or raw["fault"].get("kind", "fault")),
                fault=dict(raw["fault"]),
                rules=tuple(rules),
                key=expect.get("key"),
                key_prefix=expect.get("key_prefix"),
                story=str(raw.get("story", "")),
            )
        )
    return str(data.get("name") or path.stem), steps
