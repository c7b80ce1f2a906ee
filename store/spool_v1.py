"""Reading version 1 spool batches (a pickled list of rows, before format version 2), boundedly.

A pickle is a program for a stack machine, and even one that names nothing dangerous can make
the unpickler allocate without bound: ``LONG_BINPUT`` of index 10^8 makes CPython's unpickler
grow its memo to 1.6 GB for a 9-byte file. So a batch is first *parsed* (``pickletools.genops``
reads opcodes and their arguments without running them, and allocates no more than the file
holds) and refused unless every opcode is one a pickled list of records uses, memo indices
come in order, frames fit the file and every global is a record type or a datetime class.
Only then does the C unpickler run it, with a ``find_class`` that knows only those globals;
what comes out must be a non-empty list of flat rows of plain values, whose text (references
to one memoized string count once per use) is at most :data:`EXPANSION` times the file.

The alternative, a one-shot migration to version 2 at start, would still have to read the
same pickles, so it is no safer; see docs/decisions.md.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from datetime import datetime
from typing import Any

from store.records import TABLES

#: How many times its own size a batch's text may expand to through memo references (a pickled
#: batch refers back to each repeated switch or port name: ~10x in real batches).
EXPANSION = 64
#: At most this many rows (the writer spools at most ``batch_rows``, itself at most 1M).
MAX_ROWS = 1_000_000

#: What a version 1 pickle may name: the records and the datetime classes they hold, nothing that runs.
_GLOBALS = frozenset(
    {("datetime", name) for name in ("datetime", "date", "timedelta", "timezone")}
    | {(cls.__module__, cls.__qualname__) for cls in TABLES}
)
#: The opcodes of a list of tuples, records and datetimes pickled with protocol 2 to 5.
_OPCODES = frozenset(
    {
        "PROTO", "FRAME", "STOP", "MARK", "EMPTY_LIST", "APPEND", "APPENDS", "EMPTY_TUPLE", "TUPLE",
        "TUPLE1", "TUPLE2", "TUPLE3", "NONE", "NEWTRUE", "NEWFALSE", "BININT", "BININT1", "BININT2",
        "LONG1", "LONG4", "BINFLOAT", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "SHORT_BINBYTES",
        "BINBYTES", "BINBYTES8", "GLOBAL", "STACK_GLOBAL", "REDUCE", "NEWOBJ", "MEMOIZE", "BINPUT",
        "LONG_BINPUT", "BINGET", "LONG_BINGET",
    }
)  # fmt: skip
_PUTS = frozenset({"BINPUT", "LONG_BINPUT"})
_GETS = frozenset({"BINGET", "LONG_BINGET"})
#: What a row may hold: what version 2 stores (integers of at most 64 bits: the tables' bigints).
_VALUES = (type(None), bool, int, float, str, datetime)


class RefusedPickle(ValueError):
    """A version 1 batch that is refused unrun, or whose result is not a batch of rows."""


def decode_v1(data: bytes) -> list[tuple[Any, ...]]:
    """The rows of a version 1 batch; RefusedPickle (or another ValueError/TypeError) if it is not one."""
    _check_opcodes(data)
    rows = _Unpickler(io.BytesIO(data)).load()
    if type(rows) is not list or not rows:
        raise RefusedPickle("not a non-empty list of rows")
    if len(rows) > MAX_ROWS:
        raise RefusedPickle(f"{len(rows)} rows (a batch holds at most {MAX_ROWS})")
    budget = EXPANSION * len(data) + (1 << 20)
    text = 0
    out: list[tuple[Any, ...]] = []
    for row in rows:
        if not isinstance(row, tuple):  # a record (a NamedTuple) or a plain tuple
            raise RefusedPickle(f"a row that is a {type(row).__name__}, not a tuple")
        for value in row:
            if not isinstance(value, _VALUES):
                raise RefusedPickle(f"a value that is a {type(value).__name__}")
            if type(value) is str:
                text += len(value)
            elif type(value) is int and value.bit_length() > 64:
                raise RefusedPickle(f"an integer of {value.bit_length()} bits")
        if text > budget:
            raise RefusedPickle(f"rows holding more than {budget} characters of text through references")
        out.append(tuple(row))
    return out


def _check_opcodes(data: bytes) -> None:
    """Refuse, before anything runs, a pickle that is not made like a pickled batch."""
    memo = 0
    for op, arg, at in pickletools.genops(data):
        name, pos = op.name, at or 0  # genops gives no position only for a stream that cannot tell
        if name not in _OPCODES:
            raise RefusedPickle(f"opcode {name} at byte {pos}")
        if name in _PUTS or name in _GETS:
            index = int(str(arg))
            if name in _GETS and index >= memo:
                raise RefusedPickle(f"{name} of memo {index} at byte {pos}, before it was set ({memo} set)")
            if name in _PUTS:
                if index > memo:
                    raise RefusedPickle(f"{name} of memo {index} at byte {pos}, out of order ({memo} set)")
                if index == memo:
                    memo += 1
        elif name == "MEMOIZE":
            memo += 1
        elif name == "FRAME" and int(str(arg)) > len(data) - pos:
            raise RefusedPickle(f"a frame of {arg} bytes at byte {pos}, past the end of the file")
        elif name == "GLOBAL":
            module, _, qualname = str(arg).partition(" ")
            _check_global(module, qualname)


def _check_global(module: str, name: str) -> None:
    if (module, name) not in _GLOBALS:
        raise RefusedPickle(f"refused global {module}.{name}")


class _Unpickler(pickle.Unpickler):
    """The C unpickler, naming only the records and datetime classes (``STACK_GLOBAL`` lands here)."""

    def find_class(self, module: str, name: str) -> Any:
        _check_global(module, name)
        return super().find_class(module, name)
