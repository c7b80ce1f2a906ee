"""Inventory version 2: a real fabric's cabling plan in its own names (SPEC §10.1), and its check."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric.design import design_report
from fabric.errors import TopologyError
from fabric.inventory import dump_inventory, load_inventory, parse_inventory, read_inventory
from fabric.model import Endpoint, FabricParams, LinkKind, Role
from fabric.naming import NAMINGS, NOS_NAMINGS, port_names
from fabric.topology import build_aipod

#: A two-tier fabric written by hand: 2 servers x 2 rails, 400G down, 800G up; one leaf per rail.
TWO_TIER = """\
version: 2
fabric: {name: pod-b, rails: 2}
switches:
- {name: leaf-b01, role: leaf, group: 1, rail: 1, nos: eos}
- {name: leaf-b02, role: leaf, group: 1, rail: 2, nos: junos}
- {name: spine-01, role: spine, nos: sonic}
servers:
- {name: gpu-b01-n01, group: 1, nics: {mlx5_0: 1, mlx5_1: 2}}
- {name: gpu-b01-n02, group: 1, nics: {mlx5_0: 1, mlx5_1: 2}}
links:
- [gpu-b01-n01, mlx5_0, leaf-b01, Ethernet1/1, 400]
- [gpu-b01-n02, mlx5_0, leaf-b01, Ethernet1/5, 400]
- [gpu-b01-n01, mlx5_1, leaf-b02, "et-0/0/0:0", 400]
- [gpu-b01-n02, mlx5_1, leaf-b02, "et-0/0/0:1", 400]
- [leaf-b01, Ethernet33/1, spine-01, Ethernet0, 800]
- [spine-01, Ethernet8, leaf-b02, "et-0/0/16", 800]
"""


def test_a_two_tier_fabric_with_800g_uplinks_over_400g_downlinks_is_non_blocking() -> None:
    fabric, anomalies = parse_inventory(TWO_TIER)
    assert anomalies == []
    assert fabric.top_role is Role.SPINE and fabric.summary()["tiers"] == 2
    assert fabric.capacity("leaf-b01") == (800, 800) and fabric.design_ratio("leaf-b01") == 1.0
    assert fabric.design_ratio("spine-01") == 1.0  # the top tier
    # a cable written upper end first is turned round; its kind and rail come from the tiers and the NIC
    link = fabric.link_at(Endpoint("spine-01", "Ethernet8"))
    assert link is not None and link.a == Endpoint("leaf-b02", "et-0/0/16") and link.kind is LinkKind.LEAF_SPINE
    assert link.rail == 2
    ports = {p.name: p.direction for p in fabric.ports("leaf-b02")}
    assert ports == {"et-0/0/0:0": "down", "et-0/0/0:1": "down", "et-0/0/16": "up"}
    assert fabric.leaf_for("gpu-b01-n02", 2) == "leaf-b02" and fabric.nic("gpu-b01-n02", 2) == "mlx5_1"
    assert fabric.gpus == 4 and fabric.rails == 2 and fabric.gpu_speed_gbps == 400
    report = design_report(fabric)
    assert report.clean and report.as_dict()["non_blocking"]


def test_one_lost_800g_uplink_is_drift_from_the_design() -> None:
    """The design is what the cables say: without one 800G uplink the leaf is blocking."""
    fabric, _ = parse_inventory(TWO_TIER.replace("- [leaf-b01, Ethernet33/1, spine-01, Ethernet0, 800]\n", ""))
    assert fabric.design_ratio("leaf-b01") == math.inf
    kinds = [a.kind for a in design_report(fabric).anomalies]
    assert kinds == ["no_uplink"]


def test_check_names_every_anomaly() -> None:
    text = (
        TWO_TIER.replace("[gpu-b01-n02, mlx5_0, leaf-b01, Ethernet1/5, 400]", "[gpu-b01-n02, mlx5_0, leaf-b02, xe-9, 400]")  # noqa: E501
        .replace("- [gpu-b01-n02, mlx5_1, leaf-b02, \"et-0/0/0:1\", 400]\n", "")
        .replace("leaf-b02, \"et-0/0/16\", 800]", "leaf-b02, \"et-0/0/16\", 400]")
        .replace("- [leaf-b01, Ethernet33/1, spine-01, Ethernet0, 800]\n", "- [leaf-b01, Ethernet33/1, spine-01, Ethernet0, 400]\n"  # noqa: E501
                 "- [leaf-b01, Ethernet34/1, spine-02, Ethernet0, 800]\n- [leaf-b01, Ethernet1/1, spine-01, Ethernet4, 400]\n")  # noqa: E501
    )  # fmt: skip
    fabric, anomalies = parse_inventory(text)
    report = design_report(fabric, anomalies)
    by_kind = {a.kind: a for a in report.anomalies}
    assert set(by_kind) >= {"unknown_node", "port_used_twice", "nic_wrong_rail", "missing_rail", "oversubscribed"}
    assert "spine-02" in by_kind["unknown_node"].message and by_kind["unknown_node"].line == 15
    assert "leaf-b01 Ethernet1/1 is already cabled" in by_kind["port_used_twice"].message
    assert (
        "gpu-b01-n02 mlx5_0 (rail 1) is cabled to leaf-b02 xe-9, a leaf of rail 2" in by_kind["nic_wrong_rail"].message
    )
    assert by_kind["missing_rail"].nodes == ("gpu-b01-n02",)
    assert not report.as_dict()["rail_optimized"] and not report.as_dict()["non_blocking"]
    with pytest.raises(TopologyError, match=r"line 15: links\[4\].*spine-02 is in no switches"):
        load_inventory(io.StringIO(text))


def test_uneven_uplinks_of_a_leaf_are_named() -> None:
    text = TWO_TIER.replace(
        "- [leaf-b01, Ethernet33/1, spine-01, Ethernet0, 800]\n",
        "- [leaf-b01, Ethernet33/1, spine-01, Ethernet0, 400]\n- [leaf-b01, Ethernet34/1, spine-02, Ethernet0, 400]\n"
        "- [leaf-b01, Ethernet35/1, spine-02, Ethernet4, 400]\n",
    ).replace(
        "- {name: spine-01, role: spine, nos: sonic}",
        "- {name: spine-01, role: spine}\n- {name: spine-02, role: spine}",
    )
    fabric, anomalies = parse_inventory(text)
    kinds = [a.kind for a in design_report(fabric, anomalies).anomalies]
    assert kinds == ["uneven_uplinks"]  # 1200G up over 800G down is not blocking, only skewed


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("{name: leaf-b01, role: leaf,", "{name: leaf-b01, role: lef,", r"line 4\b.*role must be one of"),
        ("{name: spine-01, role: spine, nos: sonic}", "{name: spine 01, role: spine}", r"line 6\b.*no space"),
        ("nics: {mlx5_0: 1, mlx5_1: 2}}\n- {name: gpu-b01-n02", "nics: {mlx5_0: 1, mlx5_1: 1}}\n- {name: gpu-b01-n02",
         r"line 8\b.*two NICs on rail 1"),
        ("[gpu-b01-n01, mlx5_0, leaf-b01, Ethernet1/1, 400]", "[gpu-b01-n01, mlx5_0, leaf-b01, Ethernet1/1]",
         r"line 11\b.*speed_gbps is missing"),
        ("[gpu-b01-n01, mlx5_0, leaf-b01, Ethernet1/1, 400]", "[gpu-b01-n01, mlx5_0, leaf-b01, Eth 1, 400]",
         r"line 11\b.*no white space"),
        ("fabric: {name: pod-b, rails: 2}", "fabric: {name: pod-b, rails: 2, colour: red}", r"line 2\b.*unknown key 'colour'"),  # noqa: E501
    ],
)  # fmt: skip
def test_a_bad_file_is_one_error_naming_the_entry_and_its_line(old: str, new: str, message: str) -> None:
    assert old in TWO_TIER
    with pytest.raises(TopologyError, match=message):
        parse_inventory(TWO_TIER.replace(old, new, 1))


def test_the_issue_example_loads() -> None:
    """The cabling plan the issue says was refused: a NIC named mlx5_0 on Ethernet1/1."""
    text = """\
