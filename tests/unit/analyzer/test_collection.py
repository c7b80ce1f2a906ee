"""The collectors' heartbeats, judged (analyzer.collection): pure rules, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.collection import CollectionState, collection_state, judge
from store.heartbeats import Heartbeat, collector_id

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
S = 30.0  # stale_intervals x interval: 3 x 10 s


def beat(
    name: str = "h:1",
    switches: tuple[str, ...] = ("lf-g1-r1", "lf-g1-r2"),
    *,
    age: float = 2.0,
    lag: float | None = 5.0,
    started: float = 600.0,
    backlog: int = 0,
    spool: int = 0,
    stopped: float | None = None,
    resumed: float | None = None,
) -> Heartbeat:
    ago = lambda s: NOW - timedelta(seconds=s)  # noqa: E731
    return Heartbeat(
        collector=name,
        shard=None,
        started_at=ago(started),
        heartbeat_at=ago(age),
        watermark=None if lag is None else ago(lag),
        backlog_rows=backlog + spool,
        spool_rows=spool,
        replaying=spool > 0,
        switches=switches,
        interval_s=10.0,
        resumed_at=ago(started if resumed is None else resumed),
        stopped_at=None if stopped is None else ago(stopped),
    )


def state(*beats: Heartbeat) -> CollectionState:
    return collection_state(list(beats), NOW, S)


def test_collector_ids() -> None:
    assert collector_id(42, host="node7") == "node7:42"
    assert collector_id(42, (1, 4), host="node7") == "node7:42/shard-1-of-4"


def test_a_healthy_collector_observes_its_switches() -> None:
    st_ = state(beat())
    (c,) = st_.collectors
    assert c.healthy and c.problem is None and not c.stopped
    assert c.heartbeat_age_s == 2.0 and c.ingest_lag_s == 5.0
    assert st_.known and not st_.broken and st_.unobserved() == frozenset()
    assert st_.collector_of("lf-g1-r1") is c and st_.collector_of("sp-r1-1") is None


def test_a_silent_collector_leaves_its_switches_unobserved() -> None:
    st_ = state(beat(age=42.0, lag=44.0))
    (c,) = st_.collectors
    assert not c.healthy and c.problem == "silent for 42 s"
    assert st_.broken and st_.unobserved() == {"lf-g1-r1", "lf-g1-r2"}


def test_ingest_behind_while_heartbeating() -> None:
    c = judge(beat(lag=95.0, backlog=3200), NOW, S)
    assert not c.healthy and c.problem == "ingest 1 min 35 s behind (3,200 rows waiting)"
    idle = judge(beat(lag=95.0), NOW, S)
    assert idle.problem == "ingest 1 min 35 s behind (nothing waiting: nothing received)"


def test_behind_exactly_when_all_its_switches_would_be_stale() -> None:
    # The freshness check calls a switch stale when its newest sample is stale_after_s old; the
    # watermark bounds every sample the collector wrote, so "behind" must not come any later.
    assert not judge(beat(lag=S), NOW, S).healthy
    assert judge(beat(lag=S - 0.5), NOW, S).healthy
    assert judge(beat(lag=S + 5), NOW, S, ingest_slack_s=10.0).healthy  # the caller's trade, if it wants it


def test_replaying_the_spool() -> None:
    c = judge(beat(spool=12_000), NOW, S)
    assert not c.healthy and c.replaying and c.backlog_rows == 12_000
    assert c.problem == "replaying 12,000 spooled rows"


def test_starting_and_catching_up() -> None:
    # Its switches report one after another: until all had their turn, their silence is not theirs.
    c = judge(beat(lag=None, started=3.0), NOW, S)
    assert not c.healthy and c.catching_up and c.ingest_lag_s is None
    assert c.problem == "starting (collecting for 3 s)"
    c = judge(beat(lag=1.0, started=3.0), NOW, S)
    assert c.catching_up and c.problem == "starting (collecting for 3 s)"
    c = judge(beat(lag=1.0, resumed=4.0), NOW, S)
    assert not c.healthy and c.catching_up and c.problem == "catching up (resumed 4 s ago)"
    assert judge(beat(lag=1.0, resumed=S), NOW, S).healthy
    # Past the grace, having written nothing is a problem of its own.
    c = judge(beat(lag=None, started=42.0), NOW, S)
    assert not c.catching_up and c.problem == "nothing written since start 42 s ago"
    assert judge(beat(switches=(), lag=None), NOW, S).healthy  # nothing to collect, nothing to write
    assert not judge(beat(age=60.0, resumed=1.0), NOW, S).catching_up  # silent is worse


def test_a_clean_stop_is_not_a_broken_collector() -> None:
    st_ = state(beat(age=120.0, lag=125.0, stopped=120.0))
    (c,) = st_.collectors
    assert c.stopped and not c.healthy and c.problem == "stopped 2 min ago"
    assert not st_.broken and st_.live == ()
    assert st_.collector_of("lf-g1-r1") is None
    assert st_.unobserved() == {"lf-g1-r1", "lf-g1-r2"}  # nobody is collecting them
    # Over an hour ago: the row is ignored, but the table is known to be in use.
    old = state(beat(age=7200.0, lag=7200.0, stopped=7200.0))
    assert old.collectors == () and old.known
    assert old.unobserved(["lf-g1-r1", "sp-r1-1"]) == {"lf-g1-r1", "sp-r1-1"}


def test_no_rows_means_judge_by_data() -> None:
    st_ = state()
    assert not st_.known and not st_.broken
    assert st_.unobserved(["lf-g1-r1"]) == frozenset() and st_.collector_of("lf-g1-r1") is None


def test_among_restricts_and_extends() -> None:
    st_ = state(beat(age=60.0, lag=60.0), beat("h:2", ("sp-r1-1",)))
    assert st_.unobserved() == {"lf-g1-r1", "lf-g1-r2"}
    assert st_.unobserved(["lf-g1-r1", "sp-r1-1", "ssp-1"]) == {"lf-g1-r1", "ssp-1"}


def test_a_restarted_collector_supersedes_its_dead_predecessor() -> None:
    dead = beat("h:1", age=300.0, lag=300.0)
    restarted = beat("h:2", started=100.0)
    st_ = state(dead, restarted)
    assert [c.collector for c in st_.collectors] == ["h:2"] and not st_.broken
    # ... but not when the newcomer covers only part of its switches.
    partial = beat("h:2", ("lf-g1-r1",), started=100.0)
    st_ = state(dead, partial)
    assert {c.collector for c in st_.collectors} == {"h:1", "h:2"} and st_.broken
    assert st_.unobserved() == {"lf-g1-r2"}
    # A wedged (heartbeating) collector is never superseded: it is a real problem to show.
    wedged = beat("h:1", lag=300.0)
    st_ = state(wedged, restarted)
    assert st_.broken and st_.unobserved() == frozenset()  # the healthy one covers its switches
    assert st_.collector_of("lf-g1-r1") is not None and st_.collector_of("lf-g1-r1").collector == "h:2"  # type: ignore[union-attr]


def test_from_record() -> None:
    hb = beat(spool=5)
    row = {f: getattr(hb, f) for f in Heartbeat.__slots__}
    row["switches"] = list(hb.switches)
    assert Heartbeat.from_record(row) == hb


# --- properties ----------------------------------------------------------------------------------

SWITCHES = ["lf-g1-r1", "lf-g1-r2", "sp-r1-1", "ssp-1"]
ages = st.floats(min_value=0.0, max_value=7300.0, allow_nan=False)


@st.composite
def beats(draw: st.DrawFn) -> list[Heartbeat]:
    out = []
    for i in range(draw(st.integers(0, 4))):
        out.append(
            beat(
                f"h:{i}",
                tuple(draw(st.sets(st.sampled_from(SWITCHES)))),
                age=draw(ages),
                lag=draw(st.none() | ages),
                started=draw(ages),
                backlog=draw(st.integers(0, 10_000)),
                spool=draw(st.sampled_from([0, 0, 500])),
                stopped=draw(st.none() | ages),
                resumed=draw(st.none() | ages),
            )
        )
    return out


@settings(max_examples=300, deadline=None)
@given(beats(), st.sets(st.sampled_from([*SWITCHES, "ssp-2"])))
def test_a_switch_is_observed_exactly_when_a_healthy_live_collector_lists_it(
    rows: list[Heartbeat], among: set[str]
) -> None:
    st_ = collection_state(rows, NOW, S)
    judged = [judge(hb, NOW, S) for hb in rows]
    watched = {s for c in judged if c.healthy for s in c.switches}
    listed = {s for c in st_.collectors for s in c.switches}
    assert st_.unobserved() == listed - watched
    if st_.known:
        assert st_.unobserved(among) == among - watched
    else:
        assert rows == [] and st_.unobserved(among) == frozenset()
    assert st_.broken == any(not c.healthy and not c.stopped for c in st_.collectors)
    for c in st_.collectors:
        # Healthy means heard from lately and something committed within the freshness limit: a
        # collector all of whose switches are stale by data is never healthy.
        assert not c.catching_up or (not c.healthy and not c.stopped)
        if c.healthy:
            assert not c.stopped and c.heartbeat_age_s <= S and not c.replaying
            assert (c.ingest_lag_s is not None and c.ingest_lag_s < S) or not c.switches
        assert c.healthy == (c.problem is None)
    for s in listed:
        owner = st_.collector_of(s)
        if owner is not None:
            assert s in owner.switches and not owner.stopped
            assert owner.healthy or s not in watched
    for s in st_.unobserved(among):
        assert st_.explains(s, None) and st_.explains(s, NOW)  # unobserved: whatever its data says


def test_explains_a_switch_that_went_quiet_with_its_collector() -> None:
    # Interval 10 s: a healthy collector committed 5 s ago.
    st_ = state(beat(lag=5.0))
    w = NOW - timedelta(seconds=5)
    assert st_.explains("lf-g1-r1", w - timedelta(seconds=12))  # sampled one interval earlier: stopped with it
    assert not st_.explains("lf-g1-r1", w - timedelta(seconds=25))  # the collector kept committing: the switch
    assert not st_.explains("lf-g1-r1", None)  # never heard from, with a healthy collector
    assert state(beat(age=60.0)).explains("lf-g1-r1", None)  # a silent collector explains everything
    assert state(beat()).explains("ssp-9", NOW)  # nobody collects it
    assert not state().explains("lf-g1-r1", None)  # no heartbeats at all: judge by data
