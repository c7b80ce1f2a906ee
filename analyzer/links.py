"""Links as the stability checks see them: one name per physical cable, a label, a blast radius.

Both ends of a cable report the same flap, outage or pause storm. A link is named by its
lower-tier *switch* end (a leaf's uplink, a spine's uplink, the leaf port of a server cable), so
whichever end a report comes from, the finding's key is the same. Its GPUs are those of that
naming end: a leaf uplink touches the leaf's rail GPUs, not every GPU under the spine at the other
end (which :func:`analyzer.findings.blast_radius` would count for a spine port); both ends are
listed in ``scope.ports``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime

from analyzer.findings import Scope, blast_radius
from fabric.model import TIER, Endpoint, Fabric, natural_key

PortKey = tuple[str, str]


def link_end(fabric: Fabric, switch: str, port: str) -> PortKey:
    """The end that names the physical link at ``switch:port``: its lower-tier switch end."""
    peer = fabric.peer(Endpoint(switch, port))
    here = fabric.switches.get(switch)
    there = fabric.switches.get(peer.node) if peer is not None else None
    if peer is None or here is None or there is None:
        return (switch, port)  # a server cable, an uncabled or unknown port: the switch end names it
    low = min((TIER[here.role], switch, port), (TIER[there.role], peer.node, peer.port))
    return (low[1], low[2])


def switch_ends(fabric: Fabric, switch: str, port: str) -> list[PortKey]:
    """The switch ends of the link at ``switch:port`` (one for a server cable or an uncabled port)."""
    peer = fabric.peer(Endpoint(switch, port))
    ends = [(switch, port)]
    if peer is not None and peer.node in fabric.switches:
        ends.append((peer.node, peer.port))
    return ends


def link_label(fabric: Fabric, switch: str, port: str) -> str:
    """``lf-g1-r1:swp65 ↔ sp-r1-1:swp1``, naming end first; just ``switch:port`` when uncabled."""
    end = link_end(fabric, switch, port)
    peer = fabric.peer(Endpoint(*end))
    return f"{end[0]}:{end[1]}" + (f" ↔ {peer.node}:{peer.port}" if peer is not None else "")


def links_scope(fabric: Fabric, ports: Iterable[PortKey], switches: Iterable[str] = ()) -> Scope:
    """The blast radius of faults on the links at ``ports``: GPUs from their naming ends, both ends listed."""
    ports = list(ports)
    scope = blast_radius(fabric, ports=sorted({link_end(fabric, s, p) for s, p in ports}))
    ends = {e for sp in ports for e in switch_ends(fabric, *sp)}
    names = {s for s, _ in ends} | set(switches)
    rails = set(scope.rails) | {r for n in names if n in fabric.switches and (r := fabric.switches[n].rail)}
    return replace(
        scope,
        switches=tuple(sorted(names)),
        ports=tuple(sorted(f"{s}:{p}" for s, p in ends)),
        rails=tuple(sorted(rails)),
    )


def human_s(seconds: float) -> str:
    """``0.5 s``, ``45 s``, ``5 min``, ``2 min 5 s``, ``3 h 10 min``: durations in summaries."""
    if seconds < 1:
        return f"{max(seconds, 0.0):.1f} s"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min" + (f" {s % 60} s" if s % 60 else "")
    return f"{s // 3600} h" + (f" {s % 3600 // 60} min" if s % 3600 // 60 else "")


def clock(t: datetime) -> str:
    """``12:00:03 UTC``: an instant in summaries (the details carry the full ISO time)."""
    return t.strftime("%H:%M:%S UTC")


def port_order(port: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key putting ``swp2`` before ``swp10`` and ``Ethernet1/2`` before ``Ethernet1/10``."""
    return natural_key(port)
