"""The gNMI decoder fuzzed: corpus replay and hypothesis, with and without the C fast path.

Every input must be answered, never raised: :func:`tests.support.gnmi_fuzz.check` decodes each
message sequence with the C and with the Python alone, asserts the two say the same (readings,
LLDP tables, counts of values, ignored and invalid by reason), that the decoder caught no
exception of its own, and that a plain message after them is still decoded. Time is bounded
by the sizes the strategies draw (a few KiB per message), not measured.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2

from collector import speedups
from tests.support.gnmi_fuzz import (
    CORPUS,
    IF,
    PROFILES,
    SEEDS,
    TS,
    check,
    corpus,
    mutated,
    path_bytes,
    prefix_bytes,
    raw_response,
    raw_update,
    responses,
)

FILES = corpus()
SEED_BYTES = [p.read_bytes() for p in FILES]
#: FABRICMON_FUZZ_EXAMPLES=20000 runs a longer campaign (docs/fuzzing.md); the sanitizer run sets it too.
EXAMPLES = int(os.environ.get("FABRICMON_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_c_is_there_to_compare() -> None:
    assert speedups.fast_values is not None, speedups.unavailable


def test_the_corpus_is_what_its_generator_writes() -> None:
    """The committed files are :data:`SEEDS` (each reproduction's bytes are documented in code)."""
    assert {p.name: p.read_bytes() for p in FILES} == SEEDS
    assert sum(name.startswith("issue28-") for name in SEEDS) == 10


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("file", FILES, ids=[p.name for p in FILES])
def test_every_corpus_file_is_answered_the_same_by_both_decoders(file: Path, profile: str) -> None:
    check([file.read_bytes()], profile)


@pytest.mark.parametrize("profile", PROFILES)
def test_the_whole_corpus_in_one_stream(profile: str) -> None:
    check(SEED_BYTES, profile)


@FUZZ
@given(st.sampled_from(PROFILES), st.lists(responses(), min_size=1, max_size=4), st.booleans())
def test_generated_responses(profile: str, messages: list[bytes], close_each: bool) -> None:
    check(messages, profile, close_each=close_each)


@FUZZ
@given(st.sampled_from(PROFILES), st.lists(mutated(SEED_BYTES), min_size=1, max_size=3), st.booleans())
def test_mutated_responses(profile: str, messages: list[bytes], close_each: bool) -> None:
    check(messages, profile, close_each=close_each)


@FUZZ
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=3))
def test_random_bytes(messages: list[bytes]) -> None:
    check(messages, "openconfig")


# --- protobuf is the judge of the wire format -------------------------------------------------

COUNTERS = ["in-octets", "out-octets", "in-errors", "out-errors"]
# A TypedValue that starts as a uint_val: a varint of 0 to 11 bytes, and maybe bytes after it.
UINTISH = st.builds(
    lambda body, tail: b"\x18" + body + tail,
    st.binary(max_size=11),
    st.one_of(st.just(b""), st.binary(max_size=3)),
)


def protobuf_says(value: bytes) -> int | str:
    """What gnmi_pb2 reads in a TypedValue: its uint_val, or why the decoder must not store it."""
    try:
        tv = gnmi_pb2.TypedValue.FromString(value)
    except Exception:
        return "malformed"
    which = tv.WhichOneof("value")
    assume(which in ("uint_val", None))  # random tails that make another type: the other tests' job
    return int(tv.uint_val) if which == "uint_val" else "wrong_type"


@settings(max_examples=EXAMPLES * 2, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(COUNTERS), UINTISH), min_size=1, max_size=6))
# found by CI: a value the split cannot take (fields of the wrong wire type after its uint), then
# the same path plain; the careful one was applied after the split one, so the first won
@example([("in-octets", b"\x18\x01\x08\x00\x95\x00\x00\x00\x00\x80"), ("in-octets", b"\x18\x00")])
def test_a_counter_is_stored_exactly_when_protobuf_reads_it(updates: list[tuple[str, bytes]]) -> None:
    # The row is open first (the C stores into it), then one notification of raw values.
    first = raw_response(prefix_bytes(IF), raw_update(path_bytes("state/counters/in-octets"), b"\x18\x01"))
    ups = [raw_update(path_bytes(f"state/counters/{leaf}"), value) for leaf, value in updates]
    out = check([first, raw_response(prefix_bytes(IF), *ups)], "openconfig", close_each=False)
    want: dict[str, Any] = {"in-octets": 1}
    invalid: dict[str, int] = {}
    for leaf, value in updates:
        said = protobuf_says(value)
        if isinstance(said, int):
            want[leaf] = said
        else:
            invalid[said] = invalid.get(said, 0) + 1
    (row,) = [r for r in out["ports"] if r["time_ns"] == TS]
    assert {leaf: row[leaf.replace("-", "_")] for leaf in COUNTERS if row[leaf.replace("-", "_")] is not None} == want
    assert out["invalid"] == invalid


def test_the_corpus_directory_holds_only_seeds() -> None:
    assert sorted(p.name for p in CORPUS.iterdir() if p.name != ".gitattributes") == sorted(SEEDS)
