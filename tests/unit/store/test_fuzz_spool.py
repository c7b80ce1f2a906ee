"""Fuzzing the spool reader: random, mutated and forged batch files, memory measured.

The seed corpus is tests/fixtures/fuzz/spool/ (``ok-*`` read back, ``bad-*`` refused; made by
``python -m tests.support.fuzz_corpus``). Whatever the bytes, :func:`store.spool_format.read`
returns a batch of at least one row or raises BadBatch (never UnreadableBatch: these files are
all readable), and its peak allocation (tracemalloc) stays below :data:`BOUND`: the bombs in
the corpus allocated 0.8 to 1.6 GB before the reader was bounded.
"""

from __future__ import annotations

import hashlib
import json
import struct
import tempfile
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.spool import Spool, prepare_directory
from store.spool_format import MAGIC, BadBatch, SpoolBatch, UnreadableBatch, encode, read

CORPUS = Path(__file__).parents[2] / "fixtures" / "fuzz" / "spool"
FILES = sorted(CORPUS.glob("*.batch"))
SEEDS = {p.name: p.read_bytes() for p in FILES}
#: The corpus and its mutations are at most ~50 KB; a real batch of that size needs a few MB.
BOUND = 32 << 20


def read_bytes(data: bytes) -> tuple[SpoolBatch | BadBatch, int]:
    """What :func:`read` makes of ``data`` in a real file, and its peak allocation."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "000000000000-1.batch"
        path.write_bytes(data)
        tracemalloc.start()
        try:
            try:
                got: SpoolBatch | BadBatch = read(path)
            except UnreadableBatch:
                raise
            except BadBatch as exc:
                got = exc
            return got, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def well_formed(got: SpoolBatch | BadBatch) -> bool:
    return isinstance(got, BadBatch) or (len(got.rows) > 0 and all(type(r) is tuple for r in got.rows))


@pytest.mark.parametrize("name", [p.name for p in FILES])
def test_the_seed_corpus_reads_as_labelled(name: str) -> None:
    got, peak = read_bytes(SEEDS[name])
    if name.startswith("ok-"):
        assert isinstance(got, SpoolBatch) and got.rows, got
    else:
        assert isinstance(got, BadBatch), got
    assert peak < BOUND, peak


def test_the_corpus_has_both_kinds() -> None:
    assert sum(n.startswith("ok-v1") for n in SEEDS) >= 3 and sum(n.startswith("ok-v2") for n in SEEDS) >= 3
    assert sum(n.startswith("bad-") for n in SEEDS) >= 8


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A corpus file with bytes flipped, cut, inserted or spliced from another file."""
    data = bytearray(SEEDS[draw(st.sampled_from(sorted(SEEDS)))])
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "splice", "set"]))
        at = draw(st.integers(0, len(data)))
        if kind == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del data[at : at + draw(st.integers(1, 64))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "set" and at < len(data):
            data[at] = draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80, 0x94, 0x72, 0x68, 0x5D, 0x28]))
        else:
            other = SEEDS[draw(st.sampled_from(sorted(SEEDS)))]
            data[at:] = other[draw(st.integers(0, len(other))) :]
    return bytes(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_batches_are_read_or_refused_within_bounds(data: bytes) -> None:
    got, peak = read_bytes(data)
    assert well_formed(got), got
    assert peak < BOUND, (peak, data[:64])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=512), st.sampled_from([b"", MAGIC, MAGIC + b"\x00\x02", b"\x80\x04", b"\x80\x02"]))
def test_random_bytes_are_refused(data: bytes, prefix: bytes) -> None:
    got, peak = read_bytes(prefix + data)
    assert well_formed(got) and peak < BOUND


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=6),
    max_leaves=40,
)


@st.composite
def forged(draw: st.DrawFn) -> bytes:
    """A version 2 file with a correct prefix and checksum (anyone can compute SHA-256), and any claims."""
    types = draw(st.lists(st.sampled_from(["scalar", "datetime", "mixed", "other", 1]), max_size=5))
    header: Any = {
        "format": 2,
        "rows": draw(st.one_of(st.integers(-1, 10), st.sampled_from([10**6, 10**6 + 1, 10**8, 2**63]), JSON)),
        "types": draw(st.one_of(st.just(types), JSON)),
        "columns": draw(st.one_of(st.none(), st.lists(st.text(max_size=3), max_size=5), JSON)),
        "compression": draw(st.sampled_from(["zlib", "zlib", None, "gzip"])),
    }
    if draw(st.booleans()):
        header = draw(JSON)
    payload = draw(st.one_of(JSON.map(lambda v: json.dumps(v).encode()), st.binary(max_size=64)))
    if draw(st.booleans()):
        payload = zlib.compress(payload)
    head = json.dumps(header).encode()
    out = MAGIC + (2).to_bytes(2, "big") + struct.pack(">IQ", len(head), len(payload)) + head + payload
    return out + hashlib.sha256(out).digest()


@settings(max_examples=400, deadline=None)
@given(forged())
def test_forged_headers_and_payloads_are_read_or_refused_within_bounds(data: bytes) -> None:
    got, peak = read_bytes(data)
    assert well_formed(got), got
    assert peak < BOUND


BAD = sorted(name for name in SEEDS if name.startswith("bad-"))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(BAD), st.integers(1, 5)), min_size=1, max_size=12))
def test_a_spool_among_bad_batches_replays_every_good_row(plan: list[str | int]) -> None:
    """A real spool directory holding good batches (a number: that many rows) and bad ones in any order."""
    with tempfile.TemporaryDirectory() as d:
        directory = Path(d) / "t"
        prepare_directory(directory)
        want, bad_rows = [], 0
        for seq, item in enumerate(plan):
            if isinstance(item, int):
                rows = [(seq, i, "good") for i in range(item)]
                (directory / f"{seq:012d}-{item}.batch").write_bytes(encode(rows, ["seq", "i", "s"]))
                want.append(rows)
            else:
                (directory / f"{seq:012d}-3.batch").write_bytes(SEEDS[item])
                bad_rows += 3
        spool = Spool(directory, max_bytes=1 << 30)
        got = []
        while (batch := spool.peek()) is not None:
            got.append(batch.rows)
            spool.pop()
        assert got == want
        bad = len(plan) - len(want)
        assert spool.stats.batches_quarantined == bad and spool.stats.rows_quarantined == bad_rows
        assert spool.stats.rows_replayed == sum(map(len, want)) and not list(directory.iterdir())
        assert len(list(spool.quarantine.glob("*.reason"))) == bad
