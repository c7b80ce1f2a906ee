"""Oversubscription ratios per switch and their roll-ups per tier, rail, group and fabric (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.oversubscription import rollups, switch_ratios
from analyzer.round_data import PortNow, Ratio, Snapshot
from fabric.model import Fabric, FabricParams, Link, LinkKind
from fabric.topology import build_aipod

# 2 groups x 8 rails, radix 16: each leaf has 8 servers below and 8 uplinks, 4 to each of its rail's 2 spines.
FABRIC = build_aipod(FabricParams(gpus=128, radix=16))
NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
UPLINKS = [ln for ln in FABRIC.links if ln.kind is not LinkKind.SERVER_LEAF]


def snapshot(fabric: Fabric, lost: list[Link]) -> Snapshot:
    """Every cabled port up at 400G, except both ends of the ``lost`` links."""
    down = {(e.node, e.port) for ln in lost for e in (ln.a, ln.b)}
    return {
        (p.switch, p.name): PortNow((p.switch, p.name) not in down, 400 * 10**9, 0.0, 0.0, NOW)
        for name in fabric.switches
        for p in fabric.ports(name)
        if p.peer is not None
    }


def by_name(ratios: list[Ratio]) -> dict[str, Ratio]:
    return {r.name: r for r in ratios}


def test_a_lost_leaf_uplink_shows_at_rail_and_fabric_level() -> None:
    # lf-g1-r1 loses two of its 8 uplinks: 8:6 = 1.333. Summing leaves and spines together, the
    # spine's lost downlinks cancel the leaf's lost uplinks and rail 1 reads 1.000.
    lost = [ln for ln in UPLINKS if ln.a.node == "lf-g1-r1"][:2]
    switches = switch_ratios(FABRIC, snapshot(FABRIC, lost))
    assert by_name(switches)["lf-g1-r1"].ratio == pytest.approx(8 / 6)
    up = by_name(rollups(FABRIC, switches))
    assert up["rail-1"].ratio == pytest.approx(16 / 14)  # the rail's figure: its worst tier, ...
    assert up["fabric"].ratio == pytest.approx(128 / 126)
    assert up["rail-1/leaf"].ratio == pytest.approx(16 / 14)  # ... the rail's two leaves
    assert up["rail-1/spine"].ratio == pytest.approx(14 / 16)  # its spines lost downlinks, not uplinks
    assert (up["rail-1"].down_gbps, up["rail-1"].up_gbps) == (up["rail-1/leaf"].down_gbps, up["rail-1/leaf"].up_gbps)
    assert up["fabric/leaf"].ratio == pytest.approx(128 / 126)
    assert up["group-1"].ratio == pytest.approx(64 / 62) and up["group-2"].ratio == 1.0
    assert up["rail-2"].ratio == 1.0
    assert {r.scope for r in up.values()} == {"rail", "group", "fabric"}
    assert all(r.design_ratio == 1.0 for r in up.values())


def test_a_lost_spine_uplink_shows_in_the_spine_tier() -> None:
    lost = [ln for ln in UPLINKS if ln.a.node == "sp-r3-2"][:1]
    up = by_name(rollups(FABRIC, switch_ratios(FABRIC, snapshot(FABRIC, lost))))
    assert up["rail-3/spine"].ratio == pytest.approx(16 / 15) and up["rail-3"].ratio == pytest.approx(16 / 15)
    assert up["rail-3/leaf"].ratio == 1.0 and up["fabric/spine"].ratio == pytest.approx(128 / 127)


def test_a_clean_fabric_rolls_up_to_design() -> None:
    up = rollups(FABRIC, switch_ratios(FABRIC, snapshot(FABRIC, [])))
    assert {r.ratio for r in up} == {1.0}
    names = {r.name for r in up}
    assert {"fabric", "fabric/leaf", "fabric/spine", "rail-8", "rail-8/leaf", "rail-8/spine"} <= names
    assert {"group-2", "group-2/leaf"} <= names and "group-2/spine" not in names  # spines belong to no group


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(UPLINKS), max_size=12, unique=True))
def test_any_lost_uplink_raises_its_rail_and_the_fabric(lost: list[Link]) -> None:
    switches = switch_ratios(FABRIC, snapshot(FABRIC, lost))
    up = by_name(rollups(FABRIC, switches))
    hit = {ln.rail for ln in lost}
    for rail in range(1, 9):
        tiers = [up[f"rail-{rail}/leaf"], up[f"rail-{rail}/spine"]]
        assert up[f"rail-{rail}"].ratio == max(t.ratio for t in tiers)  # the worst tier
        if rail in hit:
            assert up[f"rail-{rail}"].ratio > 1.0
        else:
            assert up[f"rail-{rail}"].ratio == 1.0
    assert (up["fabric"].ratio > 1.0) == bool(lost)
    worst = max((r for r in switches), key=lambda r: r.ratio)
    assert up["fabric"].ratio <= worst.ratio  # an aggregate never exceeds its worst switch
    for tier in ("leaf", "spine"):
        members = [r for r in switches if FABRIC.switches[r.name].role == tier]
        t = up[f"fabric/{tier}"]
        assert t.down_gbps == sum(r.down_gbps for r in members) and t.up_gbps == sum(r.up_gbps for r in members)
