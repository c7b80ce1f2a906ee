"""The on-disk spool: FIFO, bounded, kept across restarts; nothing it reads back can run or block it."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import pickle
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.errors import SpoolError, StoreError
from store.fec import COLUMNS as FEC_COLUMNS
from store.fec import FecSample, fec_rows
from store.records import LinkEvent, PortSample, Reachability, to_int8
from store.spool import Spool, prepare_directory
from store.spool_format import MAGIC, SpoolBatch

FIXTURES = Path(__file__).parents[2] / "fixtures" / "spool"
T = datetime(2024, 5, 17, 3, 4, 5, 123456, tzinfo=UTC)


def rows_of(spool: Spool) -> list[list[tuple[Any, ...]]]:
    """Everything the spool replays, batch by batch, popping as a writer does."""
    out = []
    while (batch := spool.peek()) is not None:
        out.append(batch.rows)
        spool.pop()
    return out


def same(a: Any, b: Any) -> bool:
    """Equal and of the same type; NaN equals NaN and -0.0 is not 0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return bool(a == b)


def test_fifo_and_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "t", max_bytes=10_000_000)
    assert spool.push([(1, "a"), (2, "b")], columns=["n", "s"])
    assert spool.push([(3, "c")])
    again = Spool(tmp_path / "t", max_bytes=10_000_000)  # a restarted process finds both, in order
    assert len(again) == 2
    assert again.peek() == SpoolBatch("000000000000-2.batch", 2, ("n", "s"), [(1, "a"), (2, "b")])
    again.pop()
    again.push([(4, "d")])
    assert rows_of(again) == [[(3, "c")], [(4, "d")]]
    assert again.peek() is None and again.stats.bytes == 0 and again.stats.batches == 0
    assert again.stats.rows_replayed == 4


def test_over_the_limit_drops_the_oldest_and_counts(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "t", max_bytes=4_000)
    for i in range(50):
        spool.push([(i, "x" * 50)] * 3)
    assert spool.stats.bytes <= 4_000
    assert spool.stats.rows_dropped == 150 - 3 * len(spool) and spool.stats.rows == 3 * len(spool)
    first = spool.peek()
    assert first is not None and first.rows[0][0] == 50 - len(spool)


def test_pop_never_takes_a_batch_that_was_not_handed_out(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "t", max_bytes=1_000)
    spool.push([(0, "x" * 300)])
    assert spool.peek() is not None  # being replayed ...
    spool.push([(1, "x" * 300)])
    spool.push([(2, "x" * 300)])  # ... when the limit drops it
    spool.pop()  # the replayed batch is gone already: the next one stays
    assert [rows[0][0] for rows in rows_of(spool)] == [1, 2]


def test_a_half_written_batch_is_ignored(tmp_path: Path) -> None:
    prepare_directory(tmp_path / "t")
    (tmp_path / "t" / "000000000007.tmp").write_bytes(b"\x80\x05garbage")
    spool = Spool(tmp_path / "t", max_bytes=1_000_000)
    assert len(spool) == 0 and not list((tmp_path / "t").iterdir())


def test_rows_waiting_are_counted_across_restarts_and_old_names(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "t", max_bytes=10_000_000)
    spool.push([(1,), (2,), (3,)])
    spool.push([(4,)])
    assert spool.stats.rows == 4
    # A version 1 batch written before names carried the row count is counted from its content.
    (tmp_path / "t" / "000000000007.batch").write_bytes(pickle.dumps([(5,), (6,)]))
    again = Spool(tmp_path / "t", max_bytes=10_000_000)
    assert again.stats.rows == 6 and len(again) == 3
    again.pop()
    assert again.stats.rows == 3
    again.push([(7,)])  # numbered after the old-style batch
    assert rows_of(again) == [[(4,)], [(5,), (6,)], [(7,)]]
    assert again.stats.rows == 0


