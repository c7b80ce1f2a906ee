"""Checked reads of the plain data an inventory file holds, shared by both file versions.

Every helper raises :class:`EntryError` naming where the bad value is (``switches[3] (leaf-a01)``)
and its position in the document (``("switches", 3)``), so the loader can add the file's line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fabric.errors import TopologyError
from fabric.model import Role

_ROLES = {r.value: r for r in Role}


class EntryError(TopologyError):
    """A bad inventory entry; ``at`` is its position in the document (keys and list indexes)."""

    def __init__(self, message: str, at: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.at = at


def mapping(value: Any, where: str, allowed: tuple[str, ...], at: tuple[str | int, ...] = ()) -> Mapping[str, Any]:
    """``value`` as a mapping whose keys are all in ``allowed``."""
    if not isinstance(value, Mapping):
        raise EntryError(f"{where}: expected a mapping, got {type(value).__name__}", at)
    unknown = [str(k) for k in value if k not in allowed]
    if unknown:
        raise EntryError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(allowed)})", at)
    return value


def integer(where: str, key: str, value: Any, minimum: int = 1, at: tuple[str | int, ...] = ()) -> int:
    """An integer of at least ``minimum`` (a bool is not one)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 400.0 in a file means 400
    if isinstance(value, bool) or not isinstance(value, int):
        raise EntryError(f"{where}: {key} must be an integer, got {value!r}", at)
    if value < minimum:
        raise EntryError(f"{where}: {key} must be >= {minimum}, got {value}", at)
    return value


def optional_int(where: str, key: str, value: Any, at: tuple[str | int, ...] = ()) -> int | None:
    """None, or an integer >= 1."""
    return None if value is None else integer(where, key, value, at=at)


def text(where: str, key: str, value: Any, at: tuple[str | int, ...] = ()) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value:
        raise EntryError(f"{where}: {key} must be a non-empty string, got {value!r}", at)
    return value


def node_name(where: str, key: str, value: Any, at: tuple[str | int, ...] = ()) -> str:
    """A switch or server name: a non-empty string with no white space, ``:`` or control character.

    A host name never has those; finding keys and messages join a node and its port with ``:``.
    """
    name = text(where, key, value, at)
    bad = next((c for c in name if c.isspace() or c == ":" or not c.isprintable()), None)
    if bad is not None:
        raise EntryError(f"{where}: {key} {name!r} has {bad!r}; a node name has no space, ':' or control character", at)
    return name


def port(where: str, key: str, value: Any, at: tuple[str | int, ...] = ()) -> str:
    """A port name as the device reports it: any printable text without white space.

    ``/``, ``:``, ``.`` and ``-`` are all fine (``Ethernet1/1``, ``et-0/0/1:2``); white space is
    not, since no NOS puts it in an interface name and messages separate words with it.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # a CSV or YAML port "1" is the port named 1
    name = text(where, key, value, at)
    bad = next((c for c in name if c.isspace() or not c.isprintable()), None)
    if bad is not None:
        raise EntryError(f"{where}: {key} {name!r} has {bad!r}; a port name has no white space", at)
    return name


def entries(raw: Mapping[str, Any], key: str) -> list[Any]:
    """The list at ``key`` (absent or null: empty)."""
    value = raw.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise EntryError(f"{key}: expected a list, got {type(value).__name__}", (key,))
    return value


def switch_head(
    entry: Any, i: int, allowed: tuple[str, ...], taken: Mapping[str, object]
) -> tuple[Mapping[str, Any], str, Role, str, tuple[str | int, ...]]:
    """The checked start of ``switches[i]``: (its mapping, name, role, "where" for messages, position)."""
    at: tuple[str | int, ...] = ("switches", i)
    where = f"switches[{i}]"
    m = mapping(entry, where, allowed, at)
    name = node_name(where, "name", m.get("name"), at)
    where = f"{where} ({name})"
    role = _ROLES.get(m["role"]) if isinstance(m.get("role"), str) else None
    if role is None:
        raise EntryError(f"{where}: role must be one of {', '.join(_ROLES)}, got {m.get('role')!r}", at)
    if name in taken:
        raise EntryError(f"{where}: duplicate switch name", at)
    return m, name, role, where, at
