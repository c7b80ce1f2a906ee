"""The multi-column GETBULK table walker: pure logic, no sockets.

A walk asks for several columns (of one table or of tables sharing an index) in every GETBULK
and follows each column on its own: RFC 3416 §4.2.3 answers ``max-repetitions`` rows of
``N`` varbinds, row-major, but agents truncate responses (a byte or varbind budget) anywhere,
so the k-th varbind belongs to column ``k mod N`` and each column resumes from its *own* last
OID. A column ends when the agent moves past it (an OID outside the column, or
endOfMibView); a column that ends early leaves the others walking, in smaller requests.

Guards against broken agents: a column that repeats an index (a loop or a non-increasing
OID) or grows past ``max_rows`` ends and is counted invalid; an empty response ends the walk.

The codecs (``collector/snmp_pysnmp.py``, ``collector/snmp_gufo.py``) give varbinds as
``(dotted OID, value)`` with values already plain Python (:data:`Value`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Final


class EndOfMibView:
    """The endOfMibView exception value (RFC 3416): nothing follows this OID."""

    _instance: EndOfMibView | None = None

    def __new__(cls) -> EndOfMibView:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "endOfMibView"


END_OF_MIB_VIEW: Final = EndOfMibView()

#: A decoded SNMP value: INTEGER/Counter/Gauge/TimeTicks → int, OCTET STRING/IpAddress/Opaque →
#: bytes (gufo gives IpAddress as str), OBJECT IDENTIFIER → str, Opaque float → float.
Value = int | bytes | str | float
VarBind = tuple[str, Value | EndOfMibView]
#: Sends one GETBULK (non-repeaters 0) for these OIDs and returns the response's varbinds.
BulkRequest = Callable[[Sequence[str], int], Awaitable[Sequence[VarBind]]]

#: No real table has more rows than this per column (ifTable of a chassis: a few thousand).
MAX_ROWS = 200_000


@dataclass(slots=True)
class Walked:
    """What a walk returned: per column, index suffix (``"17"``, ``"17.3"``) → value."""

    columns: tuple[str, ...]
    rows: list[dict[str, Value]]
    #: Index → Unix ns at which the response carrying the first column's value arrived.
    times: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    varbinds: int = 0
    #: Varbinds or responses that broke the rules (loops, runaway columns, empty responses).
    invalid: int = 0

    @classmethod
    def empty(cls, columns: Sequence[str]) -> Walked:
        """A walk result with no rows yet."""
        return cls(tuple(columns), [{} for _ in columns])


class ColumnWalk:
    """The state of one multi-column walk: what to ask next, and what each answer means."""

    def __init__(self, columns: Sequence[str], *, max_rows: int = MAX_ROWS, max_columns: int = 1000) -> None:
        self.result = Walked.empty(columns)
        self._prefixes = [c + "." for c in columns]
        self._next = list(columns)  # the OID each column resumes from
        self._active = list(range(len(columns)))
        self._sent: list[int] = []
        self._max_rows = max_rows
        #: Columns per request; lowered when an agent answers fewer varbinds than columns asked.
        self.max_columns = max(1, max_columns)

    @property
    def done(self) -> bool:
        """True once every column has ended."""
        return not self._active

    @property
    def active(self) -> list[int]:
        """Positions (in ``columns``) of the columns still walking."""
        return list(self._active)

    def request(self) -> list[str]:
        """The OIDs of the next GETBULK: each still-walking column's last OID (capped in number)."""
        self._sent = self._active[: self.max_columns]
        return [self._next[i] for i in self._sent]

    def feed(self, varbinds: Sequence[VarBind], t_ns: int) -> None:
        """Take the response to the last :meth:`request`."""
        sent = self._sent
        n = len(sent)
        result = self.result
        result.requests += 1
        result.varbinds += len(varbinds)
        if n == 0:
            return
        if not varbinds:  # RFC 3416 forbids it; an agent that does it would loop us forever
            result.invalid += 1
            self._end(sent)
            return
        if len(varbinds) < n:  # truncated below one row: ask fewer columns so each makes progress
            self.max_columns = len(varbinds)
        ended: set[int] = set()
        for k, (oid, value) in enumerate(varbinds):
            col = sent[k % n]
            if col in ended:
                continue
            prefix = self._prefixes[col]
            if isinstance(value, EndOfMibView) or not oid.startswith(prefix):
                ended.add(col)
                continue
            index = oid[len(prefix) :]
            rows = result.rows[col]
            if index in rows or len(rows) >= self._max_rows:
                result.invalid += 1
                ended.add(col)
                continue
            rows[index] = value
            self._next[col] = oid
            if col == 0:
                result.times[index] = t_ns
        if ended:
            self._end(ended)

    def _end(self, cols: Sequence[int] | set[int]) -> None:
        gone = set(cols)
        self._active = [c for c in self._active if c not in gone]


def repetitions(row_bytes: int, budget_bytes: int, rows_hint: int | None = None, cap: int = 500) -> int:
    """GETBULK max-repetitions so one response of ``row_bytes`` per row fits ``budget_bytes``.

    With ``rows_hint`` (the rows expected, e.g. ifNumber) the requests are evened out, so a
    129-row table takes two requests of 65 rather than one of 100 and one of 29, and the last
    request overshoots by one row (the one that tells us the column ended), not by dozens.
    """
    per = max(1, min(cap, budget_bytes // max(1, row_bytes)))
    if rows_hint:
        need = rows_hint + 1
        per = math.ceil(need / math.ceil(need / per))
    return per


async def walk_columns(
    bulk: BulkRequest,
    columns: Sequence[str],
    row_bytes: Sequence[int],
    *,
    budget_bytes: int,
    rows_hint: int | None = None,
    max_columns: int = 1000,
    clock: Callable[[], int] = time.time_ns,
) -> Walked:
    """Walk ``columns`` together with GETBULK until each has ended.

    ``row_bytes[i]`` bounds one varbind of column ``i``; every request sizes max-repetitions
    from the columns still walking. When an agent truncates a response below what was asked,
    later requests ask no more rows than it answered, so the walk stops re-asking for data
    the agent drops.
    """
    walk = ColumnWalk(columns, max_columns=max_columns)
    reps_cap = 500
    while not walk.done:
        oids = walk.request()
        sent = walk._sent
        remaining = None if rows_hint is None else max(1, rows_hint - len(walk.result.rows[sent[0]]))
        reps = min(reps_cap, repetitions(sum(row_bytes[i] for i in sent), budget_bytes, remaining))
        varbinds = await bulk(oids, reps)
        walk.feed(varbinds, clock())
        if 0 < len(varbinds) < len(oids) * reps and not _moved_past(varbinds, columns, sent):
            reps_cap = max(1, len(varbinds) // len(oids))
    return walk.result


def _moved_past(varbinds: Sequence[VarBind], columns: Sequence[str], sent: Sequence[int]) -> bool:
    # A short response whose last varbind already left its column is the table's end, not a cap.
    oid, value = varbinds[-1]
    col = columns[sent[(len(varbinds) - 1) % len(sent)]]
    return value is END_OF_MIB_VIEW or not oid.startswith(col + ".")
