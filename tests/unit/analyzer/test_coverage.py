"""What maintenance windows cover (analyzer/coverage.py), and the windows' own validation
(analyzer/maintenance.py), Slurm's reservations read as windows (schedulers): pure logic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from analyzer.actions import ActionPolicy, decide_all
from analyzer.correlation import correlate
from analyzer.coverage import coverage, mark
from analyzer.findings import Finding, blast_radius
from analyzer.incident_model import Incident
from analyzer.links import links_scope
from analyzer.maintenance import Window, WindowIn, parse_rfc3339
from fabric.model import Endpoint, FabricParams
from fabric.topology import build_aipod
from schedulers.maintenance import to_windows
from schedulers.node_map import node_map
from schedulers.slurm import SlurmReservation, parse_reservations, parse_reservations_text

FABRIC = build_aipod(FabricParams(gpus=512, radix=64))
T0 = datetime(2026, 5, 1, 22, 0, tzinfo=UTC)
T1 = T0 + timedelta(hours=1)
LEAF = "lf-g1-r2"
POLICY = ActionPolicy(max_drain_hosts=64, max_drain_fraction=1.0)


def window(i: int = 1, **places: tuple[str, ...] | tuple[int, ...]) -> Window:
    return Window(
        i,
        switches=tuple(places.get("switches", ())),  # type: ignore[arg-type]
        servers=tuple(places.get("servers", ())),  # type: ignore[arg-type]
        rails=tuple(places.get("rails", ())),  # type: ignore[arg-type]
        start=T0,
        end=T1,
        reason="planned",
    )


def server_port(leaf: str, server: str) -> str:
    return next(p.name for p in FABRIC.ports(leaf) if p.peer is not None and p.peer.node == server)


def uplink(leaf: str) -> tuple[str, Endpoint]:
    p = next(p for p in FABRIC.ports(leaf) if p.direction == "up" and p.peer is not None)
    assert p.peer is not None
    return p.name, p.peer


def link_down(switch: str, port: str) -> Finding:
    return Finding(
        "link_outage", f"{switch}:{port}", "critical", f"{switch}:{port} down",
        links_scope(FABRIC, [(switch, port)]), {"down_now": True, "down_for_s": 30.0},
    )  # fmt: skip


def leaf_gone(leaf: str = LEAF) -> Finding:
    return Finding(
        "stale_switch", leaf, "critical", f"{leaf} silent", blast_radius(FABRIC, switches=[leaf]),
        {"peer_links_up": 0, "peer_links_down": 64},
    )  # fmt: skip


def decided(*findings: Finding) -> list:  # type: ignore[type-arg]
    return decide_all(correlate(list(findings), FABRIC), FABRIC, POLICY)


AT = T0 + timedelta(minutes=10)


def test_a_leaf_reboot_in_its_window_is_observed_and_marked() -> None:
    (inc,) = decided(leaf_gone())
    assert inc.action == "drain" and len(inc.action_hosts) == 32
    (marked,) = mark([inc], coverage([window(switches=(LEAF,))], FABRIC), AT)
    assert (marked.maintenance, marked.windows, marked.action, marked.action_hosts) == (True, (1,), "observe", ())
    assert marked.severity == "warning" and not marked.needs_review
    assert "planned" in marked.reason and "otherwise: drain" in marked.reason
    # before and after the window (end exclusive): acted on as always
    for t in (T0 - timedelta(seconds=1), T1):
        (same,) = mark([inc], coverage([window(switches=(LEAF,))], FABRIC), t)
        assert same == inc


def test_a_window_on_a_server_or_a_rail_covers_its_links() -> None:
    server = "srv-g1-003"
    port = server_port(LEAF, server)
    (inc,) = decided(link_down(LEAF, port))
    assert inc.action == "drain" and inc.action_hosts == (server,)
    for w in (window(servers=(server,)), window(rails=(2,)), window(switches=(LEAF,))):
        (marked,) = mark([inc], coverage([w], FABRIC), AT)
        assert marked.maintenance and marked.action == "observe", w
    # another server's window, another rail's, another leaf's: not this link
    for w in (window(servers=("srv-g1-004",)), window(rails=(3,)), window(switches=("lf-g1-r3",))):
        (same,) = mark([inc], coverage([w], FABRIC), AT)
        assert not same.maintenance and same.action == "drain", w


def test_a_link_is_covered_from_either_end() -> None:
    port, spine = uplink(LEAF)
    (inc,) = decided(link_down(LEAF, port))
    (marked,) = mark([inc], coverage([window(switches=(spine.node,))], FABRIC), AT)
    assert marked.maintenance
    cover = coverage([window(switches=(spine.node,))], FABRIC)
    assert cover.event_covered(LEAF, port, AT) and cover.event_covered(spine.node, spine.port, AT)
    assert not cover.event_covered(LEAF, server_port(LEAF, "srv-g1-001"), AT)  # the leaf's own server link


def test_a_storm_born_outside_the_window_is_acted_on_even_when_it_pauses_a_place_inside() -> None:
    """Only the root's place counts, never the blast radius: a fault outside is not hidden."""
    port = server_port(LEAF, "srv-g1-005")
    _, spine = uplink(LEAF)
    storm = Finding(
        "pfc_storm", f"{LEAF}:{port}:3", "critical", "storm",
        blast_radius(FABRIC, switches=[spine.node], ports=[(LEAF, port)]),
        {"origin": {"port": f"{LEAF}:{port}"}, "affected_ports": [f"{LEAF}:{port}"]},
    )  # fmt: skip
    (inc,) = decided(storm)
    assert inc.action == "checkpoint"
    (same,) = mark([inc], coverage([window(switches=(spine.node,))], FABRIC), AT)
    assert not same.maintenance and same.action == "checkpoint"


