"""Fuzzing the HTTP/2 client's frame reader and state machine (issue 28): hypothesis, and the corpus.

Random frame sequences (any type, flags, stream and payload, beside well-formed ones) and
mutations of the seeds in tests/fixtures/fuzz/h2/ are fed to a connection with streams open,
cut into socket reads anywhere. Whatever arrives:

* no exception leaves ``data_received`` or a stream's ``read_batch`` but :class:`RpcError`,
  and no connection ends by a fault of ours (:data:`wire.grpc_h2.BUG`);
* memory stays within the client's bounds (tests/support/h2_fuzz.py ``Harness.check``): control
  replies queued, a frame and a header block in assembly, messages queued per stream, a message
  in assembly, a stream's window, and what the client writes to a peer that does not read.
"""

from __future__ import annotations

import asyncio
import itertools
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import h2_fuzz
from wire import grpc_h2
from wire import h2_frames as h2
from wire.h2_frames import frame, grpc_message

_FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = [0, *sorted({c % (len(data) + 1) for c in cuts}), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


@pytest.mark.parametrize("name", sorted(h2_fuzz.corpus()))
def test_every_corpus_input_keeps_the_client_within_its_bounds(name: str) -> None:
    data = h2_fuzz.corpus()[name]
    whole = asyncio.run(h2_fuzz.run([data]))
    asyncio.run(h2_fuzz.run(_chunks(data, list(range(1, len(data), 7)))))  # and read 7 bytes at a time
    if name == "ok-three-streams":  # the control: well-formed input is read whole
        assert whole.conn.usable and len(whole.received) == 12 + 3
    if name == "ping-flood":  # 3000 PINGs, our ACKs unread: ended, not buffered
        assert whole.conn._closed is not None and "ENHANCE_YOUR_CALM" in whole.conn._closed.details()


def test_the_corpus_on_disk_holds_every_seed() -> None:
    on_disk = h2_fuzz.corpus()
    assert {k: on_disk.get(k) for k in h2_fuzz.SEEDS} == h2_fuzz.SEEDS, "run python -m tests.support.h2_fuzz"


_SIDS = st.sampled_from([0, 1, 2, 3, 5, 7, 0x7FFFFFFF]) | st.integers(0, 0x7FFFFFFF)
_RAW_FRAME = st.builds(
    frame,
    st.integers(0, 12),
    st.integers(0, 255),
    _SIDS,
    st.binary(max_size=64) | st.sampled_from([b"", b"\x00" * 8, b"\x00" * 4, b"\x00" * 5, b"\x00" * 6]),
)
_GOOD_FRAME = st.one_of(
    st.builds(
        lambda sid, m: frame(h2.DATA, 0, sid, grpc_message(m)), st.sampled_from([1, 3, 5]), st.binary(max_size=200)
    ),
    st.builds(
        lambda sid, end: frame(h2.HEADERS, h2.END_HEADERS | end, sid, grpc_h2.encode_headers(h2_fuzz_ok())),
        st.sampled_from([1, 3, 5]),
        st.sampled_from([0, h2.END_STREAM]),
    ),
    st.builds(
        lambda sid, status: frame(
            h2.HEADERS, h2.END_HEADERS | h2.END_STREAM, sid, grpc_h2.encode_headers([("grpc-status", status)])
        ),
        st.sampled_from([1, 3, 5]),
        st.sampled_from(["0", "2", "13", "99", "", "²", "x"]),
    ),
    st.builds(
        lambda data, ack: frame(h2.PING, ack, 0, data), st.binary(min_size=8, max_size=8), st.sampled_from([0, 1])
    ),
    st.builds(
        lambda key, value: frame(h2.SETTINGS, 0, 0, struct.pack(">HI", key, value)),
        st.integers(0, 8),
        st.sampled_from([0, 1, 2, 16_384, 65_535, 1 << 24, h2.MAX_WINDOW, 0xFFFFFFFF]),
    ),
    st.builds(
        lambda sid, inc: frame(h2.WINDOW_UPDATE, 0, sid, struct.pack(">I", inc)),
        st.sampled_from([0, 1, 3, 5]),
        st.sampled_from([0, 1, 1 << 20, h2.MAX_WINDOW]),
    ),
    st.builds(lambda sid: frame(h2.CONTINUATION, 0, sid, b""), st.sampled_from([1, 3])),
)


def h2_fuzz_ok() -> list[tuple[str, str]]:
    return [(":status", "200"), ("content-type", "application/grpc")]


@_FUZZ
@given(
    frames=st.lists(_GOOD_FRAME | _RAW_FRAME, max_size=60),
    cuts=st.lists(st.integers(0, 1 << 16), max_size=12),
)
def test_random_frame_sequences_end_cleanly_and_within_bounds(frames: list[bytes], cuts: list[int]) -> None:
    data = b"".join(frames)
    asyncio.run(h2_fuzz.run(_chunks(data, cuts)))


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    seeds = h2_fuzz.corpus()
    data = bytearray(seeds[draw(st.sampled_from(sorted(seeds)))])
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "repeat", "splice"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[at] = draw(st.sampled_from([0x00, 0x01, 0x04, 0x08, 0x09, 0x20, 0x7F, 0x80, 0xFF]))
        elif kind == "cut":
            del data[at : at + draw(st.integers(1, 64))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=32))
        elif kind == "repeat":
            piece = data[at : at + draw(st.integers(1, 200))]
            data[at:at] = piece * draw(st.integers(1, 20))
        elif kind == "splice":
            other = seeds[draw(st.sampled_from(sorted(seeds)))]
            data[at:] = other[draw(st.integers(0, max(len(other) - 1, 0))) :]
    return bytes(data)


@_FUZZ
@given(data=_mutated(), cuts=st.lists(st.integers(0, 1 << 17), max_size=12))
def test_mutated_corpus_inputs_end_cleanly_and_within_bounds(data: bytes, cuts: list[int]) -> None:
    asyncio.run(h2_fuzz.run(_chunks(data, cuts)))
