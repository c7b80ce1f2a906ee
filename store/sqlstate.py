"""What a failed write means: keep the batch and retry, or reject the one row at fault.

Errors are told apart by their class, not by a list of exception types: PostgreSQL's SQLSTATE
(the first two characters name the class), and for errors raised before anything reached the
server, the Python exception. Two outcomes only:

- **keep** (:attr:`ErrorClass.keep`): nothing about the rows is wrong, the database cannot take
  them *now* (connection lost, read-only after a failover, disk full, out of memory, deadlock,
  a table missing while the database is re-initialised). The batch stays whole (buffer, then
  spool) and is retried with backoff. Bisecting would only repeat the error ~2N times and throw
  good rows away.
- **row**: the database or the encoder refuses a value (SQLSTATE class 22 data exception, 23
  integrity constraint, 54000 a row over a size limit; a value the client cannot encode). Only
  those bisect the batch down to the row at fault, which alone is rejected and counted.

Anything not known to be about a row keeps the batch: a kept batch costs disk (bounded, drops
counted), a rejected row is gone. docs/decisions.md lists each class and why.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import asyncpg


@dataclass(frozen=True, slots=True)
class ErrorClass:
    """How the writers treat one kind of failure."""

    #: Short name for logs and the ``class`` label of ``fabricmon_writer_errors_total``.
    name: str
    #: True: keep the batch and retry later; False: bisect and reject the row at fault.
    keep: bool
    #: The SQLSTATE, when the server sent one.
    sqlstate: str | None = None


#: SQLSTATE class (two characters) → name, for the classes that keep the batch.
_KEEP_CLASSES = {
    "08": "connection",  # connection exception
    "57": "operator",  # operator intervention: admin/crash shutdown, cannot connect now, query canceled
    "53": "resources",  # insufficient resources: disk full, out of memory, too many connections
    "40": "rollback",  # transaction rollback: serialization failure, deadlock
    "25": "read_only",  # invalid transaction state; 25006 is read-only SQL transaction
    "58": "server",  # system error (I/O error outside PostgreSQL)
    "XX": "server",  # internal error, data corrupted, index corrupted
    "3D": "undefined",  # invalid catalog name: the database is not there (yet)
    "3F": "undefined",  # invalid schema name
}
#: Single SQLSTATEs with a name of their own (checked before the class).
_KEEP_CODES = {
    "42P01": "undefined",  # undefined table: a re-initialised database before its migrations
    "42703": "undefined",  # undefined column: a migration not applied yet
    "42704": "undefined",  # undefined object (a type, a constraint)
    "42501": "privilege",  # insufficient privilege: an operator revoked it, or a read-only role
}
#: Classes whose errors are about a value in a row.
_ROW_CLASSES = {"22": "data", "23": "constraint"}
_ROW_CODES = {"54000": "too_large"}  # program limit exceeded (an index row over its size limit)

_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.exceptions.InterfaceError,
    # a connection left mid-operation ("cannot switch to state ..."): a fresh one will do
    asyncpg.exceptions.InternalClientError,
)
#: Raised by the client while encoding a row (asyncpg's own DataError is a ValueError), before
#: the server saw anything: about the row.
_ENCODE_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, ArithmeticError)


def classify(exc: BaseException) -> ErrorClass:
    """Keep or reject, for any exception a write can raise."""
    if isinstance(exc, asyncpg.PostgresError):
        return classify_sqlstate(getattr(exc, "sqlstate", None))
    if isinstance(exc, _ENCODE_ERRORS):  # before the connection errors: asyncpg's DataError is both
        return ErrorClass("encode", keep=False)
    if isinstance(exc, _CONNECTION_ERRORS):
        return ErrorClass("connection", keep=True)
    return ErrorClass("other", keep=True)


def classify_sqlstate(sqlstate: str | None) -> ErrorClass:
    """Keep or reject, for a SQLSTATE (None or unknown: keep)."""
    code = (sqlstate or "").upper()
    if code in _KEEP_CODES:
        return ErrorClass(_KEEP_CODES[code], keep=True, sqlstate=code)
    if code in _ROW_CODES:
        return ErrorClass(_ROW_CODES[code], keep=False, sqlstate=code)
    prefix = code[:2]
    if prefix in _ROW_CLASSES:
        return ErrorClass(_ROW_CLASSES[prefix], keep=False, sqlstate=code)
    return ErrorClass(_KEEP_CLASSES.get(prefix, "other"), keep=True, sqlstate=code or None)


def is_row_error(exc: BaseException) -> bool:
    """Whether ``exc`` is about a row (bisect and reject it), not about the database."""
    return not classify(exc).keep
