"""Every SQLSTATE class and client error maps to keep-the-batch or reject-the-row."""

from __future__ import annotations

import asyncpg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.sqlstate import classify, classify_sqlstate, is_row_error

E = asyncpg.exceptions


@pytest.mark.parametrize(
    ("sqlstate", "name", "keep"),
    [
        ("08006", "connection", True),  # connection failure
        ("08P01", "connection", True),  # protocol violation
        ("57P01", "operator", True),  # admin shutdown
        ("57P03", "operator", True),  # cannot connect now (starting up, recovering)
        ("57014", "operator", True),  # query canceled (statement timeout)
        ("25006", "read_only", True),  # read-only SQL transaction: a failover to a replica
        ("25P02", "read_only", True),  # in failed SQL transaction
        ("53100", "resources", True),  # disk full
        ("53200", "resources", True),  # out of memory
        ("53300", "resources", True),  # too many connections
        ("40001", "rollback", True),  # serialization failure
        ("40P01", "rollback", True),  # deadlock detected
        ("42P01", "undefined", True),  # undefined table: a re-initialised database
        ("42703", "undefined", True),  # undefined column: a migration not applied yet
        ("3D000", "undefined", True),  # the database does not exist (yet)
        ("42501", "privilege", True),  # insufficient privilege
        ("58030", "server", True),  # I/O error
        ("XX001", "server", True),  # data corrupted
        ("0A000", "other", True),  # feature not supported: not about a row, keep
        ("P0001", "other", True),  # a trigger's RAISE EXCEPTION without a code
        ("22003", "data", False),  # numeric value out of range
        ("22021", "data", False),  # character not in repertoire (a NUL in text)
        ("22P02", "data", False),  # invalid text representation
        ("23502", "constraint", False),  # not-null violation
        ("23505", "constraint", False),  # unique violation (the writer's conflict path)
        ("23514", "constraint", False),  # check violation
        ("54000", "too_large", False),  # an index row over its size limit
        ("54001", "other", True),  # statement too complex: not a row's fault
    ],
)
def test_each_class_keeps_or_rejects(sqlstate: str, name: str, keep: bool) -> None:
    got = classify_sqlstate(sqlstate)
    assert (got.name, got.keep, got.sqlstate) == (name, keep, sqlstate)


@pytest.mark.parametrize(
    ("exc", "name", "keep"),
    [
        (E.ReadOnlySQLTransactionError("read-only"), "read_only", True),
        (E.DiskFullError("no space"), "resources", True),
        (E.OutOfMemoryError("oom"), "resources", True),
        (E.DeadlockDetectedError("deadlock"), "rollback", True),
        (E.SerializationError("serialization"), "rollback", True),
        (E.UndefinedTableError("no table"), "undefined", True),
        (E.AdminShutdownError("shutdown"), "operator", True),
        (E.CheckViolationError("check"), "constraint", False),
        (E.NumericValueOutOfRangeError("range"), "data", False),
        (ConnectionRefusedError(111, "refused"), "connection", True),
        (TimeoutError(), "connection", True),
        (E.ConnectionDoesNotExistError("gone"), "connection", True),
        (asyncpg.InterfaceError("another operation is in progress"), "connection", True),
        (E.InternalClientError("cannot switch to state 12"), "connection", True),
        (asyncpg.exceptions._base.DataError("invalid input for query argument"), "encode", False),
        (ValueError("bad value"), "encode", False),
        (TypeError("an int is required"), "encode", False),
        (OverflowError("too big"), "encode", False),
        (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), "encode", False),
        (RuntimeError("a bug"), "other", True),
    ],
)
def test_exceptions_are_classified_by_what_they_say(exc: BaseException, name: str, keep: bool) -> None:
    got = classify(exc)
    assert (got.name, got.keep) == (name, keep)
    assert is_row_error(exc) is (not keep)


@given(st.text(alphabet="0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=0, max_size=5))
def test_only_data_and_constraint_classes_reject_a_row(code: str) -> None:
    got = classify_sqlstate(code)
    assert got.keep is not (code[:2] in {"22", "23"} or code == "54000")