# Every value type a batch holds; surrogates and NUL in strings, two's-complement bigints.
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([to_int8((1 << 64) - 1), -(1 << 63), (1 << 63) - 1, 1 << 200]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), -0.0, 0.0]),
    st.text(st.one_of(st.characters(), st.characters(categories=["Cs"]), st.just("\x00"))),
    st.datetimes(
        min_value=datetime(2, 1, 1),  # noqa: DTZ001 (hypothesis takes naive bounds)
        max_value=datetime(9998, 12, 31),  # noqa: DTZ001
        timezones=st.builds(timezone, st.timedeltas(-timedelta(hours=23), timedelta(hours=23))),
    ),
)


@st.composite
def batches(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    width = draw(st.integers(0, 6))
    return draw(st.lists(st.tuples(*[VALUES] * width), min_size=1, max_size=8))


@settings(max_examples=60, deadline=None)
@given(st.lists(batches(), min_size=1, max_size=4))
def test_replays_exactly_what_was_pushed(pushed: list[list[tuple[Any, ...]]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        spool = Spool(Path(d) / "t", max_bytes=1 << 30)
        for batch in pushed:
            assert spool.push(batch)
        out = rows_of(Spool(Path(d) / "t", max_bytes=1 << 30))
        assert len(out) == len(pushed)
        for got, want in zip(out, pushed, strict=True):
            assert len(got) == len(want) and all(same(g, w) for g, w in zip(got, want, strict=True)), (got, want)


def test_records_come_back_as_plain_tuples_of_the_same_values(tmp_path: Path) -> None:
    sample = PortSample(T, "leaf-01", "Ethernet1/1", 1, 400_000_000_000, to_int8((1 << 64) - 2), in_bps=1.5)
    spool = Spool(tmp_path / "t", max_bytes=1 << 20)
    spool.push([sample], columns=PortSample._fields)
    batch = spool.peek()
    assert batch is not None and batch.columns == PortSample._fields
    assert type(batch.rows[0]) is tuple and batch.rows[0] == sample


@pytest.mark.parametrize(
    ("rows", "error", "says"),
    [
        ([([1.5],)], TypeError, "not of integers"),
        ([([True],)], TypeError, "not of integers"),
        ([([1],), (2,)], TypeError, "arrays mixed with other values"),
        ([(list(range(5000)),)], TypeError, "more than 4096 values"),
        ([(date(2024, 1, 1),)], TypeError, "cannot store date"),
        ([(T.replace(tzinfo=None),)], TypeError, "naive datetime"),
        ([(b"x",)], TypeError, "cannot store bytes"),
        (["ab"], TypeError, "rows must be tuples"),
        ([(1, 2), (3,)], ValueError, "same number of values"),
        ([(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))),)], ValueError, "outside years 1 to 9999"),
    ],
)
def test_what_cannot_be_stored_is_a_programming_error(
    tmp_path: Path, rows: list[Any], error: type[Exception], says: str
) -> None:
    spool = Spool(tmp_path / "t", max_bytes=1 << 20)
    with pytest.raises(error, match=says):
        spool.push(rows)
    assert len(spool) == 0 and not list((tmp_path / "t").iterdir())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=16)), min_size=1,
                max_size=8))  # fmt: skip
def test_integer_arrays_come_back_as_lists(bins: list[list[int] | None]) -> None:
    """A FEC histogram's bins (``port_fec.bins``, bigint[]) spool while the database is away."""
    with tempfile.TemporaryDirectory() as d:
        rows = [(T, "leaf-01", None if b is None else tuple(b)) for b in bins]
        assert Spool(Path(d) / "t", max_bytes=1 << 20).push(rows, columns=("time", "port", "bins"))
        batch = Spool(Path(d) / "t", max_bytes=1 << 20).peek()
        assert batch is not None and [r[2] for r in batch.rows] == bins


