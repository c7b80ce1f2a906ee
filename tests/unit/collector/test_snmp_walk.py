"""The multi-column GETBULK walker against an in-memory agent that truncates, loops and ends."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

import pytest

from collector.snmp_walk import (
    END_OF_MIB_VIEW,
    ColumnWalk,
    Value,
    VarBind,
    repetitions,
    walk_columns,
)

Oid = tuple[int, ...]
A, B, C = "1.3.6.1.2.1.31.1.1.1.6", "1.3.6.1.2.1.31.1.1.1.10", "1.3.6.1.2.1.2.2.1.8"


def _t(oid: str) -> Oid:
    return tuple(int(x) for x in oid.split("."))


def _s(oid: Oid) -> str:
    return ".".join(map(str, oid))


class FakeAgent:
    """RFC 3416 GETBULK over a dict, optionally truncating every response at ``max_varbinds``."""

    def __init__(self, mib: dict[Oid, Value], max_varbinds: int | None = None) -> None:
        self.mib = mib
        self.keys = sorted(mib)
        self.max_varbinds = max_varbinds
        self.calls: list[tuple[list[str], int]] = []

    async def bulk(self, oids: Sequence[str], reps: int) -> list[VarBind]:
        self.calls.append((list(oids), reps))
        cursors = [_t(o) for o in oids]
        out: list[VarBind] = []
        for _ in range(reps):
            for j, cur in enumerate(cursors):
                k = bisect_right(self.keys, cur)
                if k == len(self.keys):
                    out.append((_s(cur), END_OF_MIB_VIEW))
                else:
                    cursors[j] = self.keys[k]
                    out.append((_s(self.keys[k]), self.mib[self.keys[k]]))
                if self.max_varbinds is not None and len(out) >= self.max_varbinds:
                    return out
        return out


def _table(column: str, rows: Sequence[int], base: int) -> dict[Oid, Value]:
    return {(*_t(column), i): base + i for i in rows}


def _mib(a_rows: int = 40, b_rows: int = 40, c_rows: int = 40) -> dict[Oid, Value]:
    mib: dict[Oid, Value] = {}
    mib.update(_table(A, range(1, a_rows + 1), 1000))
    mib.update(_table(B, range(1, b_rows + 1), 2000))
    mib.update(_table(C, range(1, c_rows + 1), 3000))
    mib[(1, 3, 6, 1, 2, 1, 1, 3, 0)] = 99  # something before, to walk past
    return mib


async def _walk(agent: FakeAgent, columns: Sequence[str], budget: int = 10_000, hint: int | None = None):
    return await walk_columns(agent.bulk, columns, [30] * len(columns), budget_bytes=budget, rows_hint=hint)


async def test_walks_several_columns_to_their_ends() -> None:
    agent = FakeAgent(_mib())
    got = await _walk(agent, [A, B, C])
    assert got.rows[0] == {str(i): 1000 + i for i in range(1, 41)}
    assert got.rows[1] == {str(i): 2000 + i for i in range(1, 41)}
    assert got.rows[2] == {str(i): 3000 + i for i in range(1, 41)}
    assert got.invalid == 0
    assert set(got.times) == {str(i) for i in range(1, 41)}
    assert all(len(oids) == 3 for oids, _ in agent.calls)  # every column rode in every request


async def test_a_column_that_ends_early_does_not_end_the_others() -> None:
    agent = FakeAgent(_mib(a_rows=40, b_rows=3, c_rows=40))
    got = await _walk(agent, [A, B, C], budget=30 * 3 * 5)  # 5 rows per request
    assert len(got.rows[0]) == 40 and len(got.rows[1]) == 3 and len(got.rows[2]) == 40
    # once B ended, later requests carry only A and C, each from its own last OID
    later = [oids for oids, _ in agent.calls[2:]]
    assert later and all(len(o) == 2 and o[0].startswith(A + ".") and o[1].startswith(C + ".") for o in later)


async def test_truncated_responses_resume_each_column_from_its_own_last_oid() -> None:
    agent = FakeAgent(_mib(), max_varbinds=7)  # 2 full rows of 3, and one more varbind of column A
    got = await _walk(agent, [A, B, C])
    assert [len(r) for r in got.rows] == [40, 40, 40]
    assert got.rows[1] == {str(i): 2000 + i for i in range(1, 41)}
    # the walker learnt the cap: after the first answer it asks for 2 rows, not dozens
    assert all(reps <= 2 for _, reps in agent.calls[1:])


async def test_responses_shorter_than_one_row_still_progress() -> None:
    agent = FakeAgent(_mib(), max_varbinds=2)  # fewer varbinds than columns asked
    got = await _walk(agent, [A, B, C])
    assert [len(r) for r in got.rows] == [40, 40, 40]
    assert max(len(oids) for oids, _ in agent.calls[1:]) <= 2


async def test_end_of_mib_view_ends_the_walk() -> None:
    mib = _table(C, range(1, 6), 0)  # C is the last object: endOfMibView follows
    got = await _walk(FakeAgent(mib), [C])
    assert got.rows[0] == {str(i): i for i in range(1, 6)}


async def test_an_absent_column_is_empty_and_the_rest_walk_on() -> None:
    mib = {k: v for k, v in _mib().items() if k[: len(_t(B))] != _t(B)}
    got = await _walk(FakeAgent(mib), [A, B, C])
    assert len(got.rows[0]) == 40 and got.rows[1] == {} and len(got.rows[2]) == 40


async def test_a_looping_agent_is_cut_off_and_counted() -> None:
    calls = 0

    async def looping(oids: Sequence[str], reps: int) -> list[VarBind]:
        nonlocal calls
        calls += 1
        return [(f"{A}.1", 5)] * reps  # the same OID forever

    got = await walk_columns(looping, [A], [30], budget_bytes=1000)
    assert got.rows[0] == {"1": 5}
    assert got.invalid == 1 and calls == 1


async def test_an_empty_response_ends_the_walk_as_invalid() -> None:
    async def empty(oids: Sequence[str], reps: int) -> list[VarBind]:
        return []

    got = await walk_columns(empty, [A, B], [30, 30], budget_bytes=1000)
    assert got.rows == [{}, {}] and got.invalid == 1


def test_feed_assigns_varbinds_round_robin_and_skips_after_a_column_ends() -> None:
    walk = ColumnWalk([A, B])
    assert walk.request() == [A, B]
    walk.feed([(f"{A}.1", 1), (f"{B}.1", 2), (f"{A}.2", 3), (f"{C}.1", 4), (f"{A}.3", 5), (f"{C}.2", 6)], 7)
    assert walk.result.rows == [{"1": 1, "2": 3, "3": 5}, {"1": 2}]
    assert walk.active == [0]
    assert walk.request() == [f"{A}.3"]


def test_multi_arc_indexes_are_kept_whole() -> None:
    walk = ColumnWalk(["1.3.6.1.4.1.9.9.813.1.2.1.2"])
    walk.request()
    walk.feed([("1.3.6.1.4.1.9.9.813.1.2.1.2.17.3", 9)], 1)
    assert walk.result.rows[0] == {"17.3": 9}


@pytest.mark.parametrize(
    ("row_bytes", "budget", "hint", "expected"),
    [
        (30, 3000, None, 100),  # budget-bound
        (30, 3000, 128, 65),  # 129 rows in two even requests, not 100 + 29
        (30, 3000, 16, 17),  # one request, one row past the end
        (5000, 3000, None, 1),  # never below one
        (1, 10**9, None, 500),  # capped
    ],
)
def test_repetitions(row_bytes: int, budget: int, hint: int | None, expected: int) -> None:
    assert repetitions(row_bytes, budget, hint) == expected
