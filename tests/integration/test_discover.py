"""``fabricmon inventory discover`` against ``fabricmon sim`` on loopback: real gNMI, real SNMP, no mocks.

The simulator serves a 512-GPU AIPod whose switches run every NOS naming (``--naming mixed``: EOS,
SONiC, Junos, IOS XR, SR Linux, Cumulus and OpenConfig port names, gNMI shapes, LLDP and ifIndex
schemes; servers' lldpd sends MAC port ids). Discovery starts from one leaf (plus the exact names
the written config lists) and crawls the rest; the inventory it writes must be the fabric's
cabling plan, cable for cable, with the same roles, leaf rails and server groups.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabric.inventory import dump_inventory, read_inventory
from fabric.model import Fabric, FabricParams, Role
from fabric.topology import build_aipod
from tests.support.sim_process import SimProcess, started_sim

SIM_ARGS = ("--gnmi", "127.0.0.1:0", "--snmp", "127.0.0.1:0")
SWITCHES = 20  # 8 leaves, 8 spines, 4 superspines


def pairs(fabric: Fabric) -> set[frozenset[tuple[str, str]]]:
    return {frozenset({(ln.a.node, ln.a.port), (ln.b.node, ln.b.port)}) for ln in fabric.links}


def groups(fabric: Fabric) -> set[frozenset[str]]:
    by: dict[int, set[str]] = {}
    for s in fabric.servers.values():
        by.setdefault(s.group, set()).add(s.name)
    return {frozenset(v) for v in by.values()}


def discover(d: Path, config: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    """``fabricmon inventory discover`` as a process, its config written to ``d``."""
    cfg = d / "discover.yaml"
    cfg.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "cli.main", "inventory", "discover", "--config", str(cfg), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("protocols", ["mixed", "gnmi", "snmp"])
def test_discovery_rebuilds_the_cabling_plan_of_a_mixed_vendor_fabric(tmp_path: Path, protocols: str) -> None:
    truth = build_aipod(FabricParams(gpus=512), naming="mixed")
    args = ("--gpus", "512", "--naming", "mixed", "--protocols", protocols, "--control", "", *SIM_ARGS)
    with started_sim(tmp_path, args, SWITCHES) as sim:
        config = {"targets": sim.config["targets"]}  # no inventory: seeds are the names below and the exact targets
        (tmp_path / "seeds.txt").write_text("# one leaf; the rest is crawled\nlf-g1-r1\n")
        out = tmp_path / "found.yaml"
        done = discover(tmp_path, config, "--switches", str(tmp_path / "seeds.txt"), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads(done.stdout)
    assert report["clean"] and report["switches"]["answered"] == SWITCHES
    found, anomalies = read_inventory(out)
    assert anomalies == []
    assert pairs(found) == pairs(truth)
    assert {n: sw.role for n, sw in found.switches.items()} == {n: sw.role for n, sw in truth.switches.items()}
    leaves = {n for n, sw in truth.switches.items() if sw.role is Role.LEAF}
    assert {n: found.switches[n].rail for n in leaves} == {n: truth.switches[n].rail for n in leaves}
    assert groups(found) == groups(truth)
    assert {s.name: s.nics for s in found.servers.values()} == {s.name: s.nics for s in truth.servers.values()}
    assert {ln.speed_gbps for ln in found.links} == {400}


def onyx_inventory(path: Path, onyx: str) -> Fabric:
    """The mixed-naming 512-GPU fabric with ``onyx`` running NVIDIA Onyx (LLDP port ids: MACs)."""
    fabric = build_aipod(FabricParams(gpus=512), naming="mixed")
    dump_inventory(fabric, path)
    doc = yaml.safe_load(path.read_text())
    for entry in doc["switches"]:
        if entry["name"] == onyx:
            entry["nos"] = "onyx"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return fabric


def test_a_miswire_a_silent_switch_and_a_mac_port_id_each_show_in_the_report(tmp_path: Path) -> None:
    inventory = tmp_path / "plan.yaml"
    truth = onyx_inventory(inventory, "ssp-1")
    args = ("--inventory", str(inventory), "--control", "127.0.0.1:0", *SIM_ARGS)
    with started_sim(tmp_path, args, SWITCHES) as sim:
        swap = _apply(sim, {"kind": "miswire", "server": "srv-g1-001", "gpu": 1, "to_leaf": "lf-g1-r2"})
        _apply(sim, {"kind": "switch_unreachable", "switch": "sp-r3-1"})
        out, report_file = tmp_path / "found.yaml", tmp_path / "report.json"
        done = discover(tmp_path, sim.config, "--out", str(out), "--report", str(report_file), "--timeout-s", "2")
    assert done.returncode == 1, done.stderr
    report = json.loads(report_file.read_text())
    human = done.stderr

    # the switch that does not answer is named, never a silent hole; its cables come from its neighbours
    assert [(u["switch"], u["protocol"]) for u in report["unreachable"]] == [("sp-r3-1", "snmp")]
    assert "switches did not answer (1):" in human and "sp-r3-1 (snmp " in human
    found, _ = read_inventory(out)
    assert found.switches["sp-r3-1"].role is Role.SPINE

    # Onyx's MAC port ids: matched through its own LLDP table, and said so
    macs = report["mac_port_ids_matched"]
    assert macs and all("ssp-1 gave its port id as a MAC" in m and "names the port" in m for m in macs)
    # every cable of ssp-1's but those to the silent sp-r3-1 (seen from ssp-1's end alone)
    matched = sum(1 for ln in truth.links if ln.b.node == "ssp-1" and ln.a.node != "sp-r3-1")
    assert len(macs) == matched and report["mac_port_ids"] == []
    assert (
        f"port ids given as a MAC, matched through the switch's own LLDP table (1):\n  ssp-1: {matched} port(s)"
        in human
    )

    # the miswire: two NICs swapped between rail 1's and rail 2's leaf, which breaks the rail plan
    moved = pairs(found) ^ pairs(truth)
    assert len(moved) == 4, moved
    assert frozenset({("srv-g1-001", "mlx5_0"), ("lf-g1-r2", swap["to_port"])}) in moved
    wrong = [a for a in report["anomalies"] if a["kind"] == "nic_wrong_rail"]
    assert {tuple(a["nodes"]) for a in wrong} == {
        ("srv-g1-001", "lf-g1-r2"),
        (swap["swapped_with"].split(":")[0], "lf-g1-r1"),
    }
    assert "nic_wrong_rail: srv-g1-001 mlx5_0 (rail 1) is cabled to lf-g1-r2" in human

    # nothing else moved, and nothing is missing
    assert len(pairs(found)) == len(pairs(truth))
    assert report["conflicts"] == [] and report["unresolved"] == []


def _apply(sim: SimProcess, fault: dict[str, Any]) -> dict[str, Any]:
    """POST a fault to the simulator's control endpoint; the fault as applied (``to_port``, ``swapped_with``)."""
    req = urllib.request.Request(
        f"{sim.control.url}/faults",
        data=json.dumps(fault).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        applied: dict[str, Any] = json.loads(r.read())
    return applied
