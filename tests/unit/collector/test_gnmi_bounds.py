"""Issue 28's gNMI reproductions: every value bounded before arithmetic, every update total.

Each test feeds the bytes the outside campaign found (tests/fixtures/fuzz/gnmi/issue28-*.bin,
made by tests/support/gnmi_fuzz.py) to a real decoder, with and without the C fast path, and
checks what is counted, what is stored, and that the stream's next message is decoded.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from collector.gnmi_decode import StreamDecoder
from collector.gnmi_values import MAX_NEIGHBORS, PortState, Resolver, neighbor_order
from collector.metrics import CollectorMetrics
from collector.pipeline import Pipeline
from collector.profile_load import load_profile
from fabric.topology import FabricParams, build_aipod
from tests.support.gnmi_fuzz import (
    IF,
    LLDP,
    PROBE,
    SEEDS,
    TS,
    check,
    decimal,
    one,
    probe,
    typed,
)

IN = "state/counters/in-octets"


def seed(name: str) -> bytes:
    return SEEDS[f"issue28-{name}.bin"]


def outcome(*messages: bytes, profile: str = "openconfig") -> dict[str, Any]:
    """check(): C and Python agree, nothing failed, the probe after ``messages`` decoded."""
    return check(messages, profile)


def in_octets(out: dict[str, Any]) -> list[int | None]:
    return [r["in_octets"] for r in out["ports"] if r["time_ns"] == TS]


# --- item 1: a decimal's precision is bounded before 10**precision ---------------------------


@pytest.mark.parametrize("name", ["decimal-precision-uint32-max", "decimal-precision-10e7"])
def test_a_decimal_precision_beyond_the_bound_is_refused_before_any_arithmetic(name: str) -> None:
    # Before: 10**precision (5.8 s of CPU at 10^7; 2^32 - 1 never finished) and in_octets = 0.
    out = outcome(seed(name))
    assert out["invalid"] == {"out_of_range": 1} and in_octets(out) == []


def test_decimals_within_the_bound_are_exact() -> None:
    out = outcome(
        one(IF, IN, decimal(1200, 2)),
        one(IF, "state/counters/out-octets", decimal(0, 30), ts=TS + 1),
        one(IF, "state/counters/in-errors", decimal(2**63 - 1, 1), ts=TS + 2),  # 922337203685477580.7
        one(IF, "state/counters/in-discards", decimal(5, 31), ts=TS + 3),
    )
    assert in_octets(out) == [12]
    assert [r["out_octets"] for r in out["ports"] if r["time_ns"] == TS + 1] == [0]
    assert out["invalid"] == {"not_a_number": 1, "out_of_range": 1}


# --- item 2: a stream survives any single message --------------------------------------------


@pytest.mark.parametrize(
    ("name", "tables", "invalid"),
    [("lldp-id-superscript-two", 1, []), ("lldp-id-4301-digits", 0, ["too_long"])],  # an id above MAX_TEXT
)
def test_an_lldp_neighbour_id_cannot_disable_the_stream(name: str, tables: int, invalid: list[str]) -> None:
    """Before: neighbor_order raised in close_group, and begin() raised before every resubscribe."""
    counted: list[str] = []
    h = StreamDecoder("sw", Resolver(load_profile("openconfig")), {}, lambda what, n: counted.append(what))
    h.begin()
    h.feed(seed(name))
    h.close_group()
    h.begin()  # a resubscribe
    assert h.failures == 0
    h.feed(probe("openconfig"))
    h.close_group()
    ports, lldp = h.take()
    assert [r.in_octets for r in ports] == [PROBE] and len(lldp) == tables and counted == invalid


def test_neighbour_ids_sort_numbers_first_and_are_total_on_any_string() -> None:
    ids = ["\u00b2", "10", "2", "1" * 4301, "b", "\u0664", "0012"]
    assert sorted(ids, key=neighbor_order) == ["2", "10", "0012", "1" * 4301, "b", "\u00b2", "\u0664"]


def test_a_failing_decode_is_counted_and_the_next_message_is_decoded() -> None:
    """The decoder catches what it did not foresee (here the sink's counter failing once)."""
    counted: list[str] = []

    def invalid(what: str, n: int) -> None:
        counted.append(what)
        if len(counted) == 1:
            raise RuntimeError("the sink's counter failed")

    ports: dict[str, PortState] = {}
    dec = StreamDecoder("sw", Resolver(load_profile("openconfig")), ports, invalid)
    dec.begin()
    assert dec.feed(one(IF, IN, typed(string_val="x"))) is False  # not_a_number: counting it raises
    dec.feed(probe("openconfig"))
    dec.close_group()
    dec.begin()
    readings, _ = dec.take()
    assert counted == ["not_a_number", "decode_error"] and dec.failures == 1
    assert [r.in_octets for r in readings] == [PROBE]


# --- item 3: no exception escapes feed -------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("counter-4301-digits", "too_long"),  # above MAX_TEXT; 21 digits are out_of_range (below)
        ("speed-4301-digits", "too_long"),
        ("pfc-priority-superscript-two", "unknown_path"),
        ("json-ietf-nested-1100", "too_deep"),
    ],
)
def test_a_value_that_raised_in_feed_is_counted_and_skipped(name: str, reason: str) -> None:
    out = outcome(seed(name))
    assert out["invalid"] == {reason: 1} and out["values"] == 1  # the probe's


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (typed(string_val="1" * 21), "out_of_range"),
        (typed(string_val="0" * 300 + "7"), None),  # leading zeros are no digits of the number
        (typed(string_val="\u0664\u0662"), "not_a_number"),  # int() reads Arabic-Indic digits; we do not
        (typed(string_val="1" * 5000), "too_long"),
        (typed(json_ietf_val=b'{"a":' * 65 + b"1" + b"}" * 65), "too_deep"),
        (typed(json_ietf_val=b"1" * 5000), "bad_json"),
    ],
)
def test_strings_digits_and_nesting_are_bounded(value: bytes, reason: str | None) -> None:
    out = outcome(one(IF, IN, value))
    assert out["invalid"] == ({reason: 1} if reason else {})
    assert in_octets(out) == ([] if reason else [7])


