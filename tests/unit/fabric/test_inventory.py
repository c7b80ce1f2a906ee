"""Inventory YAML: its shape, exact round trips, hand-written files and the checks on load."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabric.errors import TopologyError
from fabric.inventory import dump_inventory, inventory_data, load_inventory
from fabric.model import Endpoint, FabricParams, Role
from fabric.topology import build_aipod

SMALL = FabricParams(gpus=16, rails=2, radix=8, speed_gbps=400)  # 8 servers: 2 groups of 4


def _load_data(data: dict[str, Any]) -> Any:
    return load_inventory(io.StringIO(yaml.safe_dump(data, sort_keys=False)))


def _data() -> dict[str, Any]:
    return inventory_data(build_aipod(SMALL))


@pytest.mark.parametrize(
    "params",
    [SMALL, FabricParams(gpus=512), FabricParams(gpus=12, rails=3, radix=4, speed_gbps=100)],
)
def test_round_trip_through_a_file(tmp_path: Path, params: FabricParams) -> None:
    fabric = build_aipod(params)
    path = tmp_path / "inventory.yaml"
    dump_inventory(fabric, path)
    assert load_inventory(path) == fabric
    assert load_inventory(str(path)) == fabric


def test_round_trip_keeps_mgmt_addresses(tmp_path: Path) -> None:
    fabric = build_aipod(SMALL)
    leaf = fabric.switches["lf-g1-r1"]
    fabric.switches["lf-g1-r1"] = dataclasses.replace(leaf, mgmt_address="10.0.0.11")
    path = tmp_path / "inventory.yaml"
    dump_inventory(fabric, path)
    loaded = load_inventory(path)
    assert loaded.switches["lf-g1-r1"].mgmt_address == "10.0.0.11"
    assert loaded == fabric


def test_yaml_layout() -> None:
    buf = io.StringIO()
    dump_inventory(build_aipod(SMALL), buf)
    text = buf.getvalue()
    assert text.startswith("# fabricmon inventory")
    assert "\n- [srv-g1-001, nic1, lf-g1-r1, swp1, server-leaf, 1, 400]\n" in text
    assert "\n- {name: ssp-1, role: superspine, index: 1, plane: 1, radix: 8, speed_gbps: 400}\n" in text
    data = yaml.safe_load(text)
    assert list(data) == ["version", "params", "switches", "servers", "links"]
    assert data["version"] == 1
    assert data["params"] == {"gpus": 16, "rails": 2, "radix": 8, "speed_gbps": 400}
    leaf = data["switches"][0]
    assert leaf == {"name": "lf-g1-r1", "role": "leaf", "index": 1, "group": 1, "rail": 1,
                    "radix": 8, "speed_gbps": 400}  # fmt: skip
    assert all(len(link) == 7 for link in data["links"])


def test_hand_written_inventory_with_defaults_and_missing_links() -> None:
    text = """
version: 1
params: {gpus: 16, rails: 8}
switches:
  - {name: leaf-a, role: leaf, group: 1, rail: 1, mgmt_address: "10.1.0.1"}
  - {name: leaf-b, role: leaf}
  - {name: spine-a, role: spine, rail: 1, radix: 64, speed_gbps: 800}
servers:
  - {name: gpu-node-1, group: 1, index: 1}
links:
  - [gpu-node-1, nic1, leaf-a, swp1, server-leaf, 1, 400]
  - [leaf-a, swp65, spine-a, swp1, leaf-spine, null, 400]
