"""What every check receives: the fabric, the thresholds, the clock and the evaluation window.

A check is ``async def check(conn: Connection, ctx: CheckContext) -> list[Finding]``: it reads
what it needs with one or two SQL queries over the latest window (``time_bucket``,
``DISTINCT ON``), computes in Python over compact per-port values, and returns findings with
their blast radius (``analyzer.findings.blast_radius``). Checks never write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from analyzer.config import ThresholdsConfig
from analyzer.findings import Finding
from fabric.model import Fabric
from store.db import Connection


@dataclass(frozen=True, slots=True)
class CheckContext:
    """One evaluation's inputs."""

    fabric: Fabric
    thresholds: ThresholdsConfig
    now: datetime
    #: The collectors' sampling interval (the slower of gNMI and SNMP): freshness and windows use it.
    collect_interval_s: float
    #: How far back "the latest window" reaches for rates (a few sampling intervals).
    window_s: float
    #: Results shared between checks of one evaluation (e.g. the port snapshot), keyed by name.
    memo: dict[str, Any] = field(default_factory=dict)

    @property
    def since(self) -> datetime:
        """Start of the latest window."""
        return self.now - timedelta(seconds=self.window_s)


Check = Callable[[Connection, CheckContext], Awaitable[list[Finding]]]
