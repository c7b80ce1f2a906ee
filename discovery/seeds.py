"""Which switches discovery starts from, and how each switch it meets is reached.

Seeds, in this order (each name once):

* the switches of ``fabric.inventory`` when the config names one (a file that does not exist
  yet, often the one discovery is about to write, adds none);
* the exact names (no ``*``, ``?`` or ``[``) in ``targets[*].switches``;
* the names of ``--switches FILE``: one per line, ``#`` starts a comment.

:class:`Targets` resolves any switch name with the collector's rules
(:mod:`collector.targets`): the first entry whose patterns match wins, and templates are filled
from the inventory's entry for the switch, or, for a switch the inventory does not list, from a
placeholder that knows only its name (a template that needs ``{mgmt_address}`` then fails for
that switch alone, and the report says so).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from collector.config import TargetConfig
from collector.targets import SwitchTarget, resolve
from config.model import Config
from discovery.errors import DiscoveryError
from fabric.errors import TopologyError
from fabric.inventory import read_inventory
from fabric.model import Role, Switch

_GLOB = frozenset("*?[")


def is_glob(pattern: str) -> bool:
    """Whether a ``targets[*].switches`` item is a pattern rather than one switch's name."""
    return bool(_GLOB & set(pattern))


class Targets:
    """The ``targets`` entries, resolved per switch name (see the module docstring)."""

    def __init__(self, entries: Sequence[TargetConfig], known: Mapping[str, Switch] | None = None) -> None:
        self.entries = list(entries)
        self.known = dict(known or {})

    def entry(self, name: str) -> int | None:
        """The index of the first entry matching ``name``, or None."""
        for i, entry in enumerate(self.entries):
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in entry.switches):
                return i
        return None

    def matches(self, name: str) -> bool:
        """Whether some entry reaches ``name``."""
        return self.entry(name) is not None

    def resolve(self, name: str) -> SwitchTarget:
        """How to reach ``name``; ConfigError when no entry matches or a template cannot be filled."""
        i = self.entry(name)
        if i is None:
            raise DiscoveryError(f"{name}: no targets entry matches it")
        sw = self.known.get(name) or Switch(name, Role.LEAF, 1, None, None, None, 0, 400)
        return resolve(self.entries[i], sw, f"targets[{i}]")


def inventory_switches(config: Config) -> tuple[dict[str, Switch], list[str]]:
    """The configured inventory's switches (name → Switch) and notes about reading it."""
    path = config.fabric.inventory
    if path is None:
        return {}, []
    if not Path(path).exists():
        return {}, [f"fabric.inventory {path} does not exist yet: no seeds from it"]
    try:
        fabric, _ = read_inventory(path)
    except TopologyError as exc:
        raise DiscoveryError(f"fabric.inventory: {exc}") from exc
    return dict(fabric.switches), []


def read_switches_file(path: str) -> list[str]:
    """``--switches FILE``: one switch name per line; blank lines and ``#`` comments skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DiscoveryError(f"--switches {path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise DiscoveryError(f"--switches {path}: not UTF-8 text at byte {exc.start}") from exc
    out: list[str] = []
    for line_no, line in enumerate(text.splitlines(), 1):
        name = line.partition("#")[0].strip()
        if not name:
            continue
        if len(name.split()) > 1:
            raise DiscoveryError(f"--switches {path} line {line_no}: one switch name per line, got {name!r}")
        out.append(name)
    return out


def seed_names(entries: Sequence[TargetConfig], inventory: Iterable[str], listed: Iterable[str]) -> list[str]:
    """The seeds in order, each once: the inventory's, the exact target names, the listed ones."""
    exact = (pattern for entry in entries for pattern in entry.switches if not is_glob(pattern))
    return list(dict.fromkeys([*inventory, *exact, *listed]))