def test_the_fec_writer_s_rows_spool(tmp_path: Path) -> None:
    """Every row the ``port_fec`` writer makes can wait on disk: it once could not (its bins)."""
    samples = [FecSample(T, "leaf-01", "Ethernet1/1", 5, 0, 7, 1e-8, 0.0, tuple(range(16))),
               FecSample(T, "leaf-01", "Ethernet1/2", (1 << 64) - 1)]  # fmt: skip
    spool = Spool(tmp_path / "t", max_bytes=1 << 20)
    assert spool.push(fec_rows(samples), columns=FEC_COLUMNS)
    batch = Spool(tmp_path / "t", max_bytes=1 << 20).peek()
    assert batch is not None and batch.rows == [tuple(r) for r in fec_rows(samples)]


def test_column_names_must_fit_the_rows(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="2 column names for rows of 1 values"):
        Spool(tmp_path / "t", max_bytes=1 << 20).push([(1,)], columns=["a", "b"])


def test_enum_values_come_back_as_their_base_type(tmp_path: Path) -> None:
    class Status(IntEnum):
        UP = 1

    class State(StrEnum):
        OK = "ok"

    spool = Spool(tmp_path / "t", max_bytes=1 << 20)
    spool.push([(Status.UP, State.OK)])
    batch = spool.peek()
    assert batch is not None and [tuple(map(type, row)) for row in batch.rows] == [(int, str)]
    assert batch.rows == [(1, "ok")]


def batch_bytes(tmp_path: Path, rows: list[tuple[Any, ...]]) -> bytes:
    """A real version 2 batch file's bytes."""
    spool = Spool(tmp_path / "maker", max_bytes=1 << 20)
    spool.push(rows)
    return next((tmp_path / "maker").glob("*.batch")).read_bytes()


def bad_first(tmp_path: Path, data: bytes, rows: int = 5) -> Spool:
    """A spool whose oldest batch is ``data`` (named as ``rows`` rows), a good batch behind it."""
    directory = tmp_path / "t"
    prepare_directory(directory)
    (directory / f"000000000000-{rows}.batch").write_bytes(data)
    spool = Spool(directory, max_bytes=1 << 20)
    spool.push([(1, "behind")])
    return spool


def flipped(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]


def unknown_version(data: bytes) -> bytes:
    return MAGIC + (3).to_bytes(2, "big") + data[len(MAGIC) + 2 :]


def rebuilt(data: bytes, header: dict[str, Any] | None = None, body: bytes | None = None) -> bytes:
    """A well-formed version 2 batch (prefix and checksum right) with its header or payload replaced."""
    head_len, body_len = struct.unpack_from(">IQ", data, len(MAGIC) + 2)
    start = len(MAGIC) + 14
    head = json.dumps(header).encode() if header is not None else data[start : start + head_len]
    payload = body if body is not None else data[start + head_len : start + head_len + body_len]
    out = MAGIC + (2).to_bytes(2, "big") + struct.pack(">IQ", len(head), len(payload)) + head + payload
    return out + hashlib.sha256(out).digest()


def header_of(data: bytes) -> dict[str, Any]:
    head_len = struct.unpack_from(">I", data, len(MAGIC) + 2)[0]
    start = len(MAGIC) + 14
    parsed: dict[str, Any] = json.loads(data[start : start + head_len])
    return parsed


def unknown_compression(data: bytes) -> bytes:
    return rebuilt(data, header={**header_of(data), "compression": "lz4"})


def not_zlib(data: bytes) -> bytes:
    return rebuilt(data, body=b"[[1,2,3,4,5],[1,2,3,4,5]]")


@pytest.mark.parametrize("forged", [[["x"]], [[1.5]], [[True]], [list(range(5000))], [7]])
def test_an_array_column_holding_anything_but_integer_arrays_is_quarantined(tmp_path: Path, forged: list[Any]) -> None:
    good = batch_bytes(tmp_path, [([1, 2],)])
    bad = rebuilt(good, body=zlib.compress(json.dumps([forged]).encode()))
    spool = bad_first(tmp_path, bad, rows=1)
    batch = spool.peek()
    assert batch is not None and batch.rows == [(1, "behind")] and spool.stats.batches_quarantined == 1
    reason = (tmp_path / "quarantine" / "t" / "000000000000-1.batch.reason").read_text()
    assert "'intarray' column holding" in reason


