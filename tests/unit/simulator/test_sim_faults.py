"""Simulated faults: validation, each kind's effect on both link ends, and random timelines."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric.model import Endpoint, FabricParams, LinkKind, Role
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.faults import PORT_KINDS, FaultConflict, FaultError, FaultKind, first_uplink
from simulator.traffic import link_capacity, pause_share
from simulator.view import PortCounters

FABRIC = build_aipod(FabricParams(gpus=128, radix=16))
PARTIAL = build_aipod(FabricParams(gpus=72, radix=16))  # group 2 has one server: free down ports
T0 = 1_800_000_000 * 10**9
S = 10**9
LINKS = [link for link in FABRIC.links if link.kind is not LinkKind.SERVER_LEAF]
COUNTERS = ("in_octets", "out_octets", "in_unicast_pkts", "out_unicast_pkts", "in_multicast_pkts",
            "out_multicast_pkts", "in_errors", "in_fcs_errors", "carrier_transitions")  # fmt: skip


class Sim:
    """A state on a hand-driven clock, recording change notifications."""

    def __init__(self, seed: int = 0, fabric=FABRIC) -> None:
        self.now = T0
        self.state = FabricState(fabric, seed=seed, clock=lambda: self.now)
        self.events: list[tuple[str, str | None]] = []
        self.state.add_listener(lambda sw, port: self.events.append((sw, port)))

    def port(self, switch: str, name: str, t: int | None = None) -> PortCounters:
        return next(p for p in self.state.ports(switch, t) if p.name == name)

    def peer(self, switch: str, name: str) -> tuple[str, str]:
        peer = self.state.fabric.peer(Endpoint(switch, name))
        assert peer is not None
        return peer.node, peer.port

    def wait(self, seconds: float) -> None:
        self.now += round(seconds * S)
        self.state.tick()

    def rate(self, switch: str, name: str, field: str = "out_octets") -> float:
        """Mean bytes/s over one training step from now (no clock change)."""
        period = self.state.params.period_ns
        a, b = self.port(switch, name, self.now), self.port(switch, name, self.now + period)
        delta: int = getattr(b, field) - getattr(a, field)
        return delta / (period / S)


# -- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "melt", "switch": "lf-g1-r1"}, "unknown fault kind 'melt'"),
        ({"switch": "lf-g1-r1"}, "missing field 'kind'"),
        ({"kind": "link_down"}, "missing field 'switch'"),
        ({"kind": "link_down", "switch": "lf-g9-r1"}, "unknown switch 'lf-g9-r1'"),
        ({"kind": "link_down", "switch": "lf-g1-r1", "port": "swp99"}, "unknown port 'swp99'"),
        ({"kind": "link_down", "switch": "lf-g1-r1", "port": "eth0"}, "unknown port 'eth0'"),
        ({"kind": "link_down", "switch": "lf-g1-r1", "colour": "red"}, "unknown field 'colour'"),
        ({"kind": "link_down", "switch": "lf-g1-r1", "speed_gbps": 200}, "'speed_gbps' does not apply"),
        ({"kind": "speed_degrade", "switch": "lf-g1-r1", "speed_gbps": 400}, "between 1 and 399"),
        ({"kind": "speed_degrade", "switch": "lf-g1-r1", "speed_gbps": "fast"}, "must be a number"),
        ({"kind": "speed_degrade", "switch": "lf-g1-r1", "speed_gbps": 2.5}, "must be an integer"),
        ({"kind": "pfc_storm", "switch": "lf-g1-r1", "priority": 9}, "'priority' must be 0..7"),
        ({"kind": "pfc_storm", "switch": "lf-g1-r1", "rate_pps": 0}, "'rate_pps' must be > 0"),
        ({"kind": "error_burst", "switch": "lf-g1-r1", "rate_pps": True}, "must be a number"),
        ({"kind": "link_flap", "switch": "lf-g1-r1", "period_s": 0.01}, "'period_s' must be"),
        ({"kind": "link_flap", "switch": "lf-g1-r1", "count": 0}, "'count' must be >= 1"),
        ({"kind": "reboot", "switch": "lf-g1-r1", "boot_s": float("nan")}, "must be finite"),
        ({"kind": "clock_step", "switch": "lf-g1-r1", "step_s": 0}, "'step_s' must be non-zero"),
        ({"kind": "clock_step", "switch": "lf-g1-r1", "step_s": -90_000}, "within ±86400"),
        ({"kind": "counter_clear", "switch": "lf-g1-r1", "port": "swp1"}, "'port' does not apply"),
        ({"kind": "miswire", "server": "srv-g1-001", "gpu": 1}, "needs field 'to_leaf'"),
        ({"kind": "miswire", "server": "srv-g9-001", "gpu": 1, "to_leaf": "lf-g1-r2"}, "unknown server"),
        ({"kind": "miswire", "server": "srv-g1-001", "gpu": 9, "to_leaf": "lf-g1-r2"}, "'gpu' must be 1..8"),
        ({"kind": "miswire", "server": "srv-g1-001", "gpu": 1, "to_leaf": "sp-r1-1"}, "must name a leaf"),
        ({"kind": "miswire", "server": "srv-g1-001", "gpu": 1, "to_leaf": "lf-g1-r1"}, "must differ"),
        (
            {"kind": "miswire", "switch": "lf-g1-r2", "server": "srv-g1-001", "gpu": 1, "to_leaf": "lf-g2-r1"},
            "must be lf-g1-r1",
        ),
        (["link_down"], "must be an object"),
    ],
)
def test_bad_faults_are_refused_with_a_clear_message(spec: Any, message: str) -> None:
    sim = Sim()
    with pytest.raises(FaultError, match=message.replace("(", r"\(").replace(".", r"\.")):
        sim.state.apply(spec)
    assert sim.state.active() == [] and sim.events == []


def test_uncabled_ports_and_duplicate_ids_are_refused():
    sim = Sim(fabric=PARTIAL)
    with pytest.raises(FaultError, match="swp3 of lf-g2-r1 is not cabled"):
        sim.state.apply({"kind": "link_down", "switch": "lf-g2-r1", "port": "swp3"})
    sim.state.apply({"kind": "link_down", "switch": "lf-g1-r1", "id": "cut"})
    with pytest.raises(FaultConflict, match="'cut' is already active"):
        sim.state.apply({"kind": "error_burst", "switch": "lf-g1-r2", "id": "cut"})


def test_default_port_is_the_first_uplink_or_a_superspines_first_cabled_port():
    sim = Sim()
    assert sim.state.apply({"kind": "link_down", "switch": "lf-g2-r3"}).port == "swp9"
    assert sim.state.apply({"kind": "link_down", "switch": "sp-r1-2"}).port == "swp9"
    assert sim.state.apply({"kind": "link_down", "switch": "ssp-3"}).port == "swp1"


# -- each kind ------------------------------------------------------------------------------


def test_link_down_moves_the_load_onto_the_other_uplinks_and_clears():
    sim = Sim()
    uplinks = [f"swp{i}" for i in range(9, 17)]
    before = {p: sim.rate("lf-g1-r1", p) for p in uplinks}
    fault = sim.state.apply({"kind": "link_down", "switch": "lf-g1-r1"})
    spine, spine_port = sim.peer("lf-g1-r1", "swp9")
    assert fault.port == "swp9" and fault.started_at_ns == T0
    assert set(sim.events) == {("lf-g1-r1", "swp9"), (spine, spine_port)}
    for sw, name in (("lf-g1-r1", "swp9"), (spine, spine_port)):
        p = sim.port(sw, name)
        assert not p.oper_up and p.carrier_transitions == 2 and p.last_change_ns == T0
    during = {p: sim.rate("lf-g1-r1", p) for p in uplinks}
    assert during["swp9"] == 0
    assert all(during[p] > before[p] * 1.1 for p in uplinks[1:])  # 8 uplinks' load on 7
    sim.wait(5)
    assert sim.state.clear(fault.id) and not sim.state.clear(fault.id)
    assert sim.port(spine, spine_port).oper_up and sim.port(spine, spine_port).carrier_transitions == 3
    after = {p: sim.rate("lf-g1-r1", p) for p in uplinks}
    assert after == pytest.approx(before, rel=1e-6)


def test_link_flap_toggles_over_time_counting_transitions_on_both_ends():
    sim = Sim()
    sim.state.apply({"kind": "link_flap", "switch": "sp-r1-1", "period_s": 2, "count": 2})
    ends = [("sp-r1-1", "swp9"), sim.peer("sp-r1-1", "swp9")]
    seen = []
    for _ in range(6):
        seen.append([(sim.port(*e).oper_up, sim.port(*e).carrier_transitions) for e in ends])
        sim.wait(1)
    assert [s[0] for s in seen] == [(False, 2), (True, 3), (False, 4), (True, 5), (True, 5), (True, 5)]
    assert all(a == b for a, b in seen)
    assert sim.events.count(ends[1]) == 4  # notified at each toggle as time passed
    # lazily computed: a read far ahead, without the background task, sees the toggles too
    late = Sim()
    late.state.apply({"kind": "link_flap", "switch": "sp-r1-1", "period_s": 1})
    assert late.port("sp-r1-1", "swp9", T0 + 10_250_000_000).carrier_transitions == 1 + 21


def test_speed_degrade_lowers_both_ends_and_caps_the_traffic():
    sim = Sim()
    before = sim.rate("lf-g1-r1", "swp1", "in_octets")
    fault = sim.state.apply({"kind": "speed_degrade", "switch": "lf-g1-r1", "port": "swp1", "speed_gbps": 100})
    assert sim.port("lf-g1-r1", "swp1").speed_bps == 100 * 10**9
    peak = sim.rate("lf-g1-r1", "swp1", "in_octets") / sim.state.params.mean_level
    assert peak <= link_capacity(100 * 10**9) * 1.03 < before
    spine, port = sim.peer("lf-g1-r1", "swp9")
    uplink = sim.state.apply({"kind": "speed_degrade", "switch": "lf-g1-r1", "port": "swp9"})
    assert sim.port(spine, port).speed_bps == sim.port("lf-g1-r1", "swp9").speed_bps == 200 * 10**9
    # the slow uplink carries less than its ECMP share: the leaf's servers slow down with it
    assert sim.rate("lf-g1-r1", "swp2", "in_octets") < before
    sim.state.clear(fault.id)
    sim.state.clear(uplink.id)
    assert sim.port("lf-g1-r1", "swp1").speed_bps == 400 * 10**9
    assert sim.rate("lf-g1-r1", "swp1", "in_octets") == pytest.approx(before, rel=1e-6)


def test_pfc_storm_pauses_the_peer_which_spreads_pauses_one_tier_up():
    sim = Sim()
    spine, sport = sim.peer("lf-g1-r1", "swp9")
    before = sim.rate("lf-g1-r1", "swp9", "in_octets")
    fault = sim.state.apply({"kind": "pfc_storm", "switch": "lf-g1-r1", "rate_pps": 4000})
    paused = sim.rate("lf-g1-r1", "swp9", "in_octets")
    assert paused == pytest.approx(before * (1 - pause_share(4000, 400 * 10**9)), rel=1e-6)
    sim.wait(10)
    assert sim.port("lf-g1-r1", "swp9").pfc_tx[3] == sim.port(spine, sport).pfc_rx[3] == 40_000
    assert sim.port("lf-g1-r1", "swp9").pfc_tx[:3] == (0, 0, 0)
    others = [p for p in sim.state.ports(spine) if p.name != sport and p.oper_up]
    assert others and all(p.pfc_tx[3] == 10_000 for p in others)
    leaf, lport = sim.peer(spine, others[0].name)
    assert sim.port(leaf, lport).pfc_rx[3] == 10_000
    sim.state.clear(fault.id)
    sim.wait(10)
    assert sim.port("lf-g1-r1", "swp9").pfc_tx[3] == 40_000
    assert sim.rate("lf-g1-r1", "swp9", "in_octets") == pytest.approx(before, rel=1e-6)


def test_pfc_storm_on_another_priority_leaves_roce_throughput_alone():
    sim = Sim()
    before = sim.rate("lf-g1-r1", "swp9", "in_octets")
    sim.state.apply({"kind": "pfc_storm", "switch": "lf-g1-r1", "priority": 5, "rate_pps": 4000})
    sim.wait(1)
    assert sim.port("lf-g1-r1", "swp9").pfc_tx[5] == 4000
    assert sim.rate("lf-g1-r1", "swp9", "in_octets") == pytest.approx(before, rel=1e-6)


def test_error_burst_counts_fcs_errors_on_the_receiving_side_only():
    sim = Sim()
    fault = sim.state.apply({"kind": "error_burst", "switch": "ssp-1", "rate_pps": 250})
    sim.wait(4)
    p = sim.port("ssp-1", fault.port or "")
    peer = sim.port(*sim.peer("ssp-1", p.name))
    assert p.in_fcs_errors == p.in_errors == 1000 and p.out_errors == 0
    assert peer.in_errors == peer.out_errors == peer.in_fcs_errors == 0
    sim.state.clear(fault.id)
    sim.wait(4)
    assert sim.port("ssp-1", p.name).in_fcs_errors == 1000


def test_miswire_swaps_cables_when_the_wrong_port_is_taken():
    sim = Sim()
    fault = sim.state.apply({"kind": "miswire", "server": "srv-g1-001", "gpu": 1, "to_leaf": "lf-g1-r2"})
    assert (fault.switch, fault.port, fault.to_port, fault.swapped_with) == (
        "lf-g1-r1",
        "swp1",
        "swp1",
        "srv-g1-001:nic2",
    )
    home, wrong = sim.state.lldp("lf-g1-r1")[0], sim.state.lldp("lf-g1-r2")[0]
    # a server's lldpd names its NIC in the port description (its port id is the NIC's MAC)
    assert (home.system_name, home.port_description) == ("srv-g1-001", "nic2")
    assert (wrong.system_name, wrong.port_description) == ("srv-g1-001", "nic1")
    assert sim.port("lf-g1-r1", "swp1").carrier_transitions == 3 and sim.port("lf-g1-r1", "swp1").oper_up
    assert {("lf-g1-r1", "swp1"), ("lf-g1-r2", "swp1")} <= set(sim.events)
    with pytest.raises(FaultConflict, match="already miswired"):
        sim.state.apply({"kind": "miswire", "server": "srv-g1-001", "gpu": 2, "to_leaf": "lf-g1-r3"})
    sim.state.clear(fault.id)
    assert (sim.state.lldp("lf-g1-r1")[0].system_name, sim.state.lldp("lf-g1-r1")[0].port_description) == (
        "srv-g1-001",
        "nic1",
    )


def test_miswire_onto_a_free_port_darkens_the_designed_one():
    sim = Sim(fabric=PARTIAL)
    fault = sim.state.apply({"kind": "miswire", "server": "srv-g1-002", "gpu": 1, "to_leaf": "lf-g2-r1"})
    assert fault.to_port == "swp2" and fault.swapped_with is None
    assert not sim.port("lf-g1-r1", "swp2").oper_up
    assert all(n.local_port != "swp2" for n in sim.state.lldp("lf-g1-r1"))
    landed = [n for n in sim.state.lldp("lf-g2-r1") if n.local_port == "swp2"]
    assert [(n.system_name, n.port_description) for n in landed] == [("srv-g1-002", "nic1")]
    assert sim.rate("lf-g2-r1", "swp2", "in_octets") > 0 == sim.rate("lf-g1-r1", "swp2", "in_octets")
    sim.state.clear(fault.id)
    assert sim.port("lf-g1-r1", "swp2").oper_up and not sim.port("lf-g2-r1", "swp2").oper_up


def test_switch_unreachable_silences_management_only():
    sim = Sim()
    fault = sim.state.apply({"kind": "switch_unreachable", "switch": "ssp-2"})
    info = sim.state.switch("ssp-2")
    assert info is not None and not info.reachable and sim.events == [("ssp-2", None)]
    assert sim.rate("ssp-2", "swp1") > 0
    sim.state.clear(fault.id)
    info = sim.state.switch("ssp-2")
    assert info is not None and info.reachable


def test_reboot_restarts_counters_and_bounces_every_link():
    sim = Sim()
    peer = sim.peer("sp-r2-1", "swp1")
    peer_before = sim.port(*peer)
    sim.wait(1)
    sim.state.apply({"kind": "reboot", "switch": "sp-r2-1", "boot_s": 3})
    info = sim.state.switch("sp-r2-1")
    assert info is not None and info.boot_time_ns == sim.now and not info.reachable
    for p in sim.state.ports("sp-r2-1"):
        assert all(getattr(p, f) == 0 for f in COUNTERS) and not p.oper_up and p.last_clear_ns == sim.now
    assert not sim.port(*peer).oper_up and sim.port(*peer).carrier_transitions == 2
    sim.wait(2)
    assert sim.port("sp-r2-1", "swp1").in_octets == 0
    sim.wait(1)
    info = sim.state.switch("sp-r2-1")
    assert info is not None and info.reachable and ("sp-r2-1", None) in sim.events
    mine, theirs = sim.port("sp-r2-1", "swp1"), sim.port(*peer)
    assert mine.oper_up and mine.carrier_transitions == 1 and theirs.carrier_transitions == 3
    sim.wait(2)
    mine2, theirs2 = sim.port("sp-r2-1", "swp1"), sim.port(*peer)
    assert mine2.in_octets - mine.in_octets == theirs2.out_octets - theirs.out_octets > 0
    assert theirs2.out_octets > peer_before.out_octets  # the peer never restarted


def test_counter_clear_restarts_every_counter_without_a_reboot():
    sim = Sim()
    up = first_uplink(FABRIC, "lf-g1-r1")
    peer = sim.peer("lf-g1-r1", up)
    sim.wait(2)
    boot = sim.state.switch("lf-g1-r1")
    peer_before = sim.port(*peer)
    links = {p.name: (p.oper_up, p.last_change_ns) for p in sim.state.ports("lf-g1-r1")}
    fault = sim.state.apply({"kind": "counter_clear", "switch": "lf-g1-r1"})
    for p in sim.state.ports("lf-g1-r1"):
        assert all(getattr(p, f) == 0 for f in COUNTERS) and p.last_clear_ns == sim.now
        assert (p.oper_up, p.last_change_ns) == links[p.name]  # no link moved
    info = sim.state.switch("lf-g1-r1")
    assert boot is not None and info is not None and info.boot_time_ns == boot.boot_time_ns and info.reachable
    assert sim.port(*peer).in_octets == peer_before.in_octets  # the peer's counters are its own
    sim.wait(2)
    mine, theirs = sim.port("lf-g1-r1", up), sim.port(*peer)
    assert 0 < mine.out_octets < theirs.in_octets  # counting again, from the clear
    assert sim.state.clear(fault.id)
    assert sim.port("lf-g1-r1", up).out_octets == mine.out_octets  # cleared counters stay cleared


def test_clock_step_is_the_switchs_until_cleared_and_moves_no_counter():
    sim = Sim()
    t0 = sim.now
    sim.wait(1)
    before = sim.port("sp-r1-1", "swp1")
    fault = sim.state.apply({"kind": "clock_step", "switch": "sp-r1-1", "step_s": -45.5})
    stepped = sim.now
    info = sim.state.switch("sp-r1-1")
    assert info is not None and info.clock_step_at(stepped) == -45_500_000_000
    assert info.clock_step_at(t0) == 0  # a time stamped before the step keeps its clock
    assert sim.port("sp-r1-1", "swp1") == before  # time in the view is true time
    other = sim.state.switch("sp-r1-2")
    assert fault.spec.step_s == -45.5 and other is not None and other.clock_step_at(stepped) == 0
    sim.wait(2)
    assert sim.state.clear(fault.id)
    after = sim.state.switch("sp-r1-1")
    assert after is not None and after.clock_step_at(sim.now) == 0  # stepped back
    assert after.clock_step_at(stepped + S) == -45_500_000_000  # what it stamped meanwhile stays stepped


# -- random timelines -----------------------------------------------------------------------

SWITCHES = list(FABRIC.switches)
LEAVES = [n for n, s in FABRIC.switches.items() if s.role is Role.LEAF]
CABLED = {sw: [p.name for p in FABRIC.ports(sw) if p.peer is not None] for sw in SWITCHES}


@st.composite
def faults(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(list(FaultKind)))
    if kind is FaultKind.MISWIRE:
        server, gpu = draw(st.sampled_from(list(FABRIC.servers))), draw(st.integers(1, 8))
        home = FABRIC.leaf_for(server, gpu)
        return {"kind": kind.value, "server": server, "gpu": gpu,
                "to_leaf": draw(st.sampled_from([x for x in LEAVES if x != home]))}  # fmt: skip
    switch = draw(st.sampled_from(SWITCHES))
    spec: dict[str, Any] = {"kind": kind.value, "switch": switch}
    if kind in PORT_KINDS and draw(st.booleans()):
        spec["port"] = draw(st.sampled_from(CABLED[switch]))
    if kind is FaultKind.LINK_FLAP:
        spec["period_s"] = draw(st.sampled_from([0.2, 0.5, 3.0]))
        spec["count"] = draw(st.none() | st.integers(1, 3))
    elif kind is FaultKind.SPEED_DEGRADE:
        spec["speed_gbps"] = draw(st.sampled_from([100, 200]))
    elif kind is FaultKind.PFC_STORM:
        spec["priority"] = draw(st.sampled_from([3, 5]))
        spec["rate_pps"] = draw(st.sampled_from([100.0, 5000.0, 50000.0]))
    elif kind is FaultKind.ERROR_BURST:
        spec["rate_pps"] = draw(st.sampled_from([1.0, 1000.0]))
    elif kind is FaultKind.REBOOT:
        spec["boot_s"] = draw(st.sampled_from([0.5, 2.0]))
    elif kind is FaultKind.CLOCK_STEP:
        spec["step_s"] = draw(st.sampled_from([-120.0, 5.0]))
    return spec


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("apply"), faults()),
        st.tuples(st.just("clear"), st.integers(0, 9)),
        st.tuples(st.just("wait"), st.integers(1, 4000)),
    ),
    max_size=20,
)


def run(ops: list[tuple[str, Any]], seed: int, *, sample: bool = True):
    """Play ``ops``; yields (sample, switches rebooted since the previous step, ever rebooted)."""
    sim = Sim(seed)
    ever: set[str] = set()
    for op, arg in ops:
        rebooted: set[str] = set()
        if op == "apply":
            try:
                fault = sim.state.apply(arg)
            except FaultConflict:
                continue
            if fault.spec.kind in (FaultKind.REBOOT, FaultKind.COUNTER_CLEAR):  # counters restart
                rebooted.add(fault.switch)
        elif op == "clear" and sim.state.active():
            active = sim.state.active()
            assert sim.state.clear(active[arg % len(active)].id)
        elif op == "wait":
            sim.now += arg * 1_000_000
        ever |= rebooted
        if sample:
            yield snapshot(sim), rebooted, set(ever)
    yield snapshot(sim), set(), set(ever)
    for fault in sim.state.active():
        sim.state.clear(fault.id)
    sim.wait(5)
    yield snapshot(sim), set(), set(ever)


def snapshot(sim: Sim) -> dict[tuple[str, str], PortCounters]:
    return {(sw, p.name): p for sw in sim.state.switch_names() for p in sim.state.ports(sw)}


def agree(a: PortCounters, b: PortCounters) -> tuple[tuple[int, ...], tuple[int, ...]]:
    left = (a.out_octets, a.out_unicast_pkts, a.out_multicast_pkts, a.in_octets, a.in_unicast_pkts,
            a.carrier_transitions, *a.pfc_tx, *a.pfc_rx)  # fmt: skip
    right = (b.in_octets, b.in_unicast_pkts, b.in_multicast_pkts, b.out_octets, b.out_unicast_pkts,
             b.carrier_transitions, *b.pfc_rx, *b.pfc_tx)  # fmt: skip
    return left, right


@settings(max_examples=40, deadline=None)
@given(ops=OPS, seed=st.integers(0, 3))
def test_random_timelines_keep_counters_monotonic_and_link_ends_in_agreement(ops, seed):
    previous: dict[tuple[str, str], PortCounters] | None = None
    for sample, rebooted, ever in run(ops, seed):
        for link in LINKS:
            a, b = sample[link.a], sample[link.b]
            assert (a.oper_up, a.speed_bps, a.last_change_ns) == (b.oper_up, b.speed_bps, b.last_change_ns)
            if not ever & {link.a.node, link.b.node}:
                left, right = agree(a, b)
                assert left == right
            elif previous is not None and not rebooted & {link.a.node, link.b.node}:
                (l0, r0), (l1, r1) = agree(previous[link.a], previous[link.b]), agree(a, b)
                assert [x - y for x, y in zip(l1, l0, strict=True)] == [x - y for x, y in zip(r1, r0, strict=True)]
        if previous is not None:
            for key, now in sample.items():
                before = previous[key]
                if key[0] in rebooted:
                    assert now.in_octets == now.out_octets == 0  # restarted, and only on a reboot
                    continue
                for field in COUNTERS:
                    assert getattr(now, field) >= getattr(before, field), (key, field)
                assert all(x >= y for x, y in zip(now.pfc_tx + now.pfc_rx, before.pfc_tx + before.pfc_rx, strict=True))
        previous = sample
    assert previous is not None
    for (switch, _), port in previous.items():  # every fault cleared: the design is back
        if port.description:
            assert port.oper_up and port.speed_bps == 400 * 10**9, (switch, port.name)


@settings(max_examples=20, deadline=None)
@given(ops=OPS, seed=st.integers(0, 3))
def test_counters_do_not_depend_on_who_reads_when(ops, seed):
    *_, (busy, _, _) = run(ops, seed, sample=True)
    *_, (quiet, _, _) = run(ops, seed, sample=False)
    assert busy == quiet
