"""The writers' binary COPY encoder (store/_copy_binary.c): the stream it writes, read back by a
reader written here from PostgreSQL's documented format, and every value it hands back.

The database's side (PostgreSQL stores the same rows as through asyncpg's encoder) is
tests/integration/test_copy_binary.py.
"""

from __future__ import annotations

import math
import os
import shutil
import struct
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hatch_build
from store import copy_binary
from store.records import PfcSample, PortSample

ROOT = Path(__file__).resolve().parents[3]
SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
PORT_KINDS = "Tssh" + "q" * 17 + "f" + "d" * 9 + "?"
PFC_KINDS = "Tsshqqfdd?"


def test_the_c_is_built_and_in_use() -> None:
    assert copy_binary.unavailable == "", copy_binary.unavailable


def read_copy(data: bytes, kinds: str) -> list[tuple[Any, ...]]:
    """PostgreSQL's binary COPY format (docs: sql-copy.html, "Binary Format"), read back."""
    assert data[:11] == SIGNATURE
    flags, ext = struct.unpack_from(">ii", data, 11)
    assert flags == 0 and ext == 0
    at, rows = 19, list[tuple[Any, ...]]()
    while True:
        (n,) = struct.unpack_from(">h", data, at)
        at += 2
        if n == -1:
            assert at == len(data), "bytes after the trailer"
            return rows
        assert n == len(kinds)
        row: list[Any] = []
        for k in kinds:
            (size,) = struct.unpack_from(">i", data, at)
            at += 4
            if size == -1:
                row.append(None)
                continue
            raw = data[at : at + size]
            at += size
            if k == "T":
                (us,) = struct.unpack(">q", raw)
                row.append(PG_EPOCH + timedelta(microseconds=us))
            elif k == "s":
                row.append(raw.decode())
            elif k == "Q":  # array_send: ndim, flags, element OID, (length, lower bound) per dim, elements
                ndim, has_null, oid, length, lower = struct.unpack_from(">iiIii", raw)
                assert (ndim, has_null, oid, lower) == (1, 0, 20, 1)
                assert size == 20 + 12 * length
                items = [struct.unpack_from(">iq", raw, 20 + 12 * i) for i in range(length)]
                assert all(n == 8 for n, _ in items)
                row.append([v for _, v in items])
            else:
                fmt = {"h": ">h", "i": ">i", "q": ">q", "f": ">f", "d": ">d", "?": ">?"}[k]
                assert size == struct.calcsize(fmt)
                (value,) = struct.unpack(fmt, raw)
                row.append(value)
        rows.append(tuple(row))


TIMES = st.datetimes(timezones=st.just(UTC))
TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
I64 = st.integers(-(2**63), 2**63 - 1)
FLOAT8 = st.floats(allow_nan=False)
#: float4 columns: values a float4 holds exactly, so the read-back compares equal.
FLOAT4 = st.floats(width=32, allow_nan=False)


