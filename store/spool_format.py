"""The spool's batch files: encoded as data (never code), checksummed, and read back or refused.

Batch format version 2 (integers big-endian)::

    offset   size  field
    0        8     magic b"FMSPOOL\\n"
    8        2     format version: 2
    10       4     header length H
    14       8     payload length P
    22       H     header, JSON: {"format", "rows", "columns", "types", "compression",
                   "created", "writer"}
    22+H     P     payload: JSON, an array of columns, each an array of ``rows`` values;
                   zlib-compressed when the header's "compression" is "zlib"
    22+H+P   32    SHA-256 of bytes 0 .. 22+H+P

Values are None, bool, int, float (NaN, the infinities and -0.0 included), str (any: JSON
escapes what is not ASCII, lone surrogates too), timezone-aware datetime, and in a column of their
own, arrays of integers (a list or tuple; a FEC histogram's bins). ``types`` says how each column
is stored: ``scalar`` (JSON as it is), ``datetime`` (integer microseconds since 1970-01-01 UTC),
``mixed`` (a datetime is ``[microseconds]``, other values as they are) or ``intarray`` (None or a
JSON array of at most :data:`MAX_ARRAY` integers, read back as a list).
Version 1 (before this format: a pickled list of rows) still replays after an upgrade, through
:mod:`store.spool_v1`'s bounded reader.

Nothing in a file is trusted: every claim (lengths, the row count, the columns) is checked
against the file's size before anything is allocated for it, so a reader's memory is bounded
by what a real batch of the file's size could need (a forged file is refused, not obeyed).
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import stat
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

from store.spool_v1 import MAX_ROWS, RefusedPickle, decode_v1

FORMAT_VERSION = 2
MAGIC = b"FMSPOOL\n"
_PREFIX = struct.Struct(">8sHIQ")  # magic, version, header length, payload length
#: Far above any batch (5,000 rows of 33 columns are ~1.5 MB of JSON; ``batch_rows`` is at most 1M).
_MAX_PAYLOAD = 1 << 30
#: Read errors that say nothing about the batch: it is tried again later, never quarantined.
_TRANSIENT = frozenset({errno.EIO, errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN, errno.EINTR})
_DIGEST = hashlib.sha256().digest_size
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_MIN_US = (datetime.min.replace(tzinfo=UTC) - _EPOCH) // _US
_MAX_US = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // _US
_SCALARS = (bool, int, float, str)
_SCALAR_TYPES = frozenset({type(None), bool, int, float, str})
#: Far above any table's columns (port_counters has ~35).
MAX_COLUMNS = 1024
#: The JSON header: a few hundred bytes, column names included.
_MAX_HEADER = 1 << 20
#: The largest file read at all: the largest payload plus room for its header.
MAX_FILE = _MAX_PAYLOAD + _MAX_HEADER + _PREFIX.size + 32
#: Deflate's best case is 258 bytes from 2 bits (~1032:1): no zlib stream inflates further.
_DEFLATE_RATIO = 1032
_KINDS = frozenset({"scalar", "datetime", "mixed", "intarray"})
#: The longest integer array a value may be (a FEC histogram has 16 bins; per-lane readings 8).
MAX_ARRAY = 4096


@dataclass(frozen=True, slots=True)
class SpoolBatch:
    """One batch read back: its file name, format version, column names (if known) and rows."""

    name: str
    version: int
    #: The column names the pusher gave; None if it gave none, and for version 1 batches.
    columns: tuple[str, ...] | None
    rows: list[tuple[Any, ...]]


class BadBatch(Exception):
    """A batch file that cannot be read back; the message is the reason it is quarantined."""


class UnreadableBatch(BadBatch):
    """The file could not be read now (an I/O error, too many open files): not the batch's fault."""


@functools.cache
def _writer_version() -> str:
    try:
        return f"fabricmon {metadata.version('fabricmon')}"
    except metadata.PackageNotFoundError:
        return "fabricmon"


