"""FEC counters per port (table ``port_fec``): its rows, and their writer.

The collectors write through one batched writer per table (collector/pipeline.py), with rows from
:func:`fec_rows`; :func:`write_fec` appends directly (tests, benchmarks, the simulator's feed).

Counters are cumulative, as the device reports them, unsigned 64-bit stored in a bigint
(:func:`store.records.to_int8`); ``bins`` are the codewords by symbol errors S0..S15 where the
device has a histogram (SONiC, Cumulus), else None.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import asyncpg

from store.records import to_int8, to_int8s

COLUMNS = (
    "time",
    "switch",
    "port",
    "corrected",
    "uncorrectable",
    "symbol_errors",
    "pre_fec_ber",
    "post_fec_ber",
    "bins",
)


class FecSample(NamedTuple):
    """One port's FEC state at one instant (counters as unsigned values; None: not reported)."""

    time: datetime
    switch: str
    port: str
    corrected: int | None = None
    uncorrectable: int | None = None
    symbol_errors: int | None = None
    pre_fec_ber: float | None = None
    post_fec_ber: float | None = None
    bins: tuple[int, ...] | None = None


def _int8(v: int | None) -> int | None:
    return None if v is None else to_int8(v)


def fec_rows(samples: Sequence[FecSample]) -> list[tuple[Any, ...]]:
    """The table's rows (in :data:`COLUMNS` order) of ``samples``: what the collectors' batched
    writer for ``port_fec`` (collector/pipeline.py) copies, and :func:`write_fec` too."""
    return [
        (
            s.time, s.switch, s.port, _int8(s.corrected), _int8(s.uncorrectable), _int8(s.symbol_errors),
            s.pre_fec_ber, s.post_fec_ber, None if s.bins is None else to_int8s(s.bins),
        )
        for s in samples
    ]  # fmt: skip


async def write_fec(conn: asyncpg.Connection, samples: Sequence[FecSample]) -> int:
    """Append ``samples``; return the rows written."""
    rows = fec_rows(samples)
    if rows:
        await conn.copy_records_to_table("port_fec", records=rows, columns=COLUMNS)
    return len(rows)
