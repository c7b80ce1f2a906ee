"""The simulator's traffic model: closed forms, load split, and a healthy fabric's counters."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric.model import FabricParams, LinkKind
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.traffic import (
    COMM_WEIGHT,
    COMPUTE_WEIGHT,
    Flow,
    Phase,
    TrafficParams,
    leaf_rates,
    pause_share,
    spine_up_rates,
    spread,
)
from simulator.view import FabricView, PortCounters

FABRIC = build_aipod(FabricParams(gpus=128, radix=16))
T0 = 1_800_000_000 * 10**9
S = 10**9


def make_state(seed: int = 0, fabric=FABRIC) -> tuple[FabricState, list[int]]:
    now = [T0]
    return FabricState(fabric, seed=seed, clock=lambda: now[0]), now


def by_name(ports: list[PortCounters]) -> dict[str, PortCounters]:
    return {p.name: p for p in ports}


def switch_links(fabric=FABRIC):
    return [link for link in fabric.links if link.kind is not LinkKind.SERVER_LEAF]


# -- the model ------------------------------------------------------------------------------


@given(seed=st.integers(0, 10**6), t=st.integers(0, 10**15), dt=st.integers(0, 10**12))
def test_phase_is_the_integral_of_the_square_wave(seed, t, dt):
    params = TrafficParams.from_seed(seed)
    phase = Phase(params, origin_ns=0)
    step = params.comm_ns * COMM_WEIGHT + (params.period_ns - params.comm_ns) * COMPUTE_WEIGHT
    assert phase.phi(0) == 0
    assert phase.phi(t + dt) >= phase.phi(t)
    assert phase.phi(t + params.period_ns) - phase.phi(t) == step
    one_ns = phase.phi(t + 1) - phase.phi(t)
    assert one_ns == (COMM_WEIGHT if phase.communicating(t) else COMPUTE_WEIGHT)


@given(seed=st.integers(0, 10**6))
def test_seeded_parameters_are_training_like(seed):
    p = TrafficParams.from_seed(seed)
    assert 2 * S <= p.period_ns <= 4 * S
    assert 0.34 <= p.comm_fraction <= 0.46
    assert 0.85 <= p.nic_peak <= 0.95
    assert p == TrafficParams.from_seed(seed)


@given(
    rates=st.lists(st.floats(0.0, 5e10), min_size=1, max_size=6),
    gaps=st.lists(st.integers(0, 10**12), min_size=6, max_size=6),
)
def test_a_flow_stays_continuous_and_monotonic_across_rate_changes(rates, gaps):
    phase = Phase(TrafficParams(), origin_ns=0)
    flow = Flow(0, 1.0, 4000)
    t, last = 0, 0
    for rate, gap in zip(rates, gaps, strict=False):
        before = flow.octets(phase.phi(t))
        flow.set_load(t, phase.phi(t), rate, True, 0.2)
        assert flow.octets(phase.phi(t)) == before  # no jump at a change
        t += gap
        now = flow.octets(phase.phi(t))
        assert now >= last
        last = now


def test_ecmp_spreads_evenly_and_caps_slow_links():
    loads, carried = spread(300.0, [200.0, 200.0, 0.0])
    assert loads == [150.0, 150.0, 0.0] and carried == 300.0
    loads, carried = spread(300.0, [200.0, 50.0, 200.0])
    assert loads == [100.0, 50.0, 100.0] and carried == 250.0
    assert spread(100.0, [0.0, 0.0]) == ([0.0, 0.0], 0.0)


def test_a_lost_uplink_moves_its_load_onto_the_others():
    params = TrafficParams()
    nics = [40e9] * 8
    _, healthy = leaf_rates(params, nics, [48e9] * 8)
    _, degraded = leaf_rates(params, nics, [48e9] * 7 + [0.0])
    assert degraded[-1] == 0.0
    assert all(d > h for d, h in zip(degraded[:-1], healthy[:-1], strict=True))
    assert sum(degraded) == pytest.approx(sum(healthy))


def test_leaf_servers_slow_down_when_uplinks_cannot_carry_the_load():
    params = TrafficParams()
    servers, ups = leaf_rates(params, [40e9] * 4, [10e9, 0.0, 0.0, 0.0])
    assert ups == [10e9, 0.0, 0.0, 0.0]
    assert all(s < 40e9 for s in servers)


def test_spines_send_a_small_cross_rail_share_up():
    ups = spine_up_rates(TrafficParams(), [30e9] * 4, [48e9] * 4)
    assert sum(ups) == pytest.approx(0.15 * 120e9)


def test_pause_share_follows_the_quanta_and_saturates():
    assert pause_share(0.0, 400 * 10**9) == 0.0
    assert pause_share(1000.0, 400 * 10**9) == pytest.approx(1000 * 65535 * 512 / 400e9)
    assert pause_share(1e9, 400 * 10**9) == 0.95


# -- a healthy fabric -----------------------------------------------------------------------


def test_state_is_a_fabric_view_of_every_switch():
    state, _ = make_state()
    view: FabricView = state
    assert list(view.switch_names()) == list(FABRIC.switches)
    assert view.switch("nope") is None and view.ports("nope") == [] and view.lldp("nope") == []
    info = view.switch("sp-r1-1")
    assert info is not None and info.role == "spine" and info.reachable
    assert info.boot_time_ns < T0 - 86_400 * S  # up for days: counters start large
    ports = view.ports("lf-g1-r1")
    assert [p.name for p in ports] == [f"swp{i}" for i in range(1, 17)]
    assert [p.if_index for p in ports] == list(range(1, 17))
    assert ports[0].description == "srv-g1-001:nic1" and ports[8].description.startswith("sp-r1-")


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 1000), offsets=st.lists(st.integers(0, 10**13), min_size=1, max_size=4))
def test_both_ends_of_every_link_agree_and_counters_grow(seed, offsets):
    state, _ = make_state(seed)
    previous: dict[tuple[str, str], PortCounters] = {}
    for t in sorted(T0 + o for o in offsets):
        sample = {(sw, p.name): p for sw in state.switch_names() for p in state.ports(sw, t)}
        for link in switch_links():
            a, b = sample[link.a], sample[link.b]
            assert (a.out_octets, a.out_unicast_pkts, a.out_multicast_pkts, a.out_broadcast_pkts) == (
                b.in_octets,
                b.in_unicast_pkts,
                b.in_multicast_pkts,
                b.in_broadcast_pkts,
            )
            assert (a.in_octets, a.in_unicast_pkts) == (b.out_octets, b.out_unicast_pkts)
            assert (a.oper_up, a.speed_bps, a.last_change_ns) == (b.oper_up, b.speed_bps, b.last_change_ns)
            assert a.carrier_transitions == b.carrier_transitions == 1
        for key, now in sample.items():
            before = previous.get(key)
            if before is not None:
                assert now.in_octets >= before.in_octets and now.out_octets >= before.out_octets
                assert now.in_multicast_pkts >= before.in_multicast_pkts
            assert now.in_errors == now.in_fcs_errors == now.in_discards == 0
            assert now.in_octets < 2**64
        previous = sample


def test_magnitudes_are_those_of_a_busy_training_fabric():
    state, _ = make_state(seed=7)
    period = state.params.period_ns
    at0, at1 = by_name(state.ports("lf-g1-r1", T0)), by_name(state.ports("lf-g1-r1", T0 + period))
    line = 400e9
    for name in ("swp1", "swp9", "swp16"):
        bits = (at1[name].in_octets - at0[name].in_octets) * 8
        util = bits / (period / S) / line
        assert 0.15 < util < 0.6, (name, util)
        pkts = at1[name].in_unicast_pkts - at0[name].in_unicast_pkts
        assert 3900 <= (at1[name].in_octets - at0[name].in_octets) / pkts <= 4150
        assert at1[name].in_multicast_pkts - at0[name].in_multicast_pkts <= 2


def test_traffic_follows_the_compute_and_communicate_phases():
    state, _ = make_state(seed=3)
    phase, step = state.wiring.phase, 10_000_000
    t = T0
    while not phase.communicating(t):
        t += step
    comm = state.ports("lf-g1-r1", t + step)[0].in_octets - state.ports("lf-g1-r1", t)[0].in_octets
    while phase.communicating(t):
        t += step
    compute = state.ports("lf-g1-r1", t + step)[0].in_octets - state.ports("lf-g1-r1", t)[0].in_octets
    assert comm > 10 * compute > 0


def test_same_seed_same_counters_and_another_seed_differs():
    a, _ = make_state(seed=5)
    b, _ = make_state(seed=5)
    c, _ = make_state(seed=6)
    t = T0 + 1234 * S
    assert a.ports("sp-r2-1", t) == b.ports("sp-r2-1", t)
    assert a.ports("sp-r2-1", t) != c.ports("sp-r2-1", t)


def test_lldp_matches_the_design_when_healthy():
    state, _ = make_state()
    for sw in state.switch_names():
        for entry in state.lldp(sw):
            peer = FABRIC.peer((sw, entry.local_port))  # type: ignore[arg-type]
            assert peer is not None
            if peer.node in FABRIC.servers:  # lldpd: the port id is the NIC's MAC, its name the description
                assert (entry.system_name, entry.port_description, entry.port_id_subtype) == (*peer, 3)
                assert len(entry.port_id) == 17 and entry.port_id != entry.chassis_id
            else:
                assert (entry.system_name, entry.port_id) == tuple(peer)
            assert entry.chassis_id.startswith("02:") and len(entry.chassis_id) == 17


def test_partial_group_has_dark_uncabled_ports():
    fabric = build_aipod(FabricParams(gpus=72, radix=16))  # group 2 has one server
    state, _ = make_state(fabric=fabric)
    ports = by_name(state.ports("lf-g2-r1"))
    assert ports["swp1"].oper_up and not ports["swp2"].oper_up and ports["swp2"].description == ""
    assert ports["swp2"].in_octets == 0 and ports["swp2"].carrier_transitions == 0


@pytest.mark.slow
def test_a_16k_gpu_fabric_builds_fast_and_serves_ports_cheaply():
    fabric = build_aipod(FabricParams(gpus=16384))
    started = time.perf_counter()
    state = FabricState(fabric)
    build_s = time.perf_counter() - started
    names = state.switch_names()
    now = state.now_ns()
    started = time.perf_counter()
    for name in names:
        state.ports(name, now)
    per_call_us = (time.perf_counter() - started) / len(names) * 1e6
    assert len(names) == 640 and build_s < 10 and per_call_us < 2000
