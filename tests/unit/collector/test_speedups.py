"""The C per-value path (collector/_speedups.c) against its Python twins, on generated inputs.

The Python is the reference: with the C the decoder yields the same readings and the tracker the
same deltas and baselines; where the C hands an input back, it has moved nothing. The C must be
built here (``make`` builds it): a test environment that silently ran only the Python would test
nothing new.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import collector.counters as counters
import collector.gnmi_decode as gnmi_decode
import hatch_build
from collector import speedups
from collector.records import COUNTER_FIELDS, PortReading
from store.records import PortSample
from tests.unit.collector.test_gnmi_decode import IF, PFC, TS, Harness, note, path, update
from wire.protobuf import varint

ROOT = Path(__file__).resolve().parents[3]
C_FAST = speedups.fast_values
C_DELTAS = speedups.deltas


def test_the_c_is_built_and_in_use() -> None:
    assert C_FAST is not None and C_DELTAS is not None, speedups.unavailable
    assert getattr(gnmi_decode, "_c_fast_values") is C_FAST and getattr(counters, "_c_deltas") is C_DELTAS  # noqa: B009


# --- the decoder's fast path ----------------------------------------------------------------

LEAVES = [
    "state/counters/in-octets",
    "state/counters/out-octets",
    "state/counters/in-unicast-pkts",
    "state/counters/in-errors",
    "state/counters/carrier-transitions",
    "state/oper-status",  # a string leaf: not a plain counter's slot
    "state/counters/no-such-counter",  # a path the profile does not know
]

U64 = st.integers(0, 2**64 - 1)


@st.composite
def updates(draw: st.DrawFn) -> Any:
    leaf = draw(st.sampled_from(LEAVES))
    kind = draw(st.sampled_from(["uint", "uint", "uint", "int", "string", "json"]))
    if kind == "uint":
        return update(leaf, uint_val=draw(U64))
    if kind == "int":
        return update(leaf, int_val=draw(st.integers(-(2**63), 2**63 - 1)))
    if kind == "string":
        return update(leaf, string_val=draw(st.sampled_from(["UP", "DOWN", "12"])))
    return update(leaf, json_ietf_val=str(draw(U64)).encode())


def decoded(messages: list[bytes], c: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    with monkeypatch.context() as m:
        m.setattr(gnmi_decode, "_c_fast_values", C_FAST if c else None)
        h = Harness()
        ports, _ = h.feed(*messages)
    rows = [{k: v for k, v in asdict(r).items() if k != "received_ns"} for r in ports]
    return rows, h.dec.values, h.dec.ignored, dict(h.invalid)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(updates(), min_size=0, max_size=8), min_size=1, max_size=4))
def test_the_decoder_reads_the_same_with_and_without_the_c(batches: list[list[Any]]) -> None:
    messages = [note(IF, *batch, ts=TS + i) for i, batch in enumerate(batches)]
    with pytest.MonkeyPatch.context() as mp:
        assert decoded(messages, True, mp) == decoded(messages, False, mp)


def _raw_update(path_bytes: bytes, typed_value: bytes) -> bytes:
    return b"\x0a" + varint(len(path_bytes)) + path_bytes + b"\x1a" + varint(len(typed_value)) + typed_value


IN_OCTETS = path("state/counters/in-octets").SerializeToString()


def _slots() -> tuple[dict[bytes, Any], int]:
    """The prefix cache of a decoder that has read one in-octets update: (slots, in-octets' slot)."""
    h = Harness()
    h.feed(note(IF, update("state/counters/in-octets", uint_val=1)))
    (ctx,) = [c for c in h.dec._prefixes.values() if c.port == "swp1"]
    at = ctx.slots[IN_OCTETS]
    assert isinstance(at, int)
    return ctx.slots, at


def test_the_c_takes_a_plain_notification_and_stores_every_value() -> None:
    assert C_FAST is not None
    slots, at = _slots()
    row: list[Any] = [None] * 40
    assert C_FAST([_raw_update(IN_OCTETS, b"\x18" + varint(2**64 - 1))], slots, row) == 1
    assert row[at] == 2**64 - 1 and row.count(None) == 39
    assert C_FAST([], slots, row) == 0


@pytest.mark.parametrize(
    "raw",
    [
        _raw_update(IN_OCTETS, b"\x18\x05\x18\x07"),  # a second field after the varint
        _raw_update(IN_OCTETS, b"\x18"),  # no varint
        _raw_update(IN_OCTETS, b"\x18" + b"\xff" * 9 + b"\x02"),  # wider than 64 bits
        _raw_update(IN_OCTETS, b"\x18" + b"\xff" * 11),  # longer than a varint can be
        _raw_update(IN_OCTETS, b"\x20\x05"),  # int_val, not uint_val
        _raw_update(path("state/counters/in-errors").SerializeToString(), b"\x18\x05"),  # not cached
        _raw_update(path("state/counters/in-octets" + "/x" * 70).SerializeToString(), b"\x18\x05"),  # long path
        b"\x0a",  # cut short
        b"",
    ],
)
def test_the_c_hands_back_what_is_not_the_plain_layout(raw: bytes) -> None:
    assert C_FAST is not None
    slots, _ = _slots()
    row: list[Any] = [None] * 40
    assert C_FAST([raw], slots, row) == -1


def test_the_c_hands_back_a_slot_that_is_not_an_index() -> None:
    assert C_FAST is not None
    slots, at = _slots()
    row: list[Any] = [None] * 40
    for slot in (object(), -1, 40, True):
        slots[IN_OCTETS] = slot
        assert C_FAST([_raw_update(IN_OCTETS, b"\x18\x05")], slots, row) == -1, slot
    with pytest.raises(TypeError):
        C_FAST([_raw_update(IN_OCTETS, b"\x18\x05")], {}, "not a list")  # type: ignore[arg-type]
    assert row[at] is None


def _raw_note(*raw_updates: bytes, ts: int = TS) -> bytes:
    """A SubscribeResponse around ``raw_updates`` (serialized Updates) under the IF prefix."""
    prefix: bytes = path(IF, "lf-g1-r1").SerializeToString()
    body = b"\x08" + varint(ts) + b"\x12" + varint(len(prefix)) + prefix
    body += b"".join(b"\x22" + varint(len(u)) + u for u in raw_updates)
    return b"\x0a" + varint(len(body)) + body


OUT_OCTETS = path("state/counters/out-octets").SerializeToString()


@pytest.mark.parametrize(
    ("bad", "out_octets", "invalid"),
    [
        (b"\x18\x85", 2, {"malformed": 1}),  # a varint cut short: malformed, the value before kept
        (b"\x18\x85\x01\x07", 2, {"malformed": 1}),  # two varints in one value
        (b"\x18" + b"\xff" * 9 + b"\x7f", 2**64 - 1, {}),  # wider than 64 bits: protobuf keeps the low 64
    ],
)
def test_a_bad_value_after_good_ones_reads_the_same_with_or_without_the_c(
    bad: bytes, out_octets: int, invalid: dict[str, int]
) -> None:
    # the first notification opens the port's row; the second, at the same time, adds to it
    first = note(IF, update("state/counters/in-octets", uint_val=1), update("state/counters/out-octets", uint_val=2))
    second = _raw_note(_raw_update(IN_OCTETS, b"\x18\x09"), _raw_update(OUT_OCTETS, bad))
    with pytest.MonkeyPatch.context() as mp:
        with_c, without = decoded([first, first, second], True, mp), decoded([first, first, second], False, mp)
    assert with_c == without
    (row,), _, _, seen = without
    assert (row["in_octets"], row["out_octets"], seen) == (9, out_octets, invalid)


def test_a_decoder_takes_the_c_path_once_its_paths_are_cached() -> None:
    assert C_FAST is not None
    answers: list[int] = []

    def counted(*args: Any) -> int:
        answers.append(C_FAST(*args))
        return answers[-1]

    pfc = [update(f"switch-priority[priority={p}]/state/counters/in-pause-pkts", uint_val=p) for p in range(8)]
    messages = [note(PFC, *pfc, ts=TS + i) for i in range(3)] + [
        note(IF, update("state/counters/in-octets", uint_val=3))
    ]
    with pytest.MonkeyPatch.context() as mp:
        assert decoded(messages, True, mp) == decoded(messages, False, mp)
        mp.setattr(gnmi_decode, "_c_fast_values", counted)
        Harness().feed(*messages)
    assert answers == [-1, 8, 8, -1]  # a path first seen is the Python's (it caches it)


# --- the tracker's deltas -------------------------------------------------------------------

N = len(COUNTER_FIELDS)
NEAR = st.sampled_from([0, 5, 100, 2**32 - 10, 2**32 + 5, 2**63, 2**64 - 1])
COUNTER = st.one_of(st.none(), NEAR, U64)
TIME = st.one_of(st.sampled_from([0, 10**9, 2 * 10**9, 3 * 10**9]), st.integers(0, 2**62))
#: What the C hands back: not a plain counter (or not a plain time).
ODD = st.one_of(st.integers(-5, -1), st.integers(2**64, 2**65), st.booleans(), st.just(1.5))


@st.composite
def port_state(draw: st.DrawFn) -> tuple[list[Any], list[Any], list[Any], int]:
    """(baselines, their times, a reading's values, its time), now and then with one odd entry."""
    before = draw(st.lists(COUNTER, min_size=N, max_size=N))
    times: list[Any] = draw(st.lists(TIME, min_size=N, max_size=N))
    values = draw(st.lists(COUNTER, min_size=N, max_size=N))
    t: Any = draw(TIME)
    if draw(st.integers(0, 3)) == 0:
        where = draw(st.sampled_from(["before", "times", "values", "t"]))
        at, odd = draw(st.integers(0, N - 1)), draw(ODD)
        if where == "t":
            t = odd
        else:
            {"before": before, "times": times, "values": values}[where][at] = odd
    return before, times, values, t


@settings(max_examples=500, deadline=None)
@given(state=port_state(), wrap32=st.frozensets(st.sampled_from(COUNTER_FIELDS)), reset=st.booleans())
@example(
    state=([2**32 - 10] * N, [10**9] * N, [5] * N, 2 * 10**9), wrap32=frozenset(COUNTER_FIELDS), reset=False
)  # the 32-bit counters wrapped
@example(state=([100] * N, [2 * 10**9] * N, [200] * N, 10**9), wrap32=frozenset(), reset=False)  # clock back
def test_the_tracker_deltas_are_the_same_in_c(
    state: tuple[list[Any], list[Any], list[Any], int], wrap32: frozenset[str], reset: bool
) -> None:
    assert C_DELTAS is not None
    before, times, values, t = state
    py = counters._PortState(newest_ns=0)
    py.vals[:N], py.times[:N] = before, times
    c = copy.deepcopy(py)
    vals = tuple(values)
    try:
        want: Any = counters._deltas(py, vals, t, wrap32, reset)
    except TypeError:  # the Python cannot either (a float time): the C must not have taken it
        want = TypeError
    got = C_DELTAS(c.vals, c.times, vals, t, wrap32, reset, COUNTER_FIELDS, counters._CARRIER_INDEX)
    if got is None:  # handed back: nothing moved
        assert (c.vals[:N], c.times[:N]) == (before, times)
        return
    assert got == want
    assert [type(x) for x in got[0].values()] == [tuple] * len(want[0])
    assert (c.vals, c.times) == (py.vals, py.times)


def test_plain_counters_take_the_c_path() -> None:
    assert C_DELTAS is not None
    st_ = counters._PortState(newest_ns=0)
    values = tuple(range(N))
    assert C_DELTAS(st_.vals, st_.times, values, 10**9, frozenset(), False, COUNTER_FIELDS, 0) is not None
    later = tuple(v + 10 for v in values)
    got = C_DELTAS(st_.vals, st_.times, later, 2 * 10**9, frozenset(), False, COUNTER_FIELDS, 0)
    assert got is not None and len(got[0]) == N and got[1:] == (10**9, False, N, 0, 0)
    assert C_DELTAS(st_.vals, st_.times, (True, *later[1:]), 3 * 10**9, frozenset(), False, COUNTER_FIELDS, 0) is None


# --- the port_counters row -------------------------------------------------------------------

C_ROW = speedups.port_row
DELTA = st.tuples(st.one_of(NEAR, U64, st.integers(0, 2**70)), st.floats(1e-9, 1e7))
SPEED = st.one_of(st.none(), st.sampled_from([0, 10**9, 400 * 10**9, 800 * 10**9]), st.integers(1, 2**70))
#: Counter values as a reading carries them: u64, and now and then one a bigint cannot hold.
VALUE = st.one_of(COUNTER, st.integers(-(2**65), 2**70))


def _row_both_ways(
    values: tuple[int | None, ...], deltas: dict[str, Any] | None, speed: int | None, oper: bool | None, reset: bool
) -> tuple[Any, int, Any, int]:
    r = PortReading(switch="lf-g1-r1", port="swp1", time_ns=1_764_460_800_123_456_789, oper_up=oper, speed_bps=speed)
    rows: list[Any] = []
    absurd: list[int] = []
    for c in (True, False):
        tracker = counters.CounterTracker()
        st_ = counters._PortState(newest_ns=0, speed_bps=speed)
        with pytest.MonkeyPatch.context() as mp:
            if not c:
                mp.setattr(counters, "_c_port_row", None)
            rows.append(tracker._sample(r, st_, values, deltas, reset=reset))
        absurd.append(tracker.stats.absurd_rates)
    return rows[0], absurd[0], rows[1], absurd[1]


@settings(max_examples=500, deadline=None)
@given(
    values=st.lists(VALUE, min_size=N, max_size=N).map(tuple),
    deltas=st.one_of(st.none(), st.dictionaries(st.sampled_from(COUNTER_FIELDS), DELTA)),
    speed=SPEED,
    oper=st.one_of(st.none(), st.booleans()),
    reset=st.booleans(),
)
@example(  # every rate absurd on a 1G port
    values=(2**64 - 1,) * N, deltas=dict.fromkeys(COUNTER_FIELDS, (2**40, 1.0)), speed=10**9, oper=True, reset=False
)
@example(  # packet rates whose sum() differs from a + b + c on Python 3.12 (compensated summation)
    values=(0,) * N,
    deltas={"in_unicast_pkts": (1, 10.0), "in_multicast_pkts": (2, 10.0), "in_broadcast_pkts": (3, 10.0)},
    speed=None,
    oper=True,
    reset=False,
)
def test_the_port_row_is_the_same_in_c(
    values: tuple[int | None, ...], deltas: dict[str, Any] | None, speed: int | None, oper: bool | None, reset: bool
) -> None:
    c_row, c_absurd, py_row, py_absurd = _row_both_ways(values, deltas, speed, oper, reset)
    assert type(c_row) is PortSample and tuple(c_row) == tuple(py_row)
    assert [type(v) for v in c_row] == [type(v) for v in py_row]
    assert hash(c_row) == hash(py_row) and c_row._fields == PortSample._fields
    assert c_absurd == py_absurd


def test_the_c_row_hands_back_what_is_not_a_plain_delta_or_counter() -> None:
    assert C_ROW is not None
    t = counters._utc(10**18)
    names = (COUNTER_FIELDS, counters._RATE_NAMES)
    plain = ((0,) * N, {"in_octets": (10, 1.0)})
    assert C_ROW(PortSample, t, "s", "p", 1, None, *plain, 1.2e12, 1.2e12 / 672, False, *names) is not None
    for values, deltas in [
        (plain[0], {"in_octets": (10.0, 1.0)}),  # a float delta
        (plain[0], {"in_octets": (10, 1)}),  # an int interval
        (plain[0], {"in_octets": (10, 0.0)}),  # no interval: the Python raises ZeroDivisionError
        (plain[0], {"in_octets": (10**400, 1.0)}),  # a delta no float holds
        (plain[0], {"in_octets": [10, 1.0]}),
        ((1.5,) + (0,) * (N - 1), None),  # a counter that is not an int
        ((True,) + (0,) * (N - 1), None),
    ]:
        limits = (1.2e12, 1.2e12 / 672)
        assert C_ROW(PortSample, t, "s", "p", 1, None, values, deltas, *limits, False, *names) is None, (values, deltas)


def test_plain_readings_take_the_c_row() -> None:
    calls = []
    real = getattr(counters, "_c_port_row")  # noqa: B009
    assert real is not None

    def counted(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    tracker = counters.CounterTracker()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(counters, "_c_port_row", counted)
        for i in range(3):
            tracker.ingest(PortReading("s", "p", (i + 1) * 10**10, True, 4 * 10**11, in_octets=i * 10**9))
    assert len(calls) == 3


# --- without the C ----------------------------------------------------------------------------


def test_pure_python_is_chosen_by_the_environment_and_still_decodes() -> None:
    code = (
        "from collector import speedups, gnmi_decode, gnmi_optics, counters\n"
        "assert speedups.fast_values is None and speedups.deltas is None, speedups.unavailable\n"
        "assert speedups.optics_pairs is None and gnmi_optics._c_optics_pairs is None\n"
        "assert gnmi_decode._c_fast_values is None and counters._c_deltas is None\n"
        "print(speedups.unavailable)\n"
    )
    env = {**os.environ, "FABRICMON_PURE_PYTHON": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "FABRICMON_PURE_PYTHON" in done.stdout, done.stderr


def test_an_install_without_a_compiler_warns_and_builds_the_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "collector").mkdir()
    shutil.copy(ROOT / "collector" / "_speedups.c", tmp_path / "collector")
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert hatch_build.compile_speedups(tmp_path) is None
    assert "C speedups not built" in capsys.readouterr().err
    monkeypatch.setenv("CC", "false")  # a compiler that fails
    assert hatch_build.compile_speedups(tmp_path) is None
    assert "C speedups not built" in capsys.readouterr().err
    monkeypatch.delenv("CC")
    built = hatch_build.compile_speedups(tmp_path)
    assert built is not None and built.exists()
