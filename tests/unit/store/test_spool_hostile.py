"""Forged and hostile spool files: refused cheaply, quarantined and counted; good batches replay.

Every file here is written to a real spool directory and read back by a real :class:`Spool`, as a
collector that restarts after an outage does. "Cheaply" is measured with tracemalloc: the
reader's peak allocation while it refuses a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import struct
import tracemalloc
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from store.records import PortSample
from store.spool import Spool, prepare_directory
from store.spool_format import MAGIC, MAX_FILE, BadBatch, encode, read

T = datetime(2024, 5, 17, 3, 4, 5, tzinfo=UTC)
#: Far below what any of the bombs here allocated before they were refused (800 MB to 1.6 GB).
CHEAP = 4 << 20


def v2(header: dict[str, Any], payload: bytes, *, compress: bool = True) -> bytes:
    """A version 2 file with this header and payload, its prefix and checksum right (as a forger makes it)."""
    body = zlib.compress(payload) if compress else payload
    head = json.dumps(header).encode()
    out = MAGIC + (2).to_bytes(2, "big") + struct.pack(">IQ", len(head), len(body)) + head + body
    return out + hashlib.sha256(out).digest()


def header(**claims: Any) -> dict[str, Any]:
    return {"format": 2, "rows": 1, "columns": None, "types": ["scalar"], "compression": "zlib", **claims}


def memo_bomb() -> bytes:
    """9 bytes: PROTO 2, EMPTY_LIST, LONG_BINPUT 10^8, STOP (CPython grew its memo to 1.6 GB)."""
    return b"\x80\x02]r" + struct.pack("<I", 10**8) + b"."


def replay_with_bad_first(tmp_path: Path, bad: bytes, rows: int = 5) -> tuple[Spool, list[Any], int]:
    """A spool whose oldest batch is ``bad`` (named as ``rows`` rows), a good one behind it; what replays
    and the reader's peak allocation while it met the bad one."""
    directory = tmp_path / "t"
    prepare_directory(directory)
    (directory / f"000000000000-{rows}.batch").write_bytes(bad)
    spool = Spool(directory, max_bytes=1 << 30)
    spool.push([(1, "behind")])
    tracemalloc.start()
    try:
        batch = spool.peek()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    out = []
    while batch is not None:
        out.append(batch.rows)
        spool.pop()
        batch = spool.peek()
    return spool, out, peak


def reason(tmp_path: Path, rows: int = 5) -> str:
    return (tmp_path / "quarantine" / "t" / f"000000000000-{rows}.batch.reason").read_text()


def test_a_version_1_memo_bomb_is_refused_unrun(tmp_path: Path) -> None:
    spool, replayed, peak = replay_with_bad_first(tmp_path, memo_bomb(), rows=3)
    assert replayed == [[(1, "behind")]]
    assert spool.stats.batches_quarantined == 1 and spool.stats.rows_quarantined == 3
    assert "LONG_BINPUT of memo 100000000" in reason(tmp_path, 3)
    assert peak < CHEAP, peak


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (pickle.dumps([]), "not a non-empty list of rows"),
        (pickle.dumps([], protocol=2), "not a non-empty list of rows"),
        (v2(header(rows=0, types=[]), b"[]"), "claiming 0 rows"),
        (v2(header(rows=0), b"[[]]"), "claiming 0 rows"),
    ],
    ids=["v1-protocol-4", "v1-protocol-2", "v2-no-columns", "v2-one-column"],
)
def test_an_empty_batch_is_never_read_as_ok(tmp_path: Path, bad: bytes, says: str) -> None:
    """The spool never writes an empty batch: one on disk is not a batch that read back with 0 rows."""
    spool, replayed, _ = replay_with_bad_first(tmp_path, bad, rows=0)
    assert replayed == [[(1, "behind")]] and spool.stats.batches_quarantined == 1
    assert says in reason(tmp_path, 0)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (v2(header(rows=10**8, types=[]), b"[]"), "claiming 100000000 rows"),
        (v2(header(rows=10**6, types=["scalar"] * 33), b"[" + b",".join([b"[]"] * 33) + b"]"), "bytes of payload"),
        (v2(header(rows=5000, types=["scalar"] * 4), b"[[1]]", compress=False), "in 5 bytes"),
        (v2(header(rows="5"), b"[[1]]"), "claiming '5' rows"),
        (v2(header(rows=True), b"[[1]]"), "claiming True rows"),
        (v2(header(types="scalar"), b"[[1]]"), "known column types"),
        (v2(header(types=["pickle"]), b"[[1]]"), "known column types"),
        (v2(header(types=["scalar"] * 2000), b"[[1]]"), "known column types"),
        (v2(header(columns=["a", "b"]), b"[[1]]"), "column names do not match"),
        (v2(header(columns=[1]), b"[[1]]"), "column names do not match"),
        (v2(header(compression="zstd"), b"[[1]]"), "unknown compression 'zstd'"),
        (v2([1, 2], b"[[1]]"), "not a JSON object"),  # type: ignore[arg-type]
        (v2(header(), b'{"a": [1]}'), "does not match its header"),
        (v2(header(), b"[[1, 2]]"), "does not match its header"),
        (v2(header(), b"[5]"), "does not match its header"),
        (v2(header(), b"[[" + b"1" * 5000 + b"]]"), "cannot decode: ValueError"),  # past int's 4,300 digits
        (v2(header(), b"[" * 100_000 + b"]" * 100_000), "cannot decode: RecursionError"),
        (v2(header(types=["datetime"]), b"[[" + str(10**30).encode() + b"]]"), "cannot decode: OverflowError"),
    ],
    ids=lambda case: case if isinstance(case, str) else "",
)
def test_forged_version_2_headers_are_refused_cheaply(tmp_path: Path, bad: bytes, says: str) -> None:
    spool, replayed, peak = replay_with_bad_first(tmp_path, bad)
    assert replayed == [[(1, "behind")]] and spool.stats.batches_quarantined == 1
    assert says in reason(tmp_path)
    assert peak < CHEAP + 2 * len(bad), peak