def test_our_own_collection_is_never_in_maintenance() -> None:
    silent = Finding("collection", "collection", "critical", "collectors silent", blast_radius(FABRIC), {})
    inc = Incident("collection", "collection", silent, location={"switch": LEAF, "port": None, "server": None})
    (same,) = mark([inc], coverage([window(switches=tuple(FABRIC.switches))], FABRIC), AT)
    assert same is inc


def test_sql_exclusions_name_both_ends() -> None:
    _, spine = uplink(LEAF)
    switches, ports, starts, ends = coverage([window(switches=(LEAF,), servers=("srv-g2-001",))], FABRIC).exclusions()
    rows = set(zip(switches, ports, starts, ends, strict=True))
    assert (LEAF, None, T0, T1) in rows and (spine.node, spine.port, T0, T1) in rows
    leaves = {FABRIC.peer(Endpoint("srv-g2-001", nic)) for nic, _ in FABRIC.servers["srv-g2-001"].nics}
    assert {(e.node, e.port, T0, T1) for e in leaves if e is not None} <= rows
    assert coverage([], FABRIC).exclusions() == ([], [], [], [])


@settings(max_examples=200, deadline=None)
@given(
    start=st.integers(-100_000, 100_000),
    length=st.integers(1, 100_000),
    at=st.integers(-200_000, 200_000),
    leaf=st.sampled_from(sorted(s for s in FABRIC.switches if s.startswith("lf-"))),
)
def test_an_event_is_covered_exactly_when_inside_a_window_on_its_link(
    start: int, length: int, at: int, leaf: str
) -> None:
    """Nothing outside a window, or on a link no window holds, is ever left out."""
    w = Window(1, (leaf,), (), (), T0 + timedelta(seconds=start), T0 + timedelta(seconds=start + length))
    cover = coverage([w], FABRIC)
    t = T0 + timedelta(seconds=at)
    port = FABRIC.ports(leaf)[0].name
    assert cover.event_covered(leaf, port, t) == (start <= at < start + length)
    other = next(s for s in sorted(FABRIC.switches) if s.startswith("lf-") and s != leaf)
    assert not cover.event_covered(other, server_port(other, FABRIC.ports(other)[0].peer.node), t)  # type: ignore[union-attr]


# --- the window's validation -------------------------------------------------------------------


