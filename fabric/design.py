"""The design a fabric describes, judged against what training needs (``fabricmon inventory check``).

A training fabric should be **rail-optimized** (NIC ``k`` of every server on a leaf of rail
``k``, every rail complete on every server, a leaf's uplinks on spines of its own rail when
spines are per rail) and **non-blocking** (below the top tier, every switch has as much
capacity up as down, spread evenly over the switches above it). Each departure is an
:class:`~fabric.anomaly.Anomaly`:

=====================  ========================================================================
kind                   what it means
=====================  ========================================================================
nic_wrong_rail         a server's NIC of rail k is cabled to a leaf of another rail
leaf_mixed_rails       a leaf's servers reach it from NICs of more than one rail
missing_rail           a server has no NIC (or no cable) for one of the fabric's rails
spine_wrong_rail       a leaf's uplink lands on a spine of another rail
oversubscribed         a switch below the top has more capacity down than up (ratio > 1)
uneven_uplinks         a leaf's uplink capacity differs between the spines it reaches (ECMP skew)
no_uplink              a switch below the top has downlinks and no uplink
=====================  ========================================================================

Cables the file itself could not hold (an unknown node, a port used twice...) come from the
loader (:func:`fabric.inventory.read_inventory`) and are listed first.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from fabric.anomaly import Anomaly
from fabric.model import TIER, Fabric, LinkKind, Role


@dataclass(frozen=True, slots=True)
class DesignReport:
    """A fabric's design figures and everything that departs from a rail-optimized, non-blocking one."""

    fabric: Fabric
    anomalies: tuple[Anomaly, ...]

    @property
    def clean(self) -> bool:
        """No anomaly: a rail-optimized, non-blocking design whose every cable is valid."""
        return not self.anomalies

    def as_dict(self) -> dict[str, Any]:
        """The JSON form of ``inventory check``."""
        f = self.fabric
        summary = f.summary()
        kinds = {a.kind for a in self.anomalies}
        switches: list[dict[str, Any]] = []
        by_role: dict[str, set[str]] = defaultdict(set)
        for name, sw in f.switches.items():
            down, up = f.capacity(name)
            ratio = f.design_ratio(name)
            switches.append(
                {
                    "name": name,
                    "role": sw.role.value,
                    "group": sw.group,
                    "rail": sw.rail,
                    "down_gbps": down,
                    "up_gbps": up,
                    "ratio": None if math.isinf(ratio) else round(ratio, 3),
                }
            )
            by_role[sw.role.value].add("inf" if math.isinf(ratio) else f"{ratio:g}")
        return {
            "fabric": f.label,
            "tiers": summary["tiers"],
            "rails": f.rails,
            "groups": summary["groups"],
            "servers": summary["servers"],
            "gpus": summary["gpus"],
            "switches": {role.value: summary[f"{_plural(role)}"] for role in Role if summary[_plural(role)]},
            "links": summary["links"],
            "capacity": [
                {"role": role, "ratios": ":1, ".join(sorted(ratios)) + ":1"} for role, ratios in by_role.items()
            ],
            "rail_optimized": not kinds & _RAIL_KINDS,
            "non_blocking": not kinds & _BLOCKING_KINDS,
            "clean": self.clean,
            "anomalies": [a.as_dict() for a in self.anomalies],
            "per_switch": switches,
        }


_RAIL_KINDS = {"nic_wrong_rail", "leaf_mixed_rails", "missing_rail", "spine_wrong_rail"}
_BLOCKING_KINDS = {"oversubscribed", "uneven_uplinks", "no_uplink"}


def _plural(role: Role) -> str:
    return {Role.LEAF: "leaves", Role.SPINE: "spines", Role.SUPERSPINE: "superspines"}[role]


