"""Batches as PostgreSQL's binary COPY stream, encoded in C when the C is built (store/_copy_binary.c).

asyncpg's ``copy_records_to_table`` runs each value through its codecs: ~6 µs of CPU per
``port_counters`` row, ~3 µs per ``pfc_counters`` row on this machine, the collector's largest
single cost after decoding and hygiene. :func:`encode` builds a whole batch's stream in one C pass
(~1 µs and ~0.3 µs), for the column types the writers' tables use. It hands a batch back (None)
when the C is not built, a column is of another type, or any value is not what asyncpg would send
unchanged (a naive datetime, an int out of its column's range, a float beyond float4): the writer
then lets asyncpg encode that batch, with its own errors. PostgreSQL stores the same rows either
way (tests/integration/test_copy_binary.py).

The column kinds come from the database's catalog (:func:`column_kinds`), never from a copy of the
schema kept here: a migration that changes a column's type changes what is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import asyncpg

from fabric.native import load

#: PostgreSQL type name -> the kind letter store/_copy_binary.c encodes.
KINDS = {
    "timestamptz": "T",
    "text": "s",
    "int2": "h",
    "int4": "i",
    "int8": "q",
    "float4": "f",
    "float8": "d",
    "bool": "?",
    "_int8": "Q",  # bigint[] (port_fec's FEC bins), one dimension, no NULL element
}

Encode = Callable[[Sequence[tuple[Any, ...]], str], bytes | None]

#: The extension, and why it is not in use ("" when it is).
#: store/_copy_binary.c's ABI constant.
ABI = 1
_module, unavailable = load("store._copy_binary", ABI)
_encode: Encode | None = None if _module is None else _module.encode

_COLUMN_TYPES = """
SELECT a.attname, t.typname
  FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
 WHERE a.attrelid = to_regclass(quote_ident($1)) AND a.attnum > 0 AND NOT a.attisdropped
"""


def kinds_of(types: dict[str, str], columns: Sequence[str]) -> str | None:
    """The kind string for ``columns`` given each column's type name; None when one is not encoded here."""
    out = []
    for c in columns:
        kind = KINDS.get(types.get(c, ""))
        if kind is None:
            return None
        out.append(kind)
    return "".join(out)


class UnknownTable(LookupError):
    """The catalog has no table by that name (yet: a database being re-created)."""


async def column_kinds(conn: asyncpg.Connection, table: str, columns: Sequence[str]) -> str | None:
    """The kinds of ``table``'s ``columns`` as the database has them; None: not encodable here.
    :class:`UnknownTable` when there is no such table: asyncpg's COPY then says what is wrong, and
    the caller asks again later. The name is one identifier, quoted as asyncpg's
    ``copy_records_to_table`` quotes it."""
    if _encode is None:
        return None
    types = {r["attname"]: r["typname"] for r in await conn.fetch(_COLUMN_TYPES, table)}
    if not types:
        raise UnknownTable(table)
    return kinds_of(types, columns)


def encode(rows: Sequence[tuple[Any, ...]], kinds: str) -> bytes | None:
    """The binary COPY stream of ``rows`` (header, tuples, trailer), or None: encode them another way."""
    return None if _encode is None else _encode(rows, kinds)


__all__ = ["ABI", "KINDS", "UnknownTable", "column_kinds", "encode", "kinds_of", "unavailable"]