def test_a_zlib_bomb_inflates_no_further_than_its_claims(tmp_path: Path) -> None:
    """10 MB of zeros in ~10 KB, under a header whose rows would fit 1 MB of JSON: stopped at the claim."""
    bad = v2(header(rows=1000, types=["scalar"] * 2), b"0" * 10_000_000)
    assert len(bad) < 20_000
    _, replayed, peak = replay_with_bad_first(tmp_path, bad)
    assert replayed == [[(1, "behind")]] and "inflates past 8 MiB" in reason(tmp_path)
    cap = 2000 * 4096 + (1 << 20)  # 4 KiB a value, 1 MiB spare
    assert peak < 2 * cap + CHEAP, peak  # zlib's output buffer, and the tail it hands back


def pickled(rows: Any, protocol: int = pickle.HIGHEST_PROTOCOL) -> bytes:
    return pickle.dumps(rows, protocol=protocol)


def text_bomb() -> bytes:
    """A row of one 10,000-character string, then 20,000 references to that row: 50 KB of pickle
    that would hand the writer 200 M characters to COPY."""
    return (
        b"\x80\x04]\x94("  # PROTO 4, EMPTY_LIST, MEMOIZE (0), MARK
        + b"X" + struct.pack("<I", 10_000) + b"x" * 10_000 + b"\x94"  # BINUNICODE, MEMOIZE (1)
        + b"\x85\x94"  # TUPLE1, MEMOIZE (2): the row
        + b"h\x02" * 20_000  # BINGET 2: the same row again
        + b"e."  # APPENDS, STOP
    )  # fmt: skip


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (pickled({"rows": [(1,)]}), "opcode EMPTY_DICT"),
        (pickled([[1, 2]]), "a row that is a list"),
        (pickled([(1, (2, 3))]), "a value that is a tuple"),
        (pickled([(1, b"bytes")]), "a value that is a bytes"),
        (pickled([(1 << 70,)]), "an integer of 71 bits"),
        (pickled([(T.date(),)]), "a value that is a date"),
        (b"\x80\x04]h\x05.", "BINGET of memo 5"),
        (b"\x80\x04\x95\xff\xff\x00\x00\x00\x00\x00\x00].", "frame of 65535 bytes"),
        (b"\x80\x04]\x94r\x05\x00\x00\x00.", "out of order"),
        (b"\x80\x04cos\nsystem\n.", "refused global os.system"),
        (b"\x80\x04\x8c\x02os\x8c\x06system\x93.", "refused global os.system"),
        (b"\x80\x04}.", "opcode EMPTY_DICT"),
        (b"\x80\x04]\x94(K\x01K\x02", "cannot decode"),  # cut short
        (text_bomb(), "characters of text through references"),
    ],
    ids=lambda case: case if isinstance(case, str) else "",
)
def test_hostile_version_1_pickles_are_refused(tmp_path: Path, bad: bytes, says: str) -> None:
    spool, replayed, peak = replay_with_bad_first(tmp_path, bad)
    assert replayed == [[(1, "behind")]] and spool.stats.batches_quarantined == 1
    assert says in reason(tmp_path)
    assert peak < CHEAP + 4 * len(bad), peak


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_version_1_batches_of_every_protocol_still_replay(tmp_path: Path, protocol: int) -> None:
    rows: list[tuple[Any, ...]] = [(1, "leaf-01", None, 1.5, True), (2, "leaf-01", -(1 << 63), float("inf"), False)]
    if protocol >= 3:  # protocol 2 pickles a datetime through _codecs.encode, which is refused
        rows.append(tuple(PortSample(T, "leaf-01", "Ethernet1/1", 1, 400_000_000_000, 5)))
        rows.append(PortSample(T, "leaf-02", "Ethernet1/1", 1, 400_000_000_000, 5))
    spool, replayed, _ = replay_with_bad_first(tmp_path, pickled(rows, protocol), rows=len(rows))
    assert replayed == [[tuple(r) for r in rows], [(1, "behind")]] and spool.stats.batches_quarantined == 0


