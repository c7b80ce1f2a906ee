"""The pure parts of the stability checks: link naming, flap correlation, outages, errors, PFC trees."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzer.flaps import correlated_ports, flap_severity, ports_needed, switch_bursts, tally_flaps
from analyzer.links import human_s, link_end, link_label, links_scope
from analyzer.outages import LinkOutages, outage_figures, outage_severity, tally_outages
from analyzer.pause_trees import Pausing, compatible, pause_trees
from analyzer.pfc import PAUSE_QUANTA_BITS, pause_ratio, trailing_run
from analyzer.stability import discards_not_judged, error_figures, error_verdict
from fabric.model import Endpoint, FabricParams
from fabric.topology import build_aipod

# 2 groups x 8 rails, radix 16: each leaf has 4 parallel uplinks to each of its rail's 2 spines.
FABRIC = build_aipod(FabricParams(gpus=128, radix=16))
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


# --- links -------------------------------------------------------------------------------------


def test_a_link_is_named_by_its_lower_tier_switch_end_from_either_side() -> None:
    assert link_end(FABRIC, "sp-r1-1", "swp1") == link_end(FABRIC, "lf-g1-r1", "swp9") == ("lf-g1-r1", "swp9")
    assert link_end(FABRIC, "ssp-1", "swp1") == ("sp-r1-1", "swp9")
    assert link_end(FABRIC, "lf-g1-r1", "swp3") == ("lf-g1-r1", "swp3")  # a server cable: the leaf end
    assert link_end(FABRIC, "nosuch", "eth0") == ("nosuch", "eth0")
    assert link_label(FABRIC, "sp-r1-1", "swp1") == "lf-g1-r1:swp9 ↔ sp-r1-1:swp1"
    assert link_label(FABRIC, "lf-g1-r1", "swp3") == "lf-g1-r1:swp3 ↔ srv-g1-003:nic1"


def test_link_scope_counts_the_gpus_of_the_naming_end_and_lists_both_ends() -> None:
    uplink = links_scope(FABRIC, [("sp-r1-1", "swp1")])
    assert uplink.ports == ("lf-g1-r1:swp9", "sp-r1-1:swp1")
    assert uplink.switches == ("lf-g1-r1", "sp-r1-1")
    assert uplink.gpus == 8 and uplink.rails == (1,) and uplink.groups == (1,)  # lf-g1-r1's rail-1 GPUs only
    server = links_scope(FABRIC, [("lf-g1-r2", "swp3")])
    assert server.gpus == 1 and server.servers == ("srv-g1-003",) and server.ports == ("lf-g1-r2:swp3",)


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.25, "0.2 s"), (7, "7 s"), (300, "5 min"), (125, "2 min 5 s"), (11400, "3 h 10 min")]
)
def test_human_durations(seconds: float, text: str) -> None:
    assert human_s(seconds) == text


# --- flaps -------------------------------------------------------------------------------------


def test_both_ends_reporting_the_same_flaps_count_once() -> None:
    events = [("lf-g1-r1", "swp9", at(i), 1) for i in range(5)] + [("sp-r1-1", "swp1", at(i), 1) for i in range(5)]
    events.append(("sp-r1-1", "swp1", at(9), 2))  # carrier-transitions saw two more between samples
    (lf,) = tally_flaps(FABRIC, events).values()
    assert lf.end == ("lf-g1-r1", "swp9") and lf.count == 7 and lf.last == at(9)


@pytest.mark.parametrize(("count", "severity"), [(0, None), (2, None), (3, "warning"), (8, "warning"), (9, "critical")])
def test_flap_severity(count: int, severity: str | None) -> None:
    assert flap_severity(count, 3) == severity


def test_ports_needed() -> None:
    assert ports_needed(128, 4, 0.25) == 4
    assert ports_needed(8, 4, 0.25) == 2  # 25 % of a small switch
    assert ports_needed(0, 4, 0.25) == 2  # never a single port


times_by_port = st.dictionaries(
    st.sampled_from([f"swp{i}" for i in range(1, 17)]),
    st.lists(st.floats(0, 600, allow_nan=False), min_size=1, max_size=4),
    max_size=16,
)


@given(times_by_port, st.floats(0, 60, allow_nan=False), st.integers(2, 8))
def test_correlation_is_a_subset_and_grows_with_the_spread(
    times: dict[str, list[float]], spread: float, needed: int
) -> None:
    found = correlated_ports(times, spread, needed)
    assert found <= set(times)
    assert not found or len(found) >= needed
    assert found <= correlated_ports(times, spread * 2, needed)
    assert correlated_ports(times, spread, needed + 1) <= found


@given(st.sets(st.sampled_from([f"swp{i}" for i in range(1, 17)]), min_size=1), st.floats(0, 1000, allow_nan=False))
def test_ports_flapping_at_one_instant_correlate_and_spaced_ones_do_not(ports: set[str], t: float) -> None:
    together = {p: [t] for p in ports}
    assert correlated_ports(together, 1.0, len(ports)) == ports
    apart = {p: [t + 100.0 * i] for i, p in enumerate(sorted(ports))}
    assert correlated_ports(apart, 5.0, 2) == set()


def test_a_switch_dropping_ports_is_seen_through_its_peers() -> None:
    # sp-r1-1 rebooted and reported nothing; each leaf saw its uplinks to it go down within 3 s
    events = [
        (peer.node, peer.port, at(i * 0.5), 1)
        for i, p in enumerate(FABRIC.ports("sp-r1-1")[:6])
        if (peer := FABRIC.peer(Endpoint("sp-r1-1", p.name))) is not None
    ]
    events.append(("lf-g2-r3", "swp9", at(200), 1))  # unrelated, much later
    bursts = switch_bursts(FABRIC, events, 5.0, 4, 0.25)
    assert bursts == {"sp-r1-1": {f"swp{i}" for i in range(1, 7)}}


def test_a_bundle_of_parallel_links_flagged_at_both_ends_is_the_silent_ends_finding() -> None:
    # lf-g1-r1's four uplinks to sp-r1-1 (swp9, 11, 13, 15) drop together: both ends count the
    # same 4 cables. The switch that reported them going down is up; the silent one explains them
    # (a rebooting spine seen first from its leaf, a rebooting leaf from its spine).
    leaf_ports = ("swp9", "swp11", "swp13", "swp15")
    spine_ports = sorted({peer.port for n in leaf_ports if (peer := FABRIC.peer(Endpoint("lf-g1-r1", n)))})
    from_leaf = [("lf-g1-r1", p, at(0.1 * i), 1) for i, p in enumerate(leaf_ports)]
    from_spine = [("sp-r1-1", p, at(0.1 * i), 1) for i, p in enumerate(spine_ports)]
    assert switch_bursts(FABRIC, from_leaf, 5.0, 4, 0.25) == {"sp-r1-1": set(spine_ports)}
    assert switch_bursts(FABRIC, from_spine, 5.0, 4, 0.25) == {"lf-g1-r1": set(leaf_ports)}
    # both ends reported: nothing tells which failed, the lower tier keeps them (one finding, not two)
    assert switch_bursts(FABRIC, from_leaf + from_spine, 5.0, 4, 0.25) == {"lf-g1-r1": set(leaf_ports)}


# --- outages -----------------------------------------------------------------------------------


def test_outages_count_each_link_once_and_add_up_down_time() -> None:
    ups = [("lf-g1-r1", "swp9", at(100), 12.0), ("sp-r1-1", "swp1", at(100), 11.5), ("lf-g1-r1", "swp9", at(200), 3.0)]
    links = tally_outages(FABRIC, ups, {})
    (lo,) = links.values()
    fig = outage_figures(lo, at(300), at(0))
    assert fig["outages"] == 2 and fig["cumulative_down_s"] == 15.0 and fig["longest_completed_s"] == 12.0
    assert not fig["down_now"] and outage_severity(fig, 7.0) == "warning"
    assert outage_severity(fig, 20.0) is None


def test_a_link_down_now_is_critical_once_past_the_fatal_threshold() -> None:
    lo = LinkOutages(("lf-g1-r1", "swp9"), down_since={("lf-g1-r1", "swp9"): at(10), ("sp-r1-1", "swp1"): at(8)})
    fig = outage_figures(lo, at(20), at(-300))
    assert fig["down_now"] and fig["down_for_s"] == 12.0 and fig["cumulative_down_s"] == 12.0
    assert outage_severity(fig, 7.0) == "critical"
    assert outage_severity(outage_figures(lo, at(12), at(-300)), 7.0) == "warning"
    # an outage that began before the window only counts its part inside it
    assert outage_figures(lo, at(20), at(15))["cumulative_down_s"] == 5.0


# --- errors ------------------------------------------------------------------------------------


def test_fcs_errors_per_hour_need_the_rate_and_the_count() -> None:
    one = error_figures(1.0, 30.0, 0.0, 1e6, 0.0, 1e6)
    assert one["fcs_errors_per_hour"] == 120.0
    assert error_verdict(one, 120.0, 1e-4, 2) == []  # one stray error in 30 s is not a rate
    burst = error_figures(300.0, 30.0, 0.0, 1e6, 0.0, 1e6)
    assert error_verdict(burst, 120.0, 1e-4, 2) == ["fcs!"]  # 36,000/h: critical
    few = error_figures(3.0, 30.0, 0.0, 1e6, 0.0, 1e6)
    assert error_verdict(few, 120.0, 1e-4, 2) == ["fcs"]


def test_discards_are_a_share_of_packets_per_direction() -> None:
    fig = error_figures(0.0, 30.0, 200.0, 999_800.0, 0.0, 0.0)
    assert fig["in_discards_ratio"] == pytest.approx(2e-4) and fig["out_discards_ratio"] is None
    assert error_verdict(fig, 120.0, 1e-4, 2) == ["in_discards"]
    assert error_verdict(fig, 120.0, 1e-5, 2) == ["in_discards!"]


@given(st.floats(0, 1e9, allow_nan=False), st.floats(0, 1e12, allow_nan=False))
def test_discard_share_is_a_fraction(disc: float, pkts: float) -> None:
    r = error_figures(0.0, 0.0, disc, pkts, 0.0, 0.0)["in_discards_ratio"]
    assert r is None or 0.0 <= r <= 1.0


def test_no_discard_share_without_a_packet_count() -> None:
    # A source that reports discards but not the packet counters (in_pps/out_pps NULL): the share
    # is unknown, not 100 %.
    fig = error_figures(0.0, 30.0, 5_000.0, None, 200.0, None)
    assert fig["in_discards_ratio"] is None and fig["out_discards_ratio"] is None
    assert fig["in_discards"] == 5_000.0 and fig["in_packets"] is None
    assert error_verdict(fig, 120.0, 1e-4, 2) == []
    assert discards_not_judged(fig) == {"in_discards": "no packet count", "out_discards": "no packet count"}


def test_discards_with_zero_packets_are_everything_discarded() -> None:
    # Packets counted, none delivered, some discarded: the port drops all it receives.
    fig = error_figures(0.0, 30.0, 5_000.0, 0.0, 0.0, 0.0)
    assert fig["in_discards_ratio"] == 1.0 and fig["out_discards_ratio"] is None  # 0 of 0: no basis
    assert error_verdict(fig, 120.0, 1e-4, 2) == ["in_discards!"]
    assert discards_not_judged(fig) == {}


@given(
    st.floats(0, 1e9, allow_nan=False),
    st.one_of(st.none(), st.floats(0, 1e12, allow_nan=False)),
    st.floats(0, 1e9, allow_nan=False),
)
def test_a_discard_share_needs_a_packet_count(disc: float, pkts: float | None, errors: float) -> None:
    fig = error_figures(errors, 30.0, disc, pkts, disc, pkts)
    for name in ("in_discards", "out_discards"):
        r = fig[f"{name}_ratio"]
        if pkts is None:
            assert r is None and not any(o.startswith(name) for o in error_verdict(fig, 120.0, 1e-4, 2))
            assert (name in discards_not_judged(fig)) == (disc > 0)
        else:
            assert r is None if disc + pkts == 0 else r == pytest.approx(disc / (disc + pkts))


# --- PFC ---------------------------------------------------------------------------------------


def test_pause_ratio_of_a_400g_link() -> None:
    assert pytest.approx(83.9e-6, rel=1e-3) == PAUSE_QUANTA_BITS / 400e9  # one frame holds 83.9 us
    assert pause_ratio(1000, 400e9) == pytest.approx(0.0839, rel=1e-3)
    assert pause_ratio(10**6, 400e9) == 1.0
    assert pause_ratio(0, 400e9) == pause_ratio(None, 400e9) == pause_ratio(5, None) == 0.0


@given(st.floats(0, 1e7, allow_nan=False), st.floats(0, 1e7, allow_nan=False), st.sampled_from([100e9, 200e9, 400e9]))
def test_pause_ratio_is_bounded_and_monotonic(a: float, b: float, speed: float) -> None:
    lo, hi = sorted((a, b))
    assert 0.0 <= pause_ratio(lo, speed) <= pause_ratio(hi, speed) <= 1.0
    assert pause_ratio(hi, speed) >= pause_ratio(hi, speed * 2)  # a slower link is held longer per frame


def test_trailing_run_ends_with_the_latest_sample() -> None:
    # After a quiet sample the storm began within the run's first interval; with nothing inside
    # the run, neither edge is known full: it proves the 3 + 4 s its link was held.
    assert trailing_run([(10, 0.2), (10, 0.01), (10, 0.3), (10, 0.4)], 0.05) == (7.0, 0.4, 0.4)
    # ... and once a sample inside proves the full rate, 0.3 of the 0.4 inside, the rest in full
    assert trailing_run([(10, 0.01), (10, 0.3), (10, 0.4), (10, 0.4)], 0.05) == (27.5, 0.4, 0.4)
    assert trailing_run([(10, 0.2), (10, 0.3), (10, 0.4)], 0.05) == (30, 0.4, 0.4)  # began before the window
    assert trailing_run([(10, 0.2), (10, 0.3), (10, 0.01)], 0.05) == (0, 0.0, 0.01)  # over
    assert trailing_run([(10, 0.0)], 0.0) == (0, 0.0, 0.0)  # no pauses is never a storm
    assert trailing_run([], 0.05) == (0, 0.0, 0.0)


def test_the_sample_a_storm_began_in_counts_only_what_it_saw() -> None:
    full = 20_000 * PAUSE_QUANTA_BITS / 400e9  # 20K pauses/s on 400G: 1.68, held all the time
    first = 4375 * PAUSE_QUANTA_BITS / 400e9  # the first sample, over 2.2 s (one sample missed)
    # Alone it proves no length, though paused now (peak > 0) ...
    seconds, peak, latest = trailing_run([(1.0, 0.0), (2.2, first)], 0.05)
    assert (seconds, peak, latest) == (0.0, first, first)
    # ... then the 4375 of 20000 frames/s: 0.48 s of its 2.2, not 2.2.
    seconds, peak, _ = trailing_run([(1.0, 0.0), (2.2, first), (0.8, full), (1.0, full)], 0.05)
    assert seconds == pytest.approx(2.2 * 4375 / 20_000 + 1.8) and peak == full
    # A louder first sample and a weaker latest, nothing inside (a burst): the time it held the link.
    assert trailing_run([(1.0, 0.0), (1.0, 0.5), (1.0, 0.25)], 0.05)[0] == 0.75


@pytest.mark.parametrize("split", [0.5, 0.8, 0.9, 0.1])
def test_a_burst_two_samples_share_is_no_storm_however_it_split(split: float) -> None:
    """The drill's benign PFC burst: 1.6 s at 20K pauses/s on 400G (the link held all along),
    shared by two 2 s samples in any proportion, under a 4 s storm minimum (it once counted 4 s,
    a checkpoint, when the larger part fell in the first sample)."""
    load = 20_000 * PAUSE_QUANTA_BITS / 400e9  # 1.68
    first, second = load * 1.6 * split / 2, load * 1.6 * (1 - split) / 2
    seconds, _, _ = trailing_run([(2.0, 0.0), (2.0, first), (2.0, second)], 0.05, nominal_s=2.0)
    assert seconds < 2.7 < 4.0  # at most its uncapped pause load x 1.6 s, the storm minimum far off
    # the same rate lasting: a sample inside the run proves it, and the storm counts in full
    seconds, _, _ = trailing_run([(2.0, 0.0), (2.0, first), (2.0, load), (2.0, load)], 0.05, nominal_s=2.0)
    assert seconds == pytest.approx(2.0 * min(1.0, first / load) + 4.0) and seconds >= 4.0


def test_a_long_sample_after_a_gap_vouches_only_for_the_time_its_link_was_held() -> None:
    # a 1.6 s burst at 20K pauses/s read in one 13 s sample (the stream stalled): 21 % on average,
    # over the 5 % threshold; it reaches back past the window, so it used to count 13 s, a storm
    burst = 20_000 * PAUSE_QUANTA_BITS / 400e9 * 1.6 / 13
    assert trailing_run([(13.0, burst)], 0.05)[0] == 13.0  # without the sampling interval: as before
    seconds, peak, _ = trailing_run([(13.0, burst)], 0.05, nominal_s=2.0)
    assert seconds == pytest.approx(13 * burst) and seconds < 2.7 and peak == burst  # under a 4 s minimum
    # held all along (saturated), the long sample still counts in full; regular samples are untouched
    assert trailing_run([(13.0, 1.68), (2.0, 1.68)], 0.05, nominal_s=2.0)[0] == 15.0
    assert trailing_run([(2.0, 0.06), (2.1, 0.06), (2.0, 0.06)], 0.05, nominal_s=2.0)[0] == pytest.approx(6.1)
    # a held share under one interval still counts one interval: never less than a regular sample
    assert trailing_run([(6.0, 0.2)], 0.05, nominal_s=2.0)[0] == pytest.approx(2.0)
    assert trailing_run([(10.0, 0.5)], 0.05, nominal_s=2.0)[0] == pytest.approx(5.0)


def test_priorities_match_themselves_or_the_totals() -> None:
    assert compatible(3, 3) and compatible(3, -1) and compatible(-1, 4) and not compatible(3, 4)


def _peer(switch: str, port: str) -> tuple[str, str] | None:
    p = FABRIC.peer(Endpoint(switch, port))
    return (p.node, p.port) if p is not None and p.node in FABRIC.switches else None


def tx(switch: str, port: str, ratio: float, prio: int = 3) -> Pausing:
    return Pausing(switch, port, prio, "tx", ratio, ratio, 30.0, ratio * 400e9 / PAUSE_QUANTA_BITS)


def rx(switch: str, port: str, ratio: float, prio: int = 3) -> Pausing:
    return Pausing(switch, port, prio, "rx", ratio, ratio, 30.0, ratio * 400e9 / PAUSE_QUANTA_BITS)


def spine_spread(origin_ratio: float = 0.4) -> list[Pausing]:
    """lf-g1-r1:swp9 pauses sp-r1-1:swp1; the spine (totals only, over SNMP) pauses its other ports
    at a quarter of that, and their peers receive those pauses (the simulator's storm)."""
    items = [tx("lf-g1-r1", "swp9", origin_ratio), rx("sp-r1-1", "swp1", origin_ratio, -1)]
    for p in FABRIC.ports("sp-r1-1")[1:]:
        items.append(tx("sp-r1-1", p.name, origin_ratio / 4, -1))
        peer = _peer("sp-r1-1", p.name)
        assert peer is not None
        items.append(rx(*peer, origin_ratio / 4))
    return items


def test_a_storm_spreading_through_a_spine_names_the_leaf_port_it_started_from() -> None:
    # The spine also pauses lf-g1-r1's other uplinks to it (parallel links): a loop back to the
    # origin's switch, which must not hide the origin.
    (storm,) = pause_trees(spine_spread(), _peer)
    assert (storm.origin.switch, storm.origin.port, storm.kind) == ("lf-g1-r1", "swp9", "sender")
    assert len(storm.members) == 2 + 15 * 2 and not storm.other_origins


def test_a_stuck_nic_is_named_by_the_leaf_port_facing_it() -> None:
    items = [rx("lf-g1-r1", "swp3", 0.5)]  # the NIC of srv-g1-003 pauses the leaf
    items += [tx("lf-g1-r1", f"swp{n}", 0.1) for n in (9, 10, 11)]  # the leaf backs up toward its spines
    items += [rx("sp-r1-1", "swp1", 0.1), rx("sp-r1-2", "swp1", 0.1), rx("sp-r1-1", "swp2", 0.1)]
    (storm,) = pause_trees(items, _peer)
    assert (storm.origin.switch, storm.origin.port, storm.kind) == ("lf-g1-r1", "swp3", "facing_source")
    assert len(storm.members) == 7


def test_unrelated_storms_are_separate_trees() -> None:
    items = [tx("lf-g1-r1", "swp9", 0.3), rx("sp-r1-1", "swp1", 0.3)]
    items += [tx("lf-g2-r5", "swp10", 0.2, prio=4), rx("sp-r5-2", "swp5", 0.2, prio=4)]
    storms = sorted(pause_trees(items, _peer), key=lambda s: s.origin.switch)
    assert [(s.origin.switch, s.origin.port, len(s.members)) for s in storms] == [
        ("lf-g1-r1", "swp9", 2),
        ("lf-g2-r5", "swp10", 2),
    ]


def test_the_sender_is_named_while_its_own_samples_lag_behind_its_peers() -> None:
    # The leaf (gNMI) and the spine (SNMP) are sampled ~0.6 s apart. The spine already shows the
    # full storm and backs up at a quarter of it; the leaf shows a partial first sample, below the
    # spine's spread, or nothing yet. Either way the storm is the leaf port's.
    spread = [x for x in spine_spread(1.0)[2:] if x.direction == "tx" or x.switch != "lf-g1-r1"]
    spread += [rx("lf-g1-r1", p, 0.05) for p in ("swp11", "swp13", "swp15")]  # partial, back to the leaf
    seen_by_spine = rx("sp-r1-1", "swp1", 1.0, -1)
    for own, prio in (([tx("lf-g1-r1", "swp9", 0.2)], 3), ([], -1)):  # -1: known only by the spine's totals
        (storm,) = pause_trees([*own, seen_by_spine, *spread], _peer)
        o = storm.origin
        assert (o.switch, o.port, o.direction, o.priority, storm.kind) == ("lf-g1-r1", "swp9", "tx", prio, "sender")
        assert o.ratio == 1.0  # as the spine counts the same frames
        assert storm.seen == (*own, seen_by_spine) and not storm.other_origins


def test_saturated_ports_are_told_apart_by_their_pause_load() -> None:
    # 50K pauses/s from the leaf, 12.5K from the spine: both hold their peers all the time.
    items = [replace(x, load=4.2 if x.ratio == 1.0 else 1.05) for x in spine_spread(1.0)]
    items[0] = replace(items[0], sustained_s=3.0)  # the leaf's own samples came later
    (storm,) = pause_trees(items, _peer)
    assert (storm.origin.switch, storm.origin.port, storm.kind) == ("lf-g1-r1", "swp9", "sender")


@given(st.floats(0.06, 1.0), st.integers(0, 30))
def test_every_paused_port_lands_in_exactly_one_storm(ratio: float, drop: int) -> None:
    items = spine_spread(ratio)
    del items[2 : 2 + drop]  # some of the spread below threshold or not reported
    storms = pause_trees(items, _peer)
    members = [m for s in storms for m in s.members]
    assert sorted(members, key=repr) == sorted(items, key=repr)
    assert all(s.origin in s.members for s in storms)
    assert any((s.origin.switch, s.origin.port) == ("lf-g1-r1", "swp9") for s in storms)