version: 2
fabric: {rails: 1}
switches:
- {name: leaf1, role: leaf}
- {name: spine1, role: spine}
servers:
- {name: gpu-node-01, nics: {mlx5_0: 1}}
links:
- [gpu-node-01, mlx5_0, leaf1, Ethernet1/1, 400]
- [leaf1, Ethernet1/33, spine1, Ethernet1/1, 400]
"""
    fabric, anomalies = parse_inventory(text)
    assert anomalies == []
    # what the file leaves out is decided: the leaf's rail from its NIC, groups from the cables
    assert fabric.switches["leaf1"].rail == 1 and fabric.switches["leaf1"].group == 1
    assert fabric.switches["spine1"].rail == 1 and fabric.servers["gpu-node-01"].group == 1


@pytest.mark.parametrize("naming", NAMINGS)
def test_every_naming_round_trips_and_checks_clean(naming: str, tmp_path: Path) -> None:
    fabric = build_aipod(FabricParams(gpus=128, radix=16, rails=4), naming)
    path = tmp_path / "f.yaml"
    dump_inventory(fabric, path)
    back, anomalies = read_inventory(path)
    assert anomalies == []
    assert {(ln.a, ln.b, ln.kind, ln.rail, ln.speed_gbps) for ln in back.links} == {
        (ln.a, ln.b, ln.kind, ln.rail, ln.speed_gbps) for ln in fabric.links
    }
    for name, sw in fabric.switches.items():
        got = back.switches[name]
        assert (got.role, got.group, got.rail, got.nos) == (sw.role, sw.group, sw.rail, sw.nos)
    assert design_report(back).clean


def test_mixed_naming_deals_every_nos_and_mlx5_nics() -> None:
    fabric = build_aipod(FabricParams(gpus=512), "mixed")
    assert {sw.nos for sw in fabric.switches.values()} == set(NOS_NAMINGS)
    assert fabric.servers["srv-g1-001"].nic_rails()[0] == ("mlx5_0", 1)
    assert fabric.peer(Endpoint("srv-g1-001", "mlx5_3")) == Endpoint("lf-g1-r4", "et-0/0/0:0")  # junos
    assert fabric.peer(Endpoint("srv-g1-002", "mlx5_1")) == Endpoint("lf-g1-r2", "Ethernet1/5")  # eos breakout
    # the same cabling as the swp plan, port for port
    plain = build_aipod(FabricParams(gpus=512))
    assert [(ln.kind, ln.rail) for ln in fabric.links] == [(ln.kind, ln.rail) for ln in plain.links]


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([n for n in NAMINGS if n != "mixed"]), st.integers(min_value=2, max_value=64).map(lambda n: 2 * n)
)
def test_port_names_are_unique_and_free_of_white_space(naming: str, radix: int) -> None:
    names = port_names(naming, radix)
    assert len(set(names)) == radix
    assert not any(c.isspace() for n in names for c in n)


def test_inventory_check_exit_codes(tmp_path: Path) -> None:
    good, bad, broken = tmp_path / "good.yaml", tmp_path / "bad.yaml", tmp_path / "broken.yaml"
    good.write_text(TWO_TIER)
    bad.write_text(TWO_TIER.replace('leaf-b02, "et-0/0/16", 800]', 'leaf-b02, "et-0/0/16", 400]'))
    broken.write_text(TWO_TIER.replace("version: 2", "version: 9"))
    codes = {}
    for path in (good, bad, broken):
        run = subprocess.run(
            [sys.executable, "-m", "cli.main", "inventory", "check", str(path), "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        codes[path.name] = run.returncode
        if run.returncode != 2:
            body = json.loads(run.stdout)
            assert body["clean"] == (run.returncode == 0)
        else:
            assert "version: expected one of 1, 2, got 9" in run.stderr and "Traceback" not in run.stderr
    assert codes == {"good.yaml": 0, "bad.yaml": 1, "broken.yaml": 2}