def test_what_is_not_a_regular_file_is_quarantined_unread(tmp_path: Path) -> None:
    """A dangling link once stopped the spool from opening; a FIFO would block the read, and a link to
    /dev/zero read without end: none is followed or read."""
    directory = tmp_path / "t"
    prepare_directory(directory)
    os.symlink(tmp_path / "nowhere", directory / "000000000000-3.batch")
    os.symlink("/dev/zero", directory / "000000000001-3.batch")
    os.mkfifo(directory / "000000000002-3.batch")
    spool = Spool(directory, max_bytes=1 << 20)
    assert spool.push([(1, "behind")])
    batch = spool.peek()
    assert batch is not None and batch.rows == [(1, "behind")]
    assert spool.stats.batches_quarantined == 3 and spool.stats.rows_quarantined == 9
    reasons = sorted(p.read_text().splitlines()[0] for p in spool.quarantine.glob("*.reason"))
    assert [r.split(":")[0] for r in reasons] == ["cannot read", "cannot read", "not a regular file"]
    assert all("Too many levels of symbolic links" in r for r in reasons[:2])


def test_a_file_larger_than_any_batch_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "000000000000-1.batch"
    with path.open("wb") as f:  # sparse: no disk, no memory
        f.truncate(MAX_FILE + 1)
    tracemalloc.start()
    try:
        with pytest.raises(BadBatch, match="larger than any batch"):
            read(path)
        assert tracemalloc.get_traced_memory()[1] < CHEAP
    finally:
        tracemalloc.stop()


BAD: list[tuple[str, Callable[[bytes], bytes]]] = [
    ("truncated", lambda data: data[: len(data) // 2]),
    ("flipped", lambda data: data[:40] + bytes([data[40] ^ 0x10]) + data[41:]),
    ("forged header", lambda data: v2(header(rows=10**8, types=[]), b"[]")),
    ("memo bomb", lambda data: memo_bomb()),
    ("empty pickle", lambda data: pickle.dumps([])),
    ("garbage", lambda data: os.urandom(len(data))),
    ("nothing", lambda data: b""),
]


def test_good_batches_are_never_lost_among_bad_ones(tmp_path: Path) -> None:
    """A spool directory after a bad day: every good batch replays, in order; every bad one is counted."""
    directory = tmp_path / "t"
    prepare_directory(directory)
    want: list[list[tuple[Any, ...]]] = []
    bad_rows = 0
    for seq in range(3 * len(BAD)):
        rows = [(seq, f"row {i}", T) for i in range(seq % 4 + 1)]
        data = encode(rows, ["seq", "text", "time"])
        if seq % 3 == 1:
            _, spoil = BAD[seq // 3]
            (directory / f"{seq:012d}-{len(rows)}.batch").write_bytes(spoil(data))
            bad_rows += len(rows)
        else:
            (directory / f"{seq:012d}-{len(rows)}.batch").write_bytes(data)
            want.append(rows)
    spool = Spool(directory, max_bytes=1 << 30)
    got = []
    while (batch := spool.peek()) is not None:
        got.append(batch.rows)
        spool.pop()
    assert got == want
    assert spool.stats.batches_quarantined == len(BAD) and spool.stats.rows_quarantined == bad_rows
    assert spool.stats.rows_replayed == sum(map(len, want)) and spool.stats.rows == 0
    assert len(list(spool.quarantine.glob("*.reason"))) == len(BAD) and not list(directory.iterdir())
