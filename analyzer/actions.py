"""What a training scheduler should do about an alert (``recommended_action``), and which jobs it touches.

Rules, applied in this order; the first that matches wins:

``drain``
    A host lost its only path on a rail: each server has exactly one NIC, one cable and one
    leaf per rail, so losing any of them takes that GPU out of every collective on the rail.
    That is the case for

    * ``miswire`` of a server NIC onto the wrong leaf (``details["expected_leaf"]`` and
      ``details["actual_leaf"]`` differ; without those details: its port is a leaf down-port).
      A NIC on the right leaf but the wrong port still has its path (no drain), and a leaf
      uplink on another rail's spine leaves the leaf its other uplinks;
    * ``link_outage`` on a leaf down-port (the server-facing end of a server NIC's link),
      unless the finding says the link is back (``details["down_now"] is False``: a past
      outage longer than the fatal threshold, kept for the record);
    * ``stale_switch`` on a leaf: a leaf that stopped answering may have taken its servers'
      rail with it, and nothing can prove otherwise until it answers again;
    * any finding whose check set ``details["host_path_lost"] = True``.

    Whether a port is a leaf down-port and a switch a leaf is read from the inventory
    (tables ``ports`` and ``switches``). For a port or switch the inventory does not know, the
    blast radius decides: one port touching one GPU of one server is a server NIC's link; one
    switch touching one rail of one group is a leaf.

``checkpoint``
    A job's interruption risk or efficiency loss crossed a threshold: the finding is
    ``critical``, or ``details["efficiency_loss"]`` ≥ ``alerts.checkpoint_efficiency_loss``
    (default 0.05), or ``details["interruption_probability"]`` ≥
    ``alerts.checkpoint_interruption_probability`` (default 0.5).

``observe``
    Everything else, and every ``alert.resolved`` event (the fault is gone: nothing to do).

Affected jobs are the registered jobs (table ``jobs``) whose ``hosts`` intersect the alert
scope's ``servers``; each is reported with the hosts of it that are in scope.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from analyzer.config import AlertsConfig
from store.db import Connection

Action = Literal["drain", "checkpoint", "observe"]
ACTION_ORDER: dict[str, int] = {"observe": 0, "checkpoint": 1, "drain": 2}

#: Rules that can mean "a host lost its only path on a rail", depending on where they are.
_PLACE_DEPENDENT = frozenset({"link_outage", "stale_switch", "miswire"})


class AffectedJob(TypedDict):
    """One entry of a webhook body's ``jobs``."""

    id: str
    affected_hosts: list[str]


@dataclass(frozen=True, slots=True)
class ActionPolicy:
    """The ``checkpoint`` thresholds (from the ``alerts`` config section)."""

    checkpoint_efficiency_loss: float = 0.05
    checkpoint_interruption_probability: float = 0.5

    @classmethod
    def from_config(cls, config: AlertsConfig) -> ActionPolicy:
        return cls(config.checkpoint_efficiency_loss, config.checkpoint_interruption_probability)


@dataclass(frozen=True, slots=True)
class Placement:
    """What the inventory says about the switches and ports of some scopes."""

    #: switch name -> role (leaf|spine|superspine|unknown), for switches the inventory knows.
    roles: Mapping[str, str] = field(default_factory=dict)
    #: "switch:port" -> direction (down|up|None), for ports the inventory knows.
    ports: Mapping[str, str | None] = field(default_factory=dict)

    def is_leaf(self, switch: str, scope: Mapping[str, Any]) -> bool:
        role = self.roles.get(switch)
        if role is not None:
            return role == "leaf"
        return (
            len(_items(scope, "switches")) == 1
            and len(_items(scope, "rails")) == 1
            and len(_items(scope, "groups")) == 1
            and _gpus(scope) == len(_items(scope, "servers")) > 0
        )

    def is_host_port(self, port: str, scope: Mapping[str, Any]) -> bool:
        """Whether ``switch:port`` is a leaf down-port, i.e. the switch end of a server NIC's link."""
        if port in self.ports:
            return self.ports[port] == "down" and self.roles.get(port.split(":", 1)[0]) == "leaf"
        return len(_items(scope, "ports")) == 1 and len(_items(scope, "servers")) == 1 and _gpus(scope) == 1