def test_speeds_and_dates_are_bounded_by_their_columns() -> None:
    srl = "/interface[name=ethernet-1/1]"
    out = outcome(
        one(srl, "ethernet/port-speed", typed(uint_val=2**64 - 1)),  # Mb/s: above a bigint in bits/s
        one(IF, "ethernet/state/port-speed", typed(string_val="SPEED_\u0664GB"), ts=TS + 1),
        one(srl, "last-change", typed(string_val="9999-12-31T23:59:59Z"), ts=TS + 2),  # 2.5e20 ns
        profile="srlinux",
    )
    assert out["invalid"] == {"out_of_range": 2, "unknown_path": 1}
    out = outcome(one(IF, "ethernet/state/port-speed", typed(string_val="SPEED_\u0664GB")))
    assert out["invalid"] == {"bad_enum": 1}


def test_lldp_texts_ids_and_tables_are_bounded() -> None:
    nbr = "neighbors/neighbor[id={}]/state/system-name"
    out = outcome(
        one(LLDP, nbr.format("x" * 5000), typed(string_val="peer")),
        one(LLDP, nbr.format("1"), typed(string_val="x" * 5000), ts=TS + 1),
        SEEDS["bad-lldp-200-neighbours.bin"],
    )
    assert out["invalid"] == {"too_long": 2, "too_many": 200 - MAX_NEIGHBORS}
    assert len(out["lldp"][-1]["neighbors"]) == MAX_NEIGHBORS


# --- item 8: the C and the Python agree; malformed protobuf is refused as protobuf refuses it --


def test_a_path_with_the_deprecated_element_field_is_unknown_in_both_decoders() -> None:
    # Before: the fast paths stored it (in_octets 5), the slow path counted it unknown.
    first = one(IF, IN, typed(uint_val=1))
    out = outcome(first, seed("path-element-deprecated"))
    assert out["invalid"] == {"unknown_path": 1} and in_octets(out) == [1]
    out = outcome(seed("path-element-deprecated"))  # a path first seen there
    assert out["invalid"] == {"unknown_path": 1} and in_octets(out) == []


def test_an_empty_uint_then_one_with_two_varints_are_malformed_as_protobuf_says() -> None:
    # Before: their packed varints counted 2 for 2 updates, and both were stored (5 and 7).
    first = one(IF, IN, typed(uint_val=1))
    out = outcome(first, seed("uint-empty-then-two-varints"))
    assert out["invalid"] == {"malformed": 2} and in_octets(out) == [1]


# --- the counter ---------------------------------------------------------------------------


def test_skipped_values_are_exposed_by_reason() -> None:
    pool: Any = None  # never used: metrics read memory only
    pipeline = Pipeline(pool, build_aipod(FabricParams(gpus=16, rails=2, radix=8)))
    dec = StreamDecoder(
        "lf-g1-r1", Resolver(load_profile("openconfig")), {}, partial(pipeline.count_invalid, "lf-g1-r1")
    )
    dec.begin()
    for name in ("decimal-precision-uint32-max", "counter-4301-digits", "json-ietf-nested-1100"):
        dec.feed(seed(name))
    registry = CollectorRegistry()
    registry.register(CollectorMetrics(pipeline, {}))
    text = generate_latest(registry).decode()
    assert 'fabricmon_collector_invalid_values_total{reason="out_of_range"} 1.0' in text
    assert 'fabricmon_collector_invalid_values_total{reason="too_long"} 1.0' in text
    assert 'fabricmon_collector_invalid_values_total{reason="too_deep"} 1.0' in text
