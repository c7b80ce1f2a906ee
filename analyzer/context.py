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

from analyzer.cadence import Beside, Kept
from analyzer.config import ThresholdsConfig
from analyzer.coverage import Coverage
from analyzer.findings import Finding
from analyzer.round_data import FlapWindow, RailCapacity, Ratio, Snapshot
from fabric.model import Fabric
from store.db import Connection


@dataclass(slots=True)
class RoundResults:
    """What one evaluation's checks computed on the way, shared with each other (the port snapshot,
    the flap window) and with the report and the service (ratios, rail capacities and loads)."""

    #: Every port's latest window (analyzer.snapshot), read once per evaluation.
    ports: Snapshot | None = None
    #: The flap events of the stability window (analyzer.flaps); outages use it too.
    flaps: FlapWindow | None = None
    #: Live down:up ratios per switch and their roll-ups (analyzer.oversubscription).
    ratios: list[Ratio] = field(default_factory=list)
    #: Per rail: its bottleneck's live capacity (analyzer.rails).
    rail_capacity: list[RailCapacity] = field(default_factory=list)
    #: Per rail: its GPUs' traffic, Gbit/s (analyzer.rails).
    rail_load: dict[int, float] = field(default_factory=dict)
    #: Checks that broke this round, as "check: error".
    errors: list[str] = field(default_factory=list)
    #: Seconds each check took.
    check_seconds: dict[str, float] = field(default_factory=dict)


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
    #: What the checks computed on the way (typed: no string keys between modules).
    results: RoundResults = field(default_factory=RoundResults)
    #: The maintenance windows in force or just ended (analyzer.coverage): link events, outages
    #: and error counts inside one, on a place it covers, are not judged. None: no windows.
    maintenance: Coverage | None = None
    #: The checks run at a cadence of their own (analyzer/cadence.py), by check name, with what
    #: they found last: kept across rounds by the service. None: every check runs.
    kept: dict[str, Kept] | None = None
    #: Starts those checks' due fits beside the rounds (the service's analyzer.fits.Fits); None:
    #: they run inline, in the round.
    beside: Beside | None = None

    @property
    def since(self) -> datetime:
        """Start of the latest window."""
        return self.now - timedelta(seconds=self.window_s)


Check = Callable[[Connection, CheckContext], Awaitable[list[Finding]]]