def _opt(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | s


PORT_ROWS = st.builds(
    lambda t, sw, port, status, ints, iv, rates, reset: PortSample._make(
        (t, sw, port, status, *ints, iv, *rates, reset)
    ),
    TIMES,
    TEXT,
    TEXT,
    _opt(st.integers(-(2**15), 2**15 - 1)),
    st.lists(_opt(I64), min_size=17, max_size=17),
    _opt(FLOAT4),
    st.lists(_opt(FLOAT8), min_size=9, max_size=9),
    st.booleans(),
)


@given(st.lists(PORT_ROWS, max_size=20))
def test_port_rows_read_back_as_written(rows: list[PortSample]) -> None:
    payload = copy_binary.encode(rows, PORT_KINDS)
    assert payload is not None
    assert read_copy(payload, PORT_KINDS) == [tuple(r) for r in rows]


PFC_ROWS = st.builds(
    PfcSample,
    TIMES,
    TEXT,
    TEXT,
    st.integers(-1, 7),
    _opt(I64),
    _opt(I64),
    _opt(FLOAT4),
    _opt(FLOAT8),
    _opt(FLOAT8),
    st.booleans(),
)


@given(st.lists(PFC_ROWS, max_size=20))
def test_pfc_rows_read_back_as_written(rows: list[PfcSample]) -> None:
    payload = copy_binary.encode(rows, PFC_KINDS)
    assert payload is not None
    assert read_copy(payload, PFC_KINDS) == [tuple(r) for r in rows]


FEC_KINDS = "TssqqqddQ"  # port_fec (migrations/021_link_health.sql): bins bigint[]
FEC_ROWS = st.tuples(
    TIMES, TEXT, TEXT, _opt(I64), _opt(I64), _opt(I64), _opt(FLOAT8), _opt(FLOAT8),
    _opt(st.lists(I64, min_size=1, max_size=40)),
)  # fmt: skip


@given(st.lists(FEC_ROWS, max_size=20))
def test_fec_rows_with_their_bins_read_back_as_written(rows: list[tuple[Any, ...]]) -> None:
    payload = copy_binary.encode(rows, FEC_KINDS)
    assert payload is not None
    assert read_copy(payload, FEC_KINDS) == rows


def test_int4_infinities_and_an_int_in_a_float_column() -> None:
    rows = [(2**31 - 1, -(2**31), math.inf, 3)]
    payload = copy_binary.encode(rows, "iidd")
    assert payload is not None and read_copy(payload, "iidd") == [(2**31 - 1, -(2**31), math.inf, 3.0)]


def test_an_empty_batch_is_header_and_trailer() -> None:
    assert copy_binary.encode([], "T") == SIGNATURE + bytes(8) + b"\xff\xff"


T = datetime(2026, 12, 2, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("row", "kinds"),
    [
        ((datetime(2026, 12, 2, 12),), "T"),  # noqa: DTZ001  naive: asyncpg would read it as local time
        ((datetime(2026, 12, 2, 12, tzinfo=timezone(timedelta(hours=1))),), "T"),  # another zone
        (("2026-12-02",), "T"),
        ((2**15,), "h"),
        ((-(2**15) - 1,), "h"),
        ((2**31,), "i"),
        ((2**63,), "q"),
        ((1.5,), "q"),
        (("1",), "q"),
        ((3.5e38,), "f"),  # beyond float4: asyncpg raises "value out of float32 range"
        ((10**400,), "d"),
        (("x",), "d"),
        ((1,), "?"),
        ((b"swp1",), "s"),
        (("\ud800",), "s"),  # a lone surrogate has no UTF-8
        ((T, "sw"), "T"),  # a row longer than its kinds
        ((T,), "Ts"),  # and shorter
        ([T], "T"),  # not a tuple
        ((T,), "x"),  # a kind the encoder does not know
        (([],), "Q"),  # an empty array has no dimension: asyncpg writes it
        (([1, None],), "Q"),  # a NULL element
        (([2**63],), "Q"),  # beyond int8
        (([1.0],), "Q"),
        (((i for i in range(2)),), "Q"),  # not a list or tuple
        (("12",), "Q"),
    ],
)
def test_what_the_encoder_does_not_take_it_hands_back(row: Any, kinds: str) -> None:
    good = tuple({"T": T, "Q": [1]}.get(k) for k in kinds)
    assert copy_binary.encode([good], kinds) is not None  # the row alone is what is handed back
    assert copy_binary.encode([good, row], kinds) is None


def test_kinds_come_from_the_type_names_and_unknown_types_leave_it_to_asyncpg() -> None:
    types = {"time": "timestamptz", "switch": "text", "v": "int8", "r": "float4", "j": "jsonb"}
    assert copy_binary.kinds_of(types, ["time", "switch", "v", "r"]) == "Tsqf"
    assert copy_binary.kinds_of({"bins": "_int8"}, ["bins"]) == "Q"
    assert copy_binary.kinds_of(types, ["time", "j"]) is None
    assert copy_binary.kinds_of(types, ["time", "missing"]) is None


def test_pure_python_leaves_every_batch_to_asyncpg() -> None:
    code = "from store import copy_binary as c\nassert c.encode([(1,)], 'q') is None\nprint(c.unavailable)\n"
    env = {**os.environ, "FABRICMON_PURE_PYTHON": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "FABRICMON_PURE_PYTHON" in done.stdout, done.stderr


def test_the_install_builds_it_beside_its_source(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    source = Path("store") / "_copy_binary.c"
    assert source in hatch_build.SOURCES
    shutil.copy(ROOT / source, tmp_path / source)
    built = hatch_build.compile_speedups(tmp_path, source)
    assert built is not None and built.parent == tmp_path / "store" and built.name.startswith("_copy_binary.")
