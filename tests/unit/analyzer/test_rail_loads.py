"""Rail loads (analyzer.rails.rail_loads): a rail whose GPU ports are not all known has no load,
never a zero one that would read as a straggler (a collector's first sample has no rate yet)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.rails import rail_loads
from analyzer.round_data import PortNow, Snapshot
from fabric.model import FabricParams, Role
from fabric.topology import build_aipod

FABRIC = build_aipod(FabricParams(gpus=64, rails=8, radix=16))
T = datetime(2026, 12, 3, tzinfo=UTC)
GPU_PORTS = [
    (name, p.name)
    for name, sw in sorted(FABRIC.switches.items())
    if sw.role is Role.LEAF
    for p in FABRIC.ports(name)
    if p.peer is not None and p.direction == "down"
]


def rail_of(switch: str) -> int:
    rail = FABRIC.switches[switch].rail
    assert rail is not None
    return rail


def flowing(gbps: float = 10.0) -> Snapshot:
    return {k: PortNow(True, 400 * 10**9, gbps * 1e9, gbps * 1e9, T) for k in GPU_PORTS}


def test_every_port_known_gives_every_rail_its_load() -> None:
    loads = rail_loads(FABRIC, flowing())
    per_rail = len(GPU_PORTS) // 8
    assert loads == {r: 20.0 * per_rail for r in range(1, 9)}


def test_a_down_port_carries_nothing_and_is_known() -> None:
    snap = flowing()
    down = GPU_PORTS[0]
    snap[down] = PortNow(False, None, None, None, T)
    loads = rail_loads(FABRIC, snap)
    assert rail_of(down[0]) in loads and loads[rail_of(down[0])] < max(loads.values())


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(GPU_PORTS), st.booleans())
def test_a_port_unreported_or_without_a_rate_leaves_its_rail_unknown(port: tuple[str, str], missing: bool) -> None:
    snap = flowing()
    if missing:
        del snap[port]
    else:  # up, first sample after a collector start: no rate yet
        snap[port] = PortNow(True, 400 * 10**9, None, None, T)
    loads = rail_loads(FABRIC, snap)
    assert rail_of(port[0]) not in loads
    assert set(loads) == set(range(1, 9)) - {rail_of(port[0])}