def recommended_action(
    rule: str,
    severity: str,
    scope: Mapping[str, Any],
    details: Mapping[str, Any],
    *,
    placement: Placement | None = None,
    policy: ActionPolicy | None = None,
) -> Action:
    """The action for one firing alert, by the rules of this module's docstring."""
    placement = placement or Placement()
    policy = policy or ActionPolicy()
    if _host_path_lost(rule, scope, details, placement):
        return "drain"
    if severity == "critical":
        return "checkpoint"
    if _number(details.get("efficiency_loss")) >= policy.checkpoint_efficiency_loss:
        return "checkpoint"
    if _number(details.get("interruption_probability")) >= policy.checkpoint_interruption_probability:
        return "checkpoint"
    return "observe"


def _host_path_lost(rule: str, scope: Mapping[str, Any], details: Mapping[str, Any], placement: Placement) -> bool:
    if details.get("host_path_lost") is True:
        return True
    if rule == "miswire":
        expected, actual = details.get("expected_leaf"), details.get("actual_leaf")
        if expected is not None and actual is not None:
            return bool(expected != actual)
        return any(placement.is_host_port(p, scope) for p in _items(scope, "ports"))
    if rule == "link_outage":
        return details.get("down_now") is not False and any(
            placement.is_host_port(p, scope) for p in _items(scope, "ports")
        )
    if rule == "stale_switch":
        return any(placement.is_leaf(s, scope) for s in _items(scope, "switches"))
    return False


async def load_placement(conn: Connection, scopes: Iterable[tuple[str, Mapping[str, Any]]]) -> Placement:
    """The inventory facts the drain rule needs for these ``(rule, scope)`` pairs (one query each)."""
    switches: set[str] = set()
    ports: set[str] = set()
    for rule, scope in scopes:
        if rule not in _PLACE_DEPENDENT:
            continue
        switches.update(str(s) for s in _items(scope, "switches"))
        for port in _items(scope, "ports"):
            ports.add(str(port))
            switches.add(str(port).split(":", 1)[0])
    if not switches:
        return Placement()
    roles = {
        r["name"]: r["role"]
        for r in await conn.fetch("SELECT name, role FROM switches WHERE name = ANY($1::text[])", sorted(switches))
    }
    directions: dict[str, str | None] = {}
    if ports:
        split = [p.split(":", 1) for p in sorted(ports) if ":" in p]
        rows = await conn.fetch(
            """SELECT p.switch, p.port, p.direction
               FROM unnest($1::text[], $2::text[]) AS q(switch, port)
               JOIN ports p ON p.switch = q.switch AND p.port = q.port""",
            [s for s, _ in split],
            [p for _, p in split],
        )
        directions = {f"{r['switch']}:{r['port']}": r["direction"] for r in rows}
    return Placement(roles=roles, ports=directions)


async def affected_jobs(conn: Connection, servers: Sequence[str]) -> list[AffectedJob]:
    """Registered jobs whose hosts intersect ``servers``, each with its hosts in scope (sorted by id)."""
    if not servers:
        return []
    rows = await conn.fetch(
        """SELECT id, ARRAY(SELECT DISTINCT h FROM unnest(hosts) AS h WHERE h = ANY($1::text[]) ORDER BY h) AS hit
           FROM jobs WHERE hosts && $1::text[] ORDER BY id""",
        list(servers),
    )
    return [AffectedJob(id=r["id"], affected_hosts=list(r["hit"])) for r in rows]


def _items(scope: Mapping[str, Any], key: str) -> list[Any]:
    value = scope.get(key)
    return list(value) if isinstance(value, list | tuple) else []


def _gpus(scope: Mapping[str, Any]) -> int:
    value = scope.get("gpus")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _number(value: object) -> float:
    """A details value as a number; anything else (missing, text, NaN) never crosses a threshold."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return -math.inf
    return float(value)
