"""Fault scenarios: a YAML timeline of faults, loaded with clear errors and played on time.

Layout::

    name: uplink-down                 # optional
    description: one leaf loses an uplink for 30 s
    faults:
      - at_s: 5                       # seconds after play starts (default 0)
        clear_after_s: 30             # optional: cleared that long after it was applied
        kind: link_down               # then any fault fields (simulator.faults)
        switch: lf-g1-r1

Built-in scenarios live in ``simulator/scenarios/`` and are found by name
(:func:`scenario_path`). Errors::

    FabricmonError
    └── ScenarioError (ValueError)    a scenario that cannot be read, or a fault it cannot apply
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from fabric.errors import FabricmonError
from fabric.model import Fabric
from simulator.faults import AppliedFault, FaultError, FaultSpec, resolve

if TYPE_CHECKING:
    from simulator.fabric_state import FabricState

#: Where the built-in scenarios live.
BUILTIN_DIR = Path(__file__).with_name("scenarios")
_TOP_KEYS = frozenset({"name", "description", "faults"})
_TIMING_KEYS = ("at_s", "clear_after_s")


class ScenarioError(FabricmonError, ValueError):
    """A scenario file that cannot be read or played; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class ScheduledFault:
    """One timeline entry: apply ``spec`` at ``at_s``, clear it ``clear_after_s`` later (if set)."""

    at_s: float
    clear_after_s: float | None
    spec: FaultSpec
    line: int | None = None


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named fault timeline."""

    name: str
    faults: tuple[ScheduledFault, ...]
    description: str = ""

    @property
    def duration_s(self) -> float:
        """When the last apply or clear happens (scenario seconds)."""
        ends = [f.at_s + (f.clear_after_s or 0.0) for f in self.faults]
        return max(ends, default=0.0)


def builtin_scenarios() -> list[str]:
    """Names of the built-in scenarios."""
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml"))


def scenario_path(name_or_file: str | Path) -> Path:
    """A built-in scenario's file for its name, else ``name_or_file`` as a path."""
    candidate = BUILTIN_DIR / f"{name_or_file}.yaml"
    if isinstance(name_or_file, str) and "/" not in name_or_file and candidate.is_file():
        return candidate
    return Path(name_or_file)


def load_scenario(source: str | Path, *, fabric: Fabric | None = None) -> Scenario:
    """Read a scenario by built-in name or file; with ``fabric``, also check every fault against it."""
    path = scenario_path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        known = ", ".join(builtin_scenarios())
        raise ScenarioError(f"cannot read scenario {str(source)!r} ({exc.strerror}); built-in: {known}") from exc
    return parse_scenario(text, origin=str(path), fabric=fabric, default_name=path.stem)


def parse_scenario(
    text: str, *, origin: str = "<scenario>", fabric: Fabric | None = None, default_name: str = "scenario"
) -> Scenario:
    """Parse scenario YAML; errors read ``origin:line: problem``."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{origin}:{mark.line + 1}" if mark is not None else origin
        raise ScenarioError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from exc
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{origin}: a scenario is a mapping with a 'faults' list")
    for key in data:
        if key not in _TOP_KEYS:
            raise ScenarioError(f"{origin}: unknown key {key!r} (known: {', '.join(sorted(_TOP_KEYS))})")
    items = data.get("faults")
    if not isinstance(items, list):
        raise ScenarioError(f"{origin}: 'faults' must be a list")
    lines = _item_lines(root)
    faults = []
    for i, item in enumerate(items):
        line = lines[i] if i < len(lines) else None
        where = f"{origin}:{line}" if line is not None else f"{origin}: faults[{i}]"
        try:
            faults.append(_entry(item, line, fabric))
        except FaultError as exc:
            raise ScenarioError(f"{where}: {exc}") from exc
    name = data.get("name", default_name)
    return Scenario(str(name), tuple(faults), str(data.get("description", "")))


def _item_lines(root: yaml.Node | None) -> list[int]:
    """1-based line of each entry of the top-level ``faults`` sequence."""
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if getattr(key, "value", None) == "faults" and isinstance(value, yaml.SequenceNode):
            return [node.start_mark.line + 1 for node in value.value]
    return []


def _entry(item: Any, line: int | None, fabric: Fabric | None) -> ScheduledFault:
    if not isinstance(item, Mapping):
        raise FaultError("a fault entry must be a mapping")
    at_s = _seconds(item, "at_s", 0.0, allow_zero=True) or 0.0
    clear = _seconds(item, "clear_after_s", None, allow_zero=False)
    spec = FaultSpec.from_dict({k: v for k, v in item.items() if k not in _TIMING_KEYS})
    if fabric is not None:
        resolve(fabric, spec, spec.id or "check")
    return ScheduledFault(at_s, clear, spec, line)


def _seconds(item: Mapping[str, Any], key: str, default: float | None, *, allow_zero: bool) -> float | None:
    value = item.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FaultError(f"field {key!r} must be a number of seconds (got {value!r})")
    if value < 0 or (value == 0 and not allow_zero):
        raise FaultError(f"field {key!r} must be {'>= 0' if allow_zero else '> 0'} (got {value!r})")
    return float(value)


async def play(state: FabricState, scenario: Scenario, speedup: float = 1.0) -> list[AppliedFault]:
    """Apply and clear the scenario's faults on time (scenario seconds / ``speedup``).

    Returns the faults it applied; those without ``clear_after_s`` stay active, and so does
    everything applied when play is cancelled. At equal times clears go first. A fault that
    cannot be applied (an id in use, a cable already miswired) raises :class:`ScenarioError`.
    """
    if not (speedup > 0 and math.isfinite(speedup)):
        raise ScenarioError(f"speedup must be a positive number (got {speedup!r})")
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    steps = []
    for i, entry in enumerate(scenario.faults):
        steps.append((entry.at_s, 1, i))
        if entry.clear_after_s is not None:
            steps.append((entry.at_s + entry.clear_after_s, 0, i))
    steps.sort()
    applied: dict[int, AppliedFault] = {}
    for when, op, i in steps:
        delay = t0 + when / speedup - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        entry = scenario.faults[i]
        if op == 0:
            if i in applied:
                state.clear(applied[i].id)
            continue
        try:
            applied[i] = state.apply(entry.spec)
        except FaultError as exc:
            where = f"line {entry.line}" if entry.line is not None else f"faults[{i}]"
            raise ScenarioError(f"scenario {scenario.name} {where}: {exc}") from exc
    return list(applied.values())
