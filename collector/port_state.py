"""A port's state in counter hygiene (:mod:`collector.counters`), and the tracker's counts for /metrics.

Per port: each counter's baseline (value and device time), the reset evidence (boot and clear
instants), the last known status and speed, and the runs of status readings that
:mod:`collector.link_flaps` places late readings among. Kept small: 82K ports keep one each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from collector.records import COUNTER_FIELDS

#: The PFC groups of a reading, kept as baselines after the counters.
PFC_KEYS = ("pfc_rx", "pfc_tx", "pfc_rx_total", "pfc_tx_total")
#: The baselines' slots: the 16 counters, then the PFC groups.
SLOTS = (*COUNTER_FIELDS, *PFC_KEYS)
#: The first PFC slot; the four groups follow in :data:`PFC_KEYS` order.
PFC0 = len(COUNTER_FIELDS)


@dataclass(slots=True)
class PortState:
    """One port's baselines and status (see the module docstring)."""

    #: The newest reading of any kind (reset evidence is only taken from newer readings).
    newest_ns: int
    #: Per slot of :data:`SLOTS`: the baseline value (None: none yet) and its device time. Two
    #: short lists, not a dict of tuples: 82K ports keep them (~0.4 KB a port instead of ~1.6 KB).
    vals: list[Any] = field(default_factory=lambda: [None] * len(SLOTS))
    times: list[int] = field(default_factory=lambda: [0] * len(SLOTS))
    boot_ns: int | None = None
    last_clear_ns: int | None = None
    oper_up: bool | None = None
    speed_bps: int | None = None
    down_since_ns: int | None = None
    #: Runs of equal status readings, [first time, last time, up], oldest first.
    status: list[list[Any]] = field(default_factory=list)
    #: The state of the newest run trimmed off ``status`` (what held before the oldest kept run).
    trimmed_up: bool | None = None
    #: The oldest status reading ever seen: before it no status is known, even once the runs that
    #: began there were trimmed off.
    first_status_ns: int | None = None
    #: When the newest run's state was entered as far as the readings in order tell (the reading
    #: whose transition is on record, or the first status reading): a late reading of the same
    #: state can move the run's start earlier, never this.
    entered_ns: int = 0
    #: The newest time a sample (a reading with counters, stamped when it was read) told the newest
    #: run's state (older than the run's start when none did).
    sampled_ns: int = 0
    #: Times of status transitions not yet set against a carrier-transitions interval.
    transitions: list[int] = field(default_factory=list)
    #: Transitions carrier-transitions counted (as hidden flaps) up to ``credit_until_ns`` that
    #: status readings arriving later must not count again.
    credit: int = 0
    credit_until_ns: int = 0
    #: The port's last change (SNMP ifLastChange, Unix ns) and the boot epoch it was read on, as of
    #: the newest status reading that carried one (collector/link_flaps.py last_change).
    last_change_ns: int | None = None
    last_change_boot_ns: int | None = None
    #: A late status reading inside the newest run, (time, up): an excursion, or the start of a
    #: change; the next status reading in order decides.
    pending: tuple[int, bool] | None = None
    #: Whether the last PFC reading's pause counters moved, and when PFC rows were last written.
    pfc_moving: bool = False
    pfc_written_ns: int | None = None


@dataclass(slots=True)
class TrackerStats:
    """For /metrics."""

    readings: int = 0
    #: Counter values the readings carried.
    counter_values: int = 0
    resets: int = 0
    absurd_rates: int = 0
    #: Readings whose counters were all as old as their baselines (replays, lagging streams).
    out_of_order: int = 0
    #: PFC samples not stored because no pause counter moved (see the module docstring).
    pfc_unchanged: int = 0
    #: Counters read at an earlier time than their baseline but further on: the switch's clock
    #: stepped back (a new baseline, no rate).
    clock_steps: int = 0
    #: Readings that carried no counters and changed nothing: no row (status heartbeats).
    state_only: int = 0
    #: Flaps found from a late status reading, and status transitions carrier-transitions had counted.
    late_flaps: int = 0
    recounted_transitions: int = 0
