"""Discovery's pure logic: LLDP tables → cables, roles, rails and groups, and the report of what it could not decide."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

import pytest
from pygnmi.spec.v080 import gnmi_pb2

from collector.config import TargetConfig
from config.errors import ConfigError
from discovery.build import build
from discovery.errors import DiscoveryError
from discovery.graph import cable_graph
from discovery.lldp_gnmi import ifindex_pairs
from discovery.lldp_snmp import REM_PORTS, SYS_DESCR, SYS_NAME, TEXT_BYTES, nos_from_descr, table_from_columns
from discovery.run import CrawlResult, Failure
from discovery.seeds import Targets, read_switches_file, seed_names
from discovery.tables import Neighbor, SwitchTable, port_id_kind
from fabric.model import Fabric, FabricParams, Role, Switch
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState


def nb(system: str, port_id: str, desc: str = "", kind: str | None = None) -> Neighbor:
    return Neighbor(system, port_id, desc, "02:00:00:00:00:01", kind or port_id_kind(port_id))  # type: ignore[arg-type]


def table(switch: str, neighbors: dict[str, Neighbor | list[Neighbor]], **kw: object) -> SwitchTable:
    rows = {p: tuple(n) if isinstance(n, list) else (n,) for p, n in neighbors.items()}
    return SwitchTable(switch, "snmp", rows, **kw)  # type: ignore[arg-type]


def pairs(cables: Iterable[object]) -> set[frozenset[tuple[str, str]]]:
    return {frozenset({(c.a_node, c.a_port), (c.b_node, c.b_port)}) for c in cables}  # type: ignore[attr-defined]


# -- port ids -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("port_id", "subtype", "kind"),
    [
        ("Ethernet1/1", None, "name"),
        ("Ethernet1/1", 5, "name"),
        ("517", 7, "local"),
        ("517", None, "local"),
        ("et-0/0/1:2", 7, "name"),  # a local id that is a name
        ("02:84:ec:e6:48:43", None, "mac"),
        ("02-84-EC-E6-48-43", None, "mac"),
        ("0284.ece6.4843", None, "mac"),
        ("02:84:ec:e6:48:43", 3, "mac"),
        ("24", 5, "name"),  # a port named "24", as its subtype says
    ],
)
def test_a_port_id_is_read_by_its_subtype_else_its_shape(port_id: str, subtype: int | None, kind: str) -> None:
    assert port_id_kind(port_id, subtype) == kind


# -- cables -------------------------------------------------------------------------------------


def test_a_cable_seen_from_both_ends_is_one_cable_and_a_server_is_named_by_its_nic() -> None:
    tables = {
        "leaf1": table(
            "leaf1",
            {"Ethernet1/1": nb("srv1", "02:aa:00:00:00:01", "mlx5_0"), "Ethernet33/1": nb("spine1", "Ethernet0")},
            speeds_gbps={"Ethernet1/1": 400, "Ethernet33/1": 800},
        ),
        "spine1": table("spine1", {"Ethernet0": nb("leaf1", "Ethernet33/1")}, speeds_gbps={"Ethernet0": 800}),
    }
    g = cable_graph(tables)
    assert pairs(g.cables) == {
        frozenset({("srv1", "mlx5_0"), ("leaf1", "Ethernet1/1")}),
        frozenset({("leaf1", "Ethernet33/1"), ("spine1", "Ethernet0")}),
    }
    server = next(c for c in g.cables if c.a_node == "srv1")
    assert (server.a_port, server.speed_gbps) == ("mlx5_0", 400)
    assert g.switches == {"leaf1", "spine1"}
    assert not any(vars_of(g.report))


def vars_of(report: object) -> list[list[str]]:
    return [
        getattr(report, f) for f in ("conflicts", "unresolved", "mac_port_ids", "mac_matched", "one_sided", "notes")
    ]


def test_a_junos_local_port_id_goes_through_the_remote_ifindex_map_else_its_description() -> None:
    spine = table("spine1", {"Ethernet0": nb("leaf1", "517", "et-0/0/8:0")})
    read = {"spine1": spine, "leaf1": table("leaf1", {}, if_names={517: "et-0/0/8:0"}, ports=frozenset({"et-0/0/8:0"}))}
    assert pairs(cable_graph(read).cables) == {frozenset({("spine1", "Ethernet0"), ("leaf1", "et-0/0/8:0")})}
    # the ifIndex map wins over a description that says something else
    lying = {**read, "spine1": table("spine1", {"Ethernet0": nb("leaf1", "517", "uplink to spine1")})}
    assert pairs(cable_graph(lying).cables) == {frozenset({("spine1", "Ethernet0"), ("leaf1", "et-0/0/8:0")})}
    # leaf1 not read: Junos puts the port's name in the description
    alone = cable_graph({"spine1": spine})
    assert pairs(alone.cables) == {frozenset({("spine1", "Ethernet0"), ("leaf1", "et-0/0/8:0")})}
    nameless = cable_graph({"spine1": table("spine1", {"Ethernet0": nb("leaf1", "517")})})
    assert nameless.cables == [] and "517 (a local number)" in nameless.report.unresolved[0]


def test_a_switch_that_gives_a_mac_port_id_is_matched_through_its_own_table() -> None:
    tables = {
        "leaf1": table("leaf1", {"Ethernet33/1": nb("onyx1", "02:11:22:33:44:55", "Eth1/1")}),
        "onyx1": table("onyx1", {"Eth1/1": nb("leaf1", "Ethernet33/1")}),
    }
    g = cable_graph(tables)
    assert pairs(g.cables) == {frozenset({("leaf1", "Ethernet33/1"), ("onyx1", "Eth1/1")})}
    assert g.report.mac_port_ids == [] and g.report.mac_matched_by == {"onyx1": 1}
    assert "names the port: Eth1/1" in g.report.mac_matched[0]


def test_a_mac_port_id_of_a_switch_that_did_not_answer_is_reported_and_its_cable_left_out() -> None:
    leaf = table("leaf1", {"Ethernet33/1": nb("onyx1", "02:11:22:33:44:55", "Eth1/1")})
    g = cable_graph({"leaf1": leaf}, known_switches={"onyx1"})
    assert g.cables == []
    assert "onyx1 gave its port id as a MAC (02:11:22:33:44:55)" in g.report.mac_port_ids[0]
    assert "cable left out" in g.report.mac_port_ids[0]
    # not known as a switch: a MAC port id with a description is a server's NIC
    assert pairs(cable_graph({"leaf1": leaf}).cables) == {frozenset({("leaf1", "Ethernet33/1"), ("onyx1", "Eth1/1")})}


def test_ends_that_disagree_keep_what_both_ends_report_and_say_so() -> None:
    tables = {
        "leaf1": table("leaf1", {"Ethernet33/1": nb("spine1", "Ethernet0")}),  # stale: spine1 Ethernet0 sees leaf2
        "leaf2": table("leaf2", {"Ethernet33/1": nb("spine1", "Ethernet0")}),
        "spine1": table("spine1", {"Ethernet0": nb("leaf2", "Ethernet33/1")}),
    }
    g = cable_graph(tables)
    assert pairs(g.cables) == {frozenset({("leaf2", "Ethernet33/1"), ("spine1", "Ethernet0")})}
    (conflict,) = g.report.conflicts
    assert "leaf1 Ethernet33/1 sees spine1 Ethernet0" in conflict
    assert "kept what both ends report (leaf2 Ethernet33/1 and spine1 Ethernet0 see each other)" in conflict


def test_ends_that_disagree_with_no_confirmed_cable_are_all_left_out() -> None:
    tables = {
        "leaf1": table("leaf1", {"Ethernet1/1": nb("srv1", "02:aa:00:00:00:01", "mlx5_0")}),
        "leaf2": table("leaf2", {"Ethernet1/1": nb("srv1", "02:aa:00:00:00:01", "mlx5_0")}),
    }
    g = cable_graph(tables)
    assert g.cables == [] and "all left out" in g.report.conflicts[0]


def test_entries_that_cannot_be_a_cable_are_reported() -> None:
    g = cable_graph(
        {
            "leaf1": table(
                "leaf1",
                {
                    "Ethernet1/1": [
                        nb("srv1", "02:aa:00:00:00:01", "mlx5_0"),
                        nb("srv2", "02:aa:00:00:00:02", "mlx5_0"),
                    ],
                    "Ethernet1/5": nb("srv3", "02:aa:00:00:00:03"),  # lldpd without a port description
                    "Ethernet1/9": nb("", "Ethernet4"),
                    "Ethernet2/1": nb("leaf1", "Ethernet2/5"),  # a loop back into itself
                },
            )
        }
    )
    assert g.cables == []
    text = "\n".join(g.report.unresolved)
    assert "Ethernet1/1: 2 LLDP neighbours" in text
    assert "server srv3 gave its port id as a MAC" in text
    assert "without a system name" in text
    assert "sees leaf1 itself" in text


def test_a_cable_one_end_does_not_report_and_speeds_that_differ_are_noted() -> None:
    tables = {
        "leaf1": table("leaf1", {"Ethernet33/1": nb("spine1", "Ethernet0")}, speeds_gbps={"Ethernet33/1": 400}),
        "spine1": table("spine1", {}, ports=frozenset({"Ethernet0"}), speeds_gbps={"Ethernet0": 200}),
    }
    g = cable_graph(tables)
    (cable,) = g.cables
    assert cable.speed_gbps == 200
    assert "spine1 shows no LLDP neighbour" in g.report.one_sided[0]
    assert "different speeds" in g.report.notes[0]


def test_neighbours_named_by_fqdn_or_sysname_are_the_switches_polled() -> None:
    tables = {
        "leaf1": table("leaf1", {"Ethernet33/1": nb("spine1.pod.example", "Ethernet0")}, system_name="leaf1"),
        "spine1": table("spine1", {"Ethernet0": nb("LEAF-01", "Ethernet33/1")}, system_name="spine1"),
    }
    tables["leaf1"].system_name = "LEAF-01"
    assert pairs(cable_graph(tables).cables) == {frozenset({("leaf1", "Ethernet33/1"), ("spine1", "Ethernet0")})}


# -- the whole fabric, from the simulator's own LLDP tables ------------------------------------------


def sim_tables(fabric: Fabric | FabricState, skip: Iterable[str] = ()) -> dict[str, SwitchTable]:
    """Each switch's LLDP table as the simulator builds it (no sockets), as a reader would give it."""
    wiring = (fabric if isinstance(fabric, FabricState) else FabricState(fabric, seed=1)).wiring
    out: dict[str, SwitchTable] = {}
    for name, sw in wiring.switches.items():
        if name in skip:
            continue
        rows: dict[str, tuple[Neighbor, ...]] = {}
        for n in wiring.lldp(sw):
            kind = port_id_kind(n.port_id, n.port_id_subtype)
            rows[n.local_port] = (Neighbor(n.system_name, n.port_id, n.port_description, n.chassis_id, kind),)
        out[name] = SwitchTable(
            name,
            "snmp",
            rows,
            if_names={p.if_index: p.name for p in sw.ports},
            ports=frozenset(p.name for p in sw.ports),
            speeds_gbps={p.name: p.wire.speed_bps // 10**9 for p in sw.ports},
        )
    return out


def groups_of(fabric: Fabric) -> set[frozenset[str]]:
    by: dict[int, set[str]] = {}
    for s in fabric.servers.values():
        by.setdefault(s.group, set()).add(s.name)
    return {frozenset(v) for v in by.values()}


@pytest.mark.parametrize("naming", ["mixed", "swp", "junos"])
def test_a_fabric_is_rebuilt_from_its_lldp_tables(naming: str) -> None:
    truth = build_aipod(FabricParams(gpus=256, radix=16), naming=naming)  # 4 groups, 64 switches
    crawl = CrawlResult(tables=sim_tables(truth))
    report = build(crawl, {})
    found = report.fabric
    assert found is not None and report.clean, report.human()
    assert pairs_of(found) == pairs_of(truth)
    assert {n: sw.role for n, sw in found.switches.items()} == {n: sw.role for n, sw in truth.switches.items()}
    leaves = [n for n, sw in truth.switches.items() if sw.role is Role.LEAF]
    assert {n: found.switches[n].rail for n in leaves} == {n: truth.switches[n].rail for n in leaves}
    assert groups_of(found) == groups_of(truth)
    assert {(ln.speed_gbps) for ln in found.links} == {400}


def pairs_of(fabric: Fabric) -> set[frozenset[tuple[str, str]]]:
    return {frozenset({(ln.a.node, ln.a.port), (ln.b.node, ln.b.port)}) for ln in fabric.links}


def test_a_switch_that_did_not_answer_keeps_its_cables_from_its_neighbours_and_is_reported() -> None:
    truth = build_aipod(FabricParams(gpus=256, radix=16), naming="mixed")
    gone = "sp-r2-1"
    crawl = CrawlResult(tables=sim_tables(truth, skip={gone}), failed={gone: Failure(gone, "no answer within 2 s")})
    report = build(crawl, {})
    assert report.fabric is not None and pairs_of(report.fabric) == pairs_of(truth)
    assert report.fabric.switches[gone].role is Role.SPINE
    assert not report.clean and report.as_dict()["unreachable"] == [
        {"switch": gone, "protocol": None, "address": None, "error": "no answer within 2 s"}
    ]
    assert gone in report.human()


def test_a_miswired_nic_breaks_the_rail_plan_in_the_report() -> None:
    truth = build_aipod(FabricParams(gpus=256, radix=16), naming="eos")
    state = FabricState(truth, seed=1)
    state.apply({"kind": "miswire", "server": "srv-g1-001", "gpu": 1, "to_leaf": "lf-g1-r2"})
    tables = sim_tables(state)
    report = build(CrawlResult(tables=tables), {})
    kinds = {a.kind for a in report.anomalies}
    assert "nic_wrong_rail" in kinds, report.human()
    assert any("srv-g1-001 mlx5_0 (rail 1) is cabled to lf-g1-r2" in a.message for a in report.anomalies)
    assert json.loads(json.dumps(report.as_dict()))["anomalies"]


def test_role_patterns_override_and_name_a_mac_only_neighbour_a_switch() -> None:
    tables = {"leaf1": table("leaf1", {"Ethernet1/1": nb("srv1", "02:aa:00:00:00:01", "mlx5_0"),
                                       "Ethernet33/1": nb("onyx1", "02:11:22:33:44:55", "Eth1/1")})}  # fmt: skip
    report = build(CrawlResult(tables=tables), {"spine": re.compile("^onyx")})
    assert report.fabric is not None and set(report.fabric.switches) == {"leaf1"}
    assert "onyx1 gave its port id as a MAC" in report.graph.mac_port_ids[0]


# -- the SNMP and gNMI answers as tables ---------------------------------------------------------------


def test_snmp_answers_become_a_table_with_local_ports_subtypes_and_speeds() -> None:
    interfaces = {
        "name": {"501": b"et-0/0/0:0", "502": b"et-0/0/0:1", "503": b""},
        "descr": {"503": b"em0"},
        "high_speed_mbps": {"501": 400_000, "502": 0},
    }
    loc = {
        "id_subtype": {"1": 7, "2": 7},
        "port_id": {"1": b"501", "2": b"502"},
        "port_desc": {"1": b"et-0/0/0:0", "2": b"et-0/0/0:1"},
    }
    rem = {
        "port_subtype": {"0.1.1": 3, "0.2.1": 5},
        "port_id": {"0.1.1": bytes.fromhex("02aabbccddee"), "0.2.1": b"Ethernet0"},
        "port_desc": {"0.1.1": b"mlx5_0", "0.2.1": b""},
        "system_name": {"0.1.1": b"srv1", "0.2.1": b"spine1"},
    }
    scalars = {SYS_NAME: b"leaf1", SYS_DESCR: b"Juniper Networks, Inc. qfx5230 Junos"}
    t = table_from_columns("leaf1", scalars, interfaces, loc, rem)  # type: ignore[arg-type]
    assert t.neighbors == {
        "et-0/0/0:0": (Neighbor("srv1", "02:aa:bb:cc:dd:ee", "mlx5_0", "", "mac"),),
        "et-0/0/0:1": (Neighbor("spine1", "Ethernet0", "", "", "name"),),
    }
    assert t.if_names == {501: "et-0/0/0:0", 502: "et-0/0/0:1", 503: "em0"}
    assert t.speeds_gbps == {"et-0/0/0:0": 400}
    assert (t.system_name, t.nos) == ("leaf1", "junos")
    assert nos_from_descr("Arista Networks EOS version 4.31") == "eos" and nos_from_descr("Linux box") is None
    assert [c.field for c in REM_PORTS] == ["port_subtype", "port_id", "port_desc", "system_name"]
    assert {c.max_value_bytes for c in REM_PORTS if c.kind == "bytes"} == {TEXT_BYTES}


def path(*elems: tuple[str, dict[str, str]] | str) -> gnmi_pb2.Path:
    return gnmi_pb2.Path(
        elem=[
            gnmi_pb2.PathElem(name=e) if isinstance(e, str) else gnmi_pb2.PathElem(name=e[0], key=e[1]) for e in elems
        ]
    )


def test_gnmi_ifindex_answers_leaf_by_leaf_and_as_json_containers() -> None:
    value = gnmi_pb2.TypedValue(uint_val=503)
    leaf = gnmi_pb2.SubscribeResponse(
        update=gnmi_pb2.Notification(
            prefix=path("interfaces", ("interface", {"name": "et-0/0/1:0"})),
            update=[gnmi_pb2.Update(path=path("state", "ifindex"), val=value)],
        )
    )
    doc = {"openconfig-interfaces:interface": [{"name": "Ethernet1/1", "state": {"ifindex": "1001"}}]}
    value = gnmi_pb2.TypedValue(json_ietf_val=json.dumps(doc).encode())
    container = gnmi_pb2.SubscribeResponse(
        update=gnmi_pb2.Notification(update=[gnmi_pb2.Update(path=path("interfaces"), val=value)])
    )
    assert list(ifindex_pairs(leaf)) == [(503, "et-0/0/1:0")]
    assert list(ifindex_pairs(container)) == [(1001, "Ethernet1/1")]
    assert list(ifindex_pairs(gnmi_pb2.SubscribeResponse(sync_response=True))) == []


# -- seeds and targets ------------------------------------------------------------------------------


def test_seeds_are_the_inventory_the_exact_target_names_and_the_listed_ones(tmp_path: Path) -> None:
    listed = tmp_path / "switches.txt"
    listed.write_text("# core\nssp-1\n\nlf-g1-r1   # twice\n")
    entries = [
        TargetConfig(switches=["lf-g1-r2", "lf-*"], protocol="gnmi", address="127.0.0.1:9339"),
        TargetConfig(switches=["sp-*", "ssp-[12]"], protocol="snmp", address="127.0.0.1:161", community="{switch}"),
    ]
    assert read_switches_file(str(listed)) == ["ssp-1", "lf-g1-r1"]
    assert seed_names(entries, ["lf-g1-r1"], read_switches_file(str(listed))) == ["lf-g1-r1", "lf-g1-r2", "ssp-1"]
    targets = Targets(entries)
    t = targets.resolve("ssp-1")
    assert (t.protocol, t.community.get_secret_value() if t.community else None) == ("snmp", "ssp-1")
    with pytest.raises(DiscoveryError, match="no targets entry matches"):
        targets.resolve("srv-g1-001")
    bad = tmp_path / "bad.txt"
    bad.write_text("lf-1 lf-2\n")
    with pytest.raises(DiscoveryError, match="line 1: one switch name per line"):
        read_switches_file(str(bad))


def test_a_template_the_placeholder_cannot_fill_fails_that_switch_alone() -> None:
    entries = [TargetConfig(switches=["*"], protocol="gnmi", address="{mgmt_address}:9339")]
    known = {"lf-1": Switch("lf-1", Role.LEAF, 1, 1, 1, None, 64, 400, mgmt_address="10.0.0.1")}
    assert Targets(entries, known).resolve("lf-1").address == "10.0.0.1:9339"
    with pytest.raises(ConfigError, match="no inventory field 'mgmt_address'"):
        Targets(entries, known).resolve("sp-1")