def test_a_payload_that_inflates_past_the_cap_is_quarantined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A forged batch, checksummed like a real one, whose payload would inflate without end."""
    bomb = rebuilt(batch_bytes(tmp_path, [(1, "x")]), body=zlib.compress(b" " * (1 << 24), 9))
    spool = bad_first(tmp_path, bomb, rows=1)
    batch = spool.peek()
    assert batch is not None and batch.rows == [(1, "behind")] and spool.stats.batches_quarantined == 1
    reason = (tmp_path / "quarantine" / "t" / "000000000000-1.batch.reason").read_text()
    assert "inflates past 1 MiB" in reason


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [
        (flipped, "checksum mismatch"),
        (lambda data: data[: len(data) - 7], "truncated"),
        (lambda data: data[:10], "truncated"),
        (lambda data: data + b"\n", "padded"),
        (unknown_version, "unknown format version 3"),
        (unknown_compression, "unknown compression 'lz4'"),
        (not_zlib, "cannot decode: error"),
        (lambda data: b"not a batch at all\n", "not a spool batch"),
        (lambda data: b"", "not a spool batch"),
        (lambda data: b"\x80\x05garbage", "cannot decode"),
    ],
)
def test_a_bad_batch_is_quarantined_and_the_next_one_replays(tmp_path: Path, spoil: Any, reason: str) -> None:
    spool = bad_first(tmp_path, spoil(batch_bytes(tmp_path, [(i, "x" * 20) for i in range(5)])))
    assert spool.stats.rows == 6
    batch = spool.peek()
    assert batch is not None and batch.rows == [(1, "behind")]
    assert spool.stats.batches_quarantined == 1 and spool.stats.rows_quarantined == 5 and spool.stats.rows == 1
    moved = tmp_path / "quarantine" / "t" / "000000000000-5.batch"
    assert moved.exists() and not (tmp_path / "t" / moved.name).exists()
    assert reason in (tmp_path / "quarantine" / "t" / f"{moved.name}.reason").read_text()
    spool.pop()
    assert spool.peek() is None
    assert len(Spool(tmp_path / "t", max_bytes=1 << 20)) == 0  # never seen again


def test_a_quarantined_name_used_again_keeps_both(tmp_path: Path) -> None:
    for _ in range(2):
        spool = bad_first(tmp_path, b"junk")
        assert spool.peek() is not None
        spool.pop()
    names = sorted(p.name for p in (tmp_path / "quarantine" / "t").iterdir())
    assert names == [
        "000000000000-5.batch",
        "000000000000-5.batch.1",
        "000000000000-5.batch.1.reason",
        "000000000000-5.batch.reason",
    ]


def test_a_file_not_named_like_a_batch_is_quarantined_at_start(tmp_path: Path) -> None:
    prepare_directory(tmp_path / "t")
    (tmp_path / "t" / "notes.batch").write_text("hi")
    spool = Spool(tmp_path / "t", max_bytes=1 << 20)
    assert len(spool) == 0 and spool.stats.batches_quarantined == 1
    assert (tmp_path / "quarantine" / "t" / "notes.batch").exists()


def test_version_1_batches_replay_after_an_upgrade(tmp_path: Path) -> None:
    """The fixtures were written by the pickle spool; see tests/fixtures/spool/v1/README."""
    shutil.copytree(FIXTURES / "v1", tmp_path / "t", ignore=shutil.ignore_patterns("README*"))
    (tmp_path / "t").chmod(0o775)  # as the old spool made it under a umask of 002: tightened, not refused
    spool = Spool(tmp_path / "t", max_bytes=1 << 20)
    assert spool.stats.rows == 7  # 3 + 2 from the names, 2 read from the batch named without a count
    batches = []
    while (batch := spool.peek()) is not None:
        batches.append(batch)
        spool.pop()
    assert [(b.name, b.version, b.columns) for b in batches] == [
        ("000000000000-3.batch", 1, None),
        ("000000000001-2.batch", 1, None),
        ("000000000002.batch", 1, None),
    ]
    plus2 = timezone(timedelta(hours=2))
    want_ports = [
        PortSample(
            T,
            "leaf-01",
            "Ethernet1/1",
            1,
            400_000_000_000,
            -5,
            (1 << 63) - 1,
            in_errors=0,
            interval_s=10.0,
            in_bps=3.2e11,
            out_bps=math.inf,
        ),
        PortSample(
            datetime(2024, 5, 17, 5, 4, 5, 999999, tzinfo=plus2),
            "spine-07",
            "swp64s3",
            None,
            None,
            -1,
            in_pps=-0.0,
            in_errors_ps=math.nan,
            counter_reset=True,
        ),
        PortSample(
            T + timedelta(seconds=10),
            "leaf-01",
            "Ethernet1/1",
            2,
            400_000_000_000,
            0,
            12345678901234,
            interval_s=9.999,
            in_bps=1.5,
            out_bps=2.25e-3,
        ),
    ]
    assert all(same(got, tuple(want)) for got, want in zip(batches[0].rows, want_ports, strict=True))
    # Pickled when LinkEvent had 7 fields: the new ``flaps`` field takes its default.
    assert batches[1].rows == [
        tuple(LinkEvent(T, "leaf-01", "Ethernet1/1", "up", "down", None, "oper-status", 1)),
        tuple(LinkEvent(T + timedelta(seconds=3), "leaf-01", "Ethernet1/1", "down", "up", 3.0, "oper-status", 1)),
    ]
    assert batches[2].rows == [
        tuple(Reachability(T, "leaf-02", False, "timeout", "gnmi", "deadline exceeded")),
        (T, "leaf-03", True, "ok", None, None),
    ]
    assert spool.stats.rows_replayed == 7 and spool.stats.batches_quarantined == 0


class _Evil:
    def __init__(self, call: Any, arg: str) -> None:
        self.call, self.arg = call, arg

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return self.call, (self.arg,)


@pytest.mark.parametrize(
    ("call", "refused"),
    [(os.system, "posix.system"), (eval, "builtins.eval"), (exec, "builtins.exec")],
)
def test_a_version_1_pickle_that_would_run_code_is_quarantined_unrun(tmp_path: Path, call: Any, refused: str) -> None:
    marker = tmp_path / "ran"
    arg = f"touch {marker}" if call is os.system else f"__import__('pathlib').Path({str(marker)!r}).touch()"
    spool = bad_first(tmp_path, pickle.dumps([(T, _Evil(call, arg))], protocol=pickle.HIGHEST_PROTOCOL), rows=1)
    batch = spool.peek()
    assert batch is not None and batch.rows == [(1, "behind")]
    assert not marker.exists()
    reason = (tmp_path / "quarantine" / "t" / "000000000000-1.batch.reason").read_text()
    assert f"refused global {refused}" in reason


def test_directories_are_created_ours_alone(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        spool = Spool(tmp_path / "root" / "a" / "t", max_bytes=1 << 20)
    finally:
        os.umask(old)
    for d in (tmp_path / "root", tmp_path / "root" / "a", spool.directory, spool.quarantine):
        assert d.stat().st_mode & 0o777 == 0o700, d
    assert spool.quarantine == tmp_path / "root" / "a" / "quarantine" / "t"
    assert (
        Spool(tmp_path / "x", max_bytes=1, quarantine=tmp_path / "q" / "x").quarantine.stat().st_mode & 0o777 == 0o700
    )


@pytest.mark.parametrize("mode", [0o775, 0o770, 0o755, 0o750])
def test_a_directory_of_ours_open_to_our_group_is_tightened(
    tmp_path: Path, mode: int, caplog: pytest.LogCaptureFixture
) -> None:
    """An earlier version's spool under umask 002 (0775) replays after the upgrade, made ours alone."""
    (tmp_path / "t").mkdir()
    (tmp_path / "t").chmod(mode)
    Spool(tmp_path / "t", max_bytes=1 << 20)
    assert (tmp_path / "t").stat().st_mode & 0o777 == 0o700
    assert any(f"had mode 0{mode:o}: tightened to 0700" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("mode", [0o702, 0o777, 0o773])
def test_a_directory_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t").chmod(mode)
    with pytest.raises(SpoolError, match=rf"{tmp_path / 't'} has mode 0{mode:o}.*chmod 700"):
        Spool(tmp_path / "t", max_bytes=1 << 20)
    assert issubclass(SpoolError, StoreError)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
def test_a_directory_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir(mode=0o700)
    os.chown(tmp_path / "t", 65534, 65534)
    with pytest.raises(SpoolError, match=r"owned by uid 65534.*chown 0"):
        prepare_directory(tmp_path / "t")


def test_a_file_where_the_directory_should_be_is_refused(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("")
    with pytest.raises(SpoolError, match="not a directory"):
        prepare_directory(tmp_path / "t")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs, to fill up."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill up (needs root or CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_a_full_disk_refuses_the_batch_and_the_spool_carries_on(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * 96 * 1024)
    spool = Spool(small_disk / "spool" / "t", max_bytes=1 << 30)
    rows = [(T, i, random.Random(i).randbytes(100).hex()) for i in range(50)]  # ~11 KB a batch, compressed
    caplog.set_level(logging.DEBUG, logger="store.spool")
    pushed = 0
    while spool.push(rows):
        pushed += 1
        assert pushed < 40, "the disk never filled"
    assert not spool.push(rows)  # still full
    assert pushed > 0 and spool.stats.write_errors == 2 and len(spool) == pushed
    assert not list(spool.directory.glob("*.tmp")) and len(list(spool.directory.iterdir())) == pushed
    assert spool.stats.rows == spool.stats.rows_spooled == 50 * pushed
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "cannot take a batch" in errors[0].getMessage()  # once per streak
    first = spool.peek()
    assert first is not None and first.rows == rows
    filler.unlink()
    assert spool.push(rows)
    assert any(r.levelno == logging.INFO and "writable again" in r.getMessage() for r in caplog.records)
    assert len(rows_of(spool)) == pushed + 1


def test_a_batch_that_cannot_be_read_now_is_kept_for_later(tmp_path: Path) -> None:
    """Too many open files says nothing about the batch: peek raises, the batch stays, nothing quarantined."""
    spool = Spool(tmp_path / "t", max_bytes=1 << 20)
    assert spool.push([(1, "a")])
    script = f"""
import os, resource, sys
sys.path[:0] = {sys.path!r}
from pathlib import Path
from store.spool import Spool
spool = Spool(Path({str(tmp_path / "t")!r}), max_bytes=1 << 20)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
try:
    spool.peek()
except OSError as exc:
    print("raised", exc.__cause__)
for fd in held:
    os.close(fd)
print("batches", len(spool), "quarantined", spool.stats.batches_quarantined)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "raised cannot read: [Errno 24] Too many open files" in done.stdout
    assert "batches 1 quarantined 0" in done.stdout
    again = Spool(tmp_path / "t", max_bytes=1 << 20).peek()
    assert again is not None and again.rows == [(1, "a")]


def test_a_directory_named_like_a_batch_is_quarantined(tmp_path: Path) -> None:
    prepare_directory(tmp_path / "t")
    (tmp_path / "t" / "000000000000-3.batch").mkdir()
    spool = Spool(tmp_path / "t", max_bytes=1 << 20)
    assert spool.peek() is None and spool.stats.batches_quarantined == 1
