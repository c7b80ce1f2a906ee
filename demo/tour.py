"""The demo's fault tour: each step injects one fault, says what fabricmon should find, and clears it.

A tour is YAML (``demo/tours/*.yaml`` built in, or a file)::

    name: tour
    steps:
      - title: a leaf uplink goes down
        fault: {kind: link_down, switch: lf-g1-r3}
        expect: {rule: oversubscription_drift, key: lf-g1-r3}   # rule: one or a list; key, or key_prefix
        story: the leaf now runs 64:63 ...
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fabric.errors import FabricmonError

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