def test_rfc3339_only() -> None:
    assert parse_rfc3339("2026-05-01T22:00:00.123456789+02:00") == datetime(
        2026, 5, 1, 20, 0, 0, 123456, tzinfo=UTC
    ).astimezone(parse_rfc3339("2026-05-01T22:00:00+02:00").tzinfo)
    assert parse_rfc3339("2026-05-01t22:00:00z") == T0
    for bad in ("2026-05-01 22:00:00Z", "2026-05-01T22:00Z", "2026-05-01T22:00:00", "2026-02-29T00:00:00Z", "1"):
        with pytest.raises(ValueError):
            parse_rfc3339(bad)


def test_window_in_dedupes_and_forbids_extras() -> None:
    w = WindowIn.model_validate(
        {"switches": [LEAF, LEAF], "rails": [2.0], "start": "2026-05-01T22:00:00Z", "end": "2026-05-01T23:00:00Z"}
    ).to_window()
    assert w.switches == (LEAF,) and w.rails == (2,) and w.source == "api" and w.end - w.start == timedelta(hours=1)
    for bad in ({"rails": [True]}, {"rails": ["2"]}, {"colour": 1}):
        with pytest.raises(ValidationError):
            WindowIn.model_validate({"start": "2026-05-01T22:00:00Z", "end": "2026-05-01T23:00:00Z", **bad})


# --- Slurm's reservations ----------------------------------------------------------------------

SCONTROL = (
    "ReservationName=rack7 StartTime=2026-05-01T22:00:00 EndTime=2026-05-01T23:00:00 Duration=01:00:00 "
    "Nodes=gpu[001-002],login1 NodeCnt=3 CoreCnt=3 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES "
    "TRES=cpu=3 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) "
    "Watts=n/a MaxStartDelay=(null)\n"
    "ReservationName=train StartTime=2026-05-01T22:00:00 EndTime=2026-05-02T22:00:00 Duration=1-00:00:00 "
    "Nodes=gpu003 NodeCnt=1 CoreCnt=1 Features=(null) PartitionName=(null) Flags=SPEC_NODES TRES=cpu=1 "
    "Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a "
    "MaxStartDelay=(null)\n"
)


def test_scontrol_reservations_in_utc() -> None:
    rack, train = parse_reservations_text(SCONTROL)
    assert (rack.name, rack.nodes, rack.start, rack.end, rack.maintenance) == (
        "rack7",
        ("gpu001", "gpu002", "login1"),
        T0,
        T1,
        True,
    )
    assert not train.maintenance
    assert parse_reservations_text("No reservations in the system\n") == []


def test_slurmrestd_reservations_both_shapes() -> None:
    old = {"reservations": [{"name": "r", "node_list": "gpu001", "flags": ["MAINT"], "start_time": T0.timestamp(),
                             "end_time": T1.timestamp()}]}  # fmt: skip
    new = {"reservations": [{"name": "r", "node_list": "gpu001", "flags": ["MAINT"],
                             "start_time": {"set": True, "infinite": False, "number": int(T0.timestamp())},
                             "end_time": {"set": True, "infinite": True, "number": 0}}]}  # fmt: skip
    (a,) = parse_reservations(old)
    (b,) = parse_reservations(new)
    assert (a.start, a.end, a.maintenance) == (T0, T1, True)
    assert b.start == T0 and b.end > T0 + timedelta(days=365)  # no end: open-ended


def test_maint_reservations_become_windows_for_fabric_servers_only() -> None:
    mapping = node_map({"slurm": "gpu{n}", "fabric": "srv-g1-{n}"})
    resv = [
        SlurmReservation("rack7", ("gpu001", "gpu002", "login1"), T0, T1, frozenset({"MAINT"})),
        SlurmReservation("train", ("gpu003",), T0, T1, frozenset()),
        SlurmReservation("cpus", ("login1",), T0, T1, frozenset({"MAINT"})),
    ]
    (w,) = to_windows(resv, mapping, FABRIC.servers)
    assert (w.source, w.servers, w.start, w.end, w.switches, w.rails) == (
        "slurm:rack7",
        ("srv-g1-001", "srv-g1-002"),
        T0,
        T1,
        (),
        (),
    )