"""
    fabric = load_inventory(io.StringIO(text))
    assert fabric.switches["leaf-b"].index == 2
    assert fabric.switches["leaf-b"].radix == 128
    assert fabric.switches["spine-a"].index == 1
    assert fabric.switches["spine-a"].speed_gbps == 800
    assert fabric.switches["leaf-a"].mgmt_address == "10.1.0.1"
    assert fabric.servers["gpu-node-1"].gpus == 8
    assert fabric.leaf_for("gpu-node-1", 1) == "leaf-a"
    assert fabric.peer(Endpoint("spine-a", "swp1")) == Endpoint("leaf-a", "swp65")
    assert fabric.design_ratio("leaf-a") == 1.0
    assert fabric.design_ratio("spine-a") == float("inf")  # downlinks, no uplink
    assert fabric.summary()["oversubscription"] == float("inf")
    assert fabric.switches["leaf-b"].role is Role.LEAF
    with pytest.raises(TopologyError, match="not cabled"):
        fabric.leaf_for("gpu-node-1", 2)


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def mutate(data: dict[str, Any]) -> None:
        target: Any = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _append(key: str, value: Any) -> Any:
    return lambda data: data[key].append(value)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_set(("version",), 3), r"version: expected one of 1, 2, got 3"),
        (lambda d: d.pop("params"), r"params: missing"),
        (_set(("params", "gpus"), 13), r"params: gpus=13 is not a multiple of rails=2"),
        (_set(("params", "colour"), 1), r"params: unknown key 'colour'"),
        (_set(("extra",), 1), r"inventory: unknown key 'extra'"),
        (_set(("switches", 0, "role"), "lef"), r"switches\[0\] \(lf-g1-r1\): role must be one of leaf"),
        (_set(("switches", 0, "radix"), 7), r"switches\[0\] \(lf-g1-r1\): radix must be even"),
        (_set(("switches", 0, "rack"), 7), r"switches\[0\]: unknown key 'rack'"),
        (_set(("switches", 1, "name"), "lf-g1-r1"), r"switches\[1\] \(lf-g1-r1\): duplicate switch name"),
        (_set(("switches", 1, "index"), True), r"switches\[1\] \(lf-g1-r2\): index must be an integer"),
        (_set(("servers", 0, "name"), "lf-g1-r1"), r"servers\[0\] \(lf-g1-r1\): duplicate name"),
        (lambda d: d["servers"][0].pop("group"), r"servers\[0\] \(srv-g1-001\): group is missing"),
        (_set(("links", 0, 2), "lf-g9-r1"), r"links\[0\] .*: lf-g9-r1 should be a leaf but is an unknown"),
        (_set(("links", 0, 0), "ghost"), r"links\[0\] .*: ghost should be a server but is unknown"),
        (_set(("links", 0, 1), "eth0"), r"links\[0\] .*: srv-g1-001 has ports nic1..nic2, not 'eth0'"),
        (_set(("links", 0, 3), "swp9"), r"links\[0\] .*: lf-g1-r1 has ports swp1..swp8, not 'swp9'"),
        (_set(("links", 0, 3), "swp5"), r"links\[0\] .*: lf-g1-r1 swp5 faces up; this link needs a port facing down"),
        (_set(("links", 0, 4), "leaf-spine"), r"links\[0\] .*: srv-g1-001 should be a leaf but is a server"),
        (_set(("links", 0, 4), "cable"), r"links\[0\] .*: kind must be one of server-leaf"),
        (_set(("links", 0, 6), 0), r"links\[0\] .*: speed_gbps must be >= 1"),
        (_set(("links", 0), ["a", "b"]), r"links\[0\]: expected \[a_node, a_port"),
        (
            _append("links", ["srv-g1-001", "nic1", "lf-g1-r1", "swp4", "server-leaf", 1, 400]),
            r"links\[\d+\] .*: port srv-g1-001 nic1 is used by an earlier link",
        ),
        (_set(("links",), {"a": 1}), r"links: expected a list"),
    ],
)
def test_bad_inventory_names_the_entry(mutate: Any, message: str) -> None:
    data = _data()
    mutate(data)
    with pytest.raises(TopologyError, match=message) as info:
        _load_data(data)
    assert "\n" not in str(info.value)


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="cannot read inventory"):
        load_inventory(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nparams: [unclosed\n")
    with pytest.raises(TopologyError, match=r"bad.yaml: not valid YAML at line \d+"):
        load_inventory(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(TopologyError, match="inventory: expected a mapping"):
        load_inventory(empty)
