"""Transceiver digital optical monitoring per port (table ``transceiver_dom``): its rows, and their writer.

The collectors write through one batched writer per table (collector/pipeline.py; a
:class:`DomSample` is a row in :data:`COLUMNS` order); :func:`write_dom` appends directly.

``port`` is the interface the device maps the transceiver ``component`` to (never a name
guessed from the other); thresholds are the module's own, None when it reports none.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

import asyncpg

COLUMNS = (
    "time", "switch", "port", "component", "rx_power_dbm", "tx_power_dbm", "laser_bias_ma", "temperature_c",
    "rx_low_warning_dbm", "rx_low_critical_dbm", "bias_high_warning_ma", "bias_high_critical_ma",
)  # fmt: skip


class DomSample(NamedTuple):
    """One transceiver's DOM at one instant, in table column order."""

    time: datetime
    switch: str
    port: str
    component: str
    rx_power_dbm: float | None = None
    tx_power_dbm: float | None = None
    laser_bias_ma: float | None = None
    temperature_c: float | None = None
    rx_low_warning_dbm: float | None = None
    rx_low_critical_dbm: float | None = None
    bias_high_warning_ma: float | None = None
    bias_high_critical_ma: float | None = None


async def write_dom(conn: asyncpg.Connection, samples: Sequence[DomSample]) -> int:
    """Append ``samples``; return the rows written."""
    if samples:
        await conn.copy_records_to_table("transceiver_dom", records=list(samples), columns=COLUMNS)
    return len(samples)