def design_report(fabric: Fabric, file_anomalies: list[Anomaly] | tuple[Anomaly, ...] = ()) -> DesignReport:
    """Judge ``fabric``'s design; ``file_anomalies`` (cables the file could not hold) come first."""
    found = [*file_anomalies, *_rail_anomalies(fabric), *_capacity_anomalies(fabric)]
    return DesignReport(fabric, tuple(found))


def _rail_anomalies(fabric: Fabric) -> list[Anomaly]:
    out: list[Anomaly] = []
    leaf_rails: dict[str, Counter[int]] = defaultdict(Counter)
    cabled: dict[str, set[int]] = defaultdict(set)
    for ln in fabric.links:
        if ln.kind is LinkKind.SERVER_LEAF:
            rail = fabric.nic_rail(ln.a.node, ln.a.port)
            leaf = fabric.switches[ln.b.node]
            if rail is None:
                continue
            cabled[ln.a.node].add(rail)
            leaf_rails[leaf.name][rail] += 1
            if leaf.rail is not None and leaf.rail != rail:
                out.append(
                    Anomaly(
                        "nic_wrong_rail",
                        f"{ln.a.node} {ln.a.port} (rail {rail}) is cabled to {leaf.name} {ln.b.port}, "
                        f"a leaf of rail {leaf.rail}",
                        (ln.a.node, leaf.name),
                    )
                )
        elif ln.kind is LinkKind.LEAF_SPINE:
            leaf, spine = fabric.switches[ln.a.node], fabric.switches[ln.b.node]
            if leaf.rail is not None and spine.rail is not None and leaf.rail != spine.rail:
                out.append(
                    Anomaly(
                        "spine_wrong_rail",
                        f"{leaf.name} {ln.a.port} (rail {leaf.rail}) is cabled to {spine.name} {ln.b.port}, "
                        f"a spine of rail {spine.rail}",
                        (leaf.name, spine.name),
                    )
                )
    for name, rails in leaf_rails.items():
        if len(rails) > 1:
            spread = ", ".join(f"rail {r}: {n}" for r, n in sorted(rails.items()))
            out.append(Anomaly("leaf_mixed_rails", f"{name} has servers from more than one rail ({spread})", (name,)))
    every = set(range(1, fabric.rails + 1))
    for server in fabric.servers.values():
        listed = {rail for _, rail in server.nic_rails()}
        if gone := sorted(every - listed):
            out.append(Anomaly("missing_rail", f"{server.name} has no NIC for rail {_list(gone)}", (server.name,)))
        elif dark := sorted(listed - cabled.get(server.name, set())):
            out.append(
                Anomaly("missing_rail", f"{server.name} has no cable on its NIC of rail {_list(dark)}", (server.name,))
            )
    return out


def _capacity_anomalies(fabric: Fabric) -> list[Anomaly]:
    out: list[Anomaly] = []
    top = TIER[fabric.top_role]
    per_upper: dict[str, Counter[str]] = defaultdict(Counter)
    for ln in fabric.links:
        if ln.kind is not LinkKind.SERVER_LEAF:
            per_upper[ln.a.node][ln.b.node] += ln.speed_gbps
    for name, sw in fabric.switches.items():
        if TIER[sw.role] >= top:
            continue
        down, up = fabric.capacity(name)
        if down and not up:
            out.append(Anomaly("no_uplink", f"{name} has {down}G down and no uplink", (name,)))
            continue
        if down > up:
            out.append(Anomaly("oversubscribed", f"{name} has {down}G down over {up}G up ({down / up:.2f}:1)", (name,)))
        uppers = per_upper.get(name)
        if sw.role is Role.LEAF and uppers and len(set(uppers.values())) > 1:
            spread = ", ".join(f"{n} {g}G" for n, g in sorted(uppers.items()))
            out.append(Anomaly("uneven_uplinks", f"{name} has uneven uplinks: {spread}", (name, *sorted(uppers))))
    return out


def _list(values: list[int]) -> str:
    return ", ".join(map(str, values)) if len(values) <= 8 else f"{', '.join(map(str, values[:8]))}..."