def encode(rows: Sequence[Sequence[Any]], columns: Sequence[str] | None) -> bytes:
    """One batch in format version 2 (see the module docstring)."""
    for row_type in set(map(type, rows)):
        if not issubclass(row_type, tuple | list):
            raise TypeError(f"spool rows must be tuples, not {row_type.__qualname__}")
    try:
        cols = list(zip(*rows, strict=True))
    except ValueError:
        raise ValueError("spool rows must all have the same number of values") from None
    names = None if columns is None else [str(c) for c in columns]
    if names is not None and len(names) != len(cols):
        raise ValueError(f"{len(names)} column names for rows of {len(cols)} values")
    types: list[str] = []
    payload: list[Sequence[Any]] = []
    for i, col in enumerate(cols):
        label = names[i] if names else f"#{i}"
        kind = _column_kind(label, set(map(type, col)))
        types.append(kind)
        if kind == "intarray":
            payload.append(_arrays(label, col))
        else:
            payload.append(col if kind == "scalar" else _to_micros(label, col, mixed=kind == "mixed"))
    header = {
        "format": FORMAT_VERSION,
        "rows": len(rows),
        "columns": names,
        "types": types,
        "compression": "zlib",
        "created": datetime.now(UTC).isoformat(),
        "writer": _writer_version(),
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    text = json.dumps(payload, separators=(",", ":"), check_circular=False).encode()  # ASCII: ensure_ascii
    body = zlib.compress(text, 1)  # telemetry JSON shrinks ~3x for ~20 % more time: more outage per MB
    data = b"".join((_PREFIX.pack(MAGIC, FORMAT_VERSION, len(head), len(body)), head, body))
    return data + hashlib.sha256(data).digest()


def _column_kind(label: str, present: set[type]) -> str:
    """How a column is stored: ``scalar``, ``datetime``, ``mixed`` or ``intarray``; TypeError for
    what cannot be."""
    arrays = {k for k in present if issubclass(k, list | tuple)}
    if arrays:
        if present - arrays - {type(None)}:
            raise TypeError(f"spool column {label}: arrays mixed with other values (arrays or None only)")
        return "intarray"
    dates = others = False
    for kind in present:
        if issubclass(kind, datetime):
            dates = True
        elif issubclass(kind, _SCALARS):  # subclasses (IntEnum, StrEnum) come back as the base type
            others = True
        elif kind is not type(None):
            raise TypeError(
                f"spool column {label}: cannot store {kind.__qualname__} values "
                "(only None, bool, int, float, str and timezone-aware datetime)"
            )
    return "mixed" if dates and others else "datetime" if dates else "scalar"


def _arrays(label: str, col: Sequence[Any]) -> list[list[int] | None]:
    """An array column as JSON arrays; TypeError for an element that is not an integer."""
    out: list[list[int] | None] = []
    for v in col:
        if v is None:
            out.append(None)
            continue
        if len(v) > MAX_ARRAY or not all(type(x) is int for x in v):
            raise TypeError(f"spool column {label}: an array of more than {MAX_ARRAY} values, or not of integers")
        out.append(list(v))
    return out


def _to_micros(label: str, col: Sequence[Any], *, mixed: bool) -> list[Any]:
    """A column with datetimes as microseconds since the epoch (``[us]`` in a mixed column)."""
    try:
        if mixed:
            out = [[(v - _EPOCH) // _US] if isinstance(v, datetime) else v for v in col]
            micros = [v[0] for v in out if type(v) is list]
        else:
            out = [None if v is None else (v - _EPOCH) // _US for v in col]
            micros = [v for v in out if v is not None]
    except TypeError as exc:  # a naive datetime does not subtract from an aware one
        raise TypeError(f"spool column {label}: a naive datetime (only timezone-aware ones are stored)") from exc
    if micros and not _MIN_US <= min(micros) <= max(micros) <= _MAX_US:
        raise ValueError(f"spool column {label}: a datetime outside years 1 to 9999 in UTC")
    return out


def read(path: Path) -> SpoolBatch:
    """A batch file read back, either version; BadBatch (the reason) if it cannot be.

    Raises nothing else: UnreadableBatch (a BadBatch) when the failure is not the batch's own
    (an I/O error, too many open files, the process out of memory), to be tried again later.
    """
    data = _read_file(path)
    try:
        if data.startswith(MAGIC):
            columns, rows = _decode(data)
            return SpoolBatch(path.name, FORMAT_VERSION, columns, rows)
        if data[:1] == b"\x80":  # pickle's PROTO: version 1 was always pickled with protocol >= 2
            return SpoolBatch(path.name, 1, None, decode_v1(data))
    except BadBatch:
        raise
    except RefusedPickle as exc:
        raise BadBatch(f"version 1: {exc}") from exc
    except MemoryError as exc:  # within the bounds below: the process is short, not the batch bad
        raise UnreadableBatch("out of memory while decoding") from exc
    except Exception as exc:  # bytes from disk: whatever fails to decode is a bad batch, never a crash
        raise BadBatch(f"cannot decode: {type(exc).__name__}: {exc}") from exc
    raise BadBatch(f"not a spool batch: starts with {data[:8]!r}")


def _read_file(path: Path) -> bytes:
    """The file's bytes, if it is a regular file (not a link, FIFO or device) of a batch's size."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise _read_error(exc) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BadBatch("not a regular file")
        if st.st_size > MAX_FILE:
            raise BadBatch(f"{st.st_size} bytes, larger than any batch ({MAX_FILE})")
        with open(fd, "rb", closefd=False) as f:
            data = f.read(st.st_size + 1)  # read(n) allocates n bytes first: what the file holds
    except OSError as exc:
        raise _read_error(exc) from exc
    except MemoryError as exc:
        raise UnreadableBatch("out of memory while reading") from exc
    finally:
        os.close(fd)
    if len(data) != st.st_size:  # batches are renamed into place whole, never written to after
        raise BadBatch(f"changed size while read ({st.st_size} bytes, then {len(data)})")
    return data


def _read_error(exc: OSError) -> BadBatch:
    if exc.errno in _TRANSIENT:
        return UnreadableBatch(f"cannot read: {exc}")
    return BadBatch(f"cannot read: {exc}")


def _decode(data: bytes) -> tuple[tuple[str, ...] | None, list[tuple[Any, ...]]]:
    """Columns and rows of a version 2 batch (see the module docstring)."""
    if len(data) < _PREFIX.size:
        raise BadBatch(f"truncated: {len(data)} bytes, shorter than the {_PREFIX.size}-byte prefix")
    _, version, head_len, body_len = _PREFIX.unpack_from(data)
    if version != FORMAT_VERSION:
        raise BadBatch(f"unknown format version {version} (this fabricmon reads 1 and {FORMAT_VERSION})")
    end = _PREFIX.size + head_len + body_len
    if len(data) != end + _DIGEST:
        raise BadBatch(f"truncated or padded: {len(data)} bytes where the prefix says {end + _DIGEST}")
    if head_len > _MAX_HEADER:
        raise BadBatch(f"a header of {head_len} bytes (at most {_MAX_HEADER})")
    if hashlib.sha256(memoryview(data)[:end]).digest() != data[end:]:
        raise BadBatch("checksum mismatch: the batch changed on disk")
    header = json.loads(data[_PREFIX.size : _PREFIX.size + head_len])
    n, types, names, compressed = _check_header(header, body_len)
    body = data[_PREFIX.size + head_len : end]
    if compressed:
        body = _inflate(body, _payload_cap(n, len(types), body_len))
    payload = json.loads(body)
    if (
        type(payload) is not list
        or len(payload) != len(types)
        or any(type(col) is not list or len(col) != n for col in payload)
    ):
        raise BadBatch("the payload does not match its header")
    cols = [_from_json(kind, col) for kind, col in zip(types, payload, strict=True)]
    return None if names is None else tuple(names), list(zip(*cols, strict=True)) if cols else [()] * n


def _check_header(header: Any, body_len: int) -> tuple[int, list[str], list[str] | None, bool]:
    """Rows, column types, names and whether zlib-compressed; BadBatch for a header that cannot be.

    The row count is checked against the payload's size before anything is allocated for it:
    every value takes at least 2 bytes of JSON (``0,``), and zlib inflates 1032-fold at best.
    """
    if type(header) is not dict:
        raise BadBatch("a header that is not a JSON object")
    n, types, names = header.get("rows"), header.get("types"), header.get("columns")
    if type(n) is not int or not 1 <= n <= MAX_ROWS:
        raise BadBatch(f"a header claiming {n!r} rows (a batch holds 1 to {MAX_ROWS})")
    if type(types) is not list or len(types) > MAX_COLUMNS or not all(type(t) is str and t in _KINDS for t in types):
        raise BadBatch("a header without a list of known column types")
    if names is not None and (type(names) is not list or len(names) != len(types) or
                              any(type(c) is not str for c in names)):  # fmt: skip
        raise BadBatch("a header whose column names do not match its types")
    compression = header.get("compression")
    if compression not in ("zlib", None):
        raise BadBatch(f"unknown compression {compression!r}")
    compressed = compression == "zlib"
    most_json = body_len * _DEFLATE_RATIO + 64 if compressed else body_len
    if types and n * len(types) > most_json // 2 + 1:
        raise BadBatch(f"a header claiming {n} rows of {len(types)} values in {body_len} bytes of payload")
    return n, types, names, compressed


def _payload_cap(rows: int, columns: int, body_len: int) -> int:
    """The most JSON a batch of the header's size could hold: 4 KiB a value (a long text), 1 MiB
    spare; never more than the payload inflates to at deflate's best."""
    cells = rows * max(1, columns)
    return min(_MAX_PAYLOAD, cells * 4096 + (1 << 20), body_len * _DEFLATE_RATIO + 64)


def _inflate(body: bytes, cap: int) -> bytes:
    """A zlib payload, refusing one that would inflate past what its header allows (a forged file)."""
    inflater = zlib.decompressobj()
    out = inflater.decompress(body, cap)
    if inflater.unconsumed_tail or not inflater.eof:
        raise BadBatch(f"the payload inflates past {cap >> 20} MiB, or is cut short")
    return out


def _from_json(kind: str, col: list[Any]) -> list[Any]:
    present = set(map(type, col))
    if kind == "scalar" and present <= _SCALAR_TYPES:
        return col
    if kind == "datetime" and present <= {type(None), int}:
        return [None if v is None else _EPOCH + timedelta(microseconds=v) for v in col]
    if kind == "mixed" and present <= _SCALAR_TYPES | {list}:
        return [_EPOCH + timedelta(microseconds=v[0]) if type(v) is list else v for v in col]
    if (
        kind == "intarray"
        and present <= {type(None), list}
        and all(v is None or (len(v) <= MAX_ARRAY and all(type(x) is int for x in v)) for v in col)
    ):
        return col
    raise BadBatch(f"a {kind!r} column holding {sorted(t.__name__ for t in present)}")
