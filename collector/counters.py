"""Counter hygiene: raw readings in, per-interval rates and link events out.

The collector is the only place that knows about resets, so rates are computed here once and
stored beside the raw counters. Rules:

- A reading's rates cover the interval since the previous reading of the same port.
- A counter that went down is a reset (reboot, clear), never a negative rate; so is any change of
  ``boot_ns`` (SNMP sysUpTime went back) or ``last_clear_ns`` (gNMI ``last-clear``). A reset
  sample keeps its raw counters but carries no rates, and is flagged ``counter_reset``.
- 32-bit source counters (``PortReading.wrap32``) wrap mod 2^32 instead.
- A rate above what the port can physically carry (150 % of line rate, or of 800G when the
  speed is unknown) is absurd: dropped (None), never stored as data.
- A reading older than or as old as the previous one (a replay after reconnect) gets no rates
  and does not move the baseline; the store keeps one row per (switch, port, time).
- Oper-status transitions become link events; an up transition carries the outage length.
  ``carrier-transitions`` that rose more than the observed transitions explain are flaps the
  sampling missed: one event with ``new_status = 'flap'`` and their count.
- PFC rows are stored on change, as gNMI's ``suppress_redundant`` with a ``heartbeat_interval``
  does on the wire: a port's per-priority rows are written for a sample in which any of its
  pause counters moved, for the sample right after (so the end of pausing is on record), on its
  first sample and on a reset, and at least every ``pfc_heartbeat_s`` (so a reader can tell a
  quiet port from a silent one; each port's heartbeat has a phase of its own, so they do not
  burst). Between rows, a port's pause counters stood still: zero pauses. A healthy 16K-GPU
  fabric otherwise writes eight all-zero rows per port per interval, eight times its interface
  rows (docs/decisions.md). ``pfc_heartbeat_s = 0`` writes every sample.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime

from collector.records import PFC_TOTAL_WRAP32, PortReading
from store.records import LinkEvent, PfcSample, PortSample, to_int8

WRAP32 = 1 << 32
U64 = 1 << 64
MAX_SPEED_BPS = 800 * 10**9
ABSURD_FACTOR = 1.5
MIN_FRAME_BITS = 84 * 8  # 64-byte frame + preamble + inter-frame gap
PFC_PRIORITIES = 8
#: Default for ``collector.pfc_heartbeat_s``: the longest a quiet port goes without PFC rows.
PFC_HEARTBEAT_S = 300.0

_OCTETS = ("in_octets", "out_octets")
_PKTS_IN = ("in_unicast_pkts", "in_multicast_pkts", "in_broadcast_pkts")
_PKTS_OUT = ("out_unicast_pkts", "out_multicast_pkts", "out_broadcast_pkts")
_PER_SECOND = ("in_errors", "out_errors", "in_discards", "out_discards", "in_fcs_errors")
_STORED = (
    "in_octets", "out_octets", "in_unicast_pkts", "out_unicast_pkts", "in_multicast_pkts", "out_multicast_pkts",
    "in_broadcast_pkts", "out_broadcast_pkts", "in_errors", "out_errors", "in_discards", "out_discards",
    "in_fcs_errors", "carrier_transitions", "in_pause_frames", "out_pause_frames",
)  # fmt: skip


@dataclass(slots=True)
class _PortState:
    time_ns: int
    values: dict[str, int] = field(default_factory=dict)
    pfc_rx: tuple[int, ...] | None = None
    pfc_tx: tuple[int, ...] | None = None
    pfc_rx_total: int | None = None
    pfc_tx_total: int | None = None
    boot_ns: int | None = None
    last_clear_ns: int | None = None
    oper_up: bool | None = None
    speed_bps: int | None = None
    down_since_ns: int | None = None
    #: Whether the last sample's pause counters moved, and when PFC rows were last written.
    pfc_moving: bool = False
    pfc_written_ns: int | None = None


@dataclass(slots=True)
class Ingested:
    """What one reading becomes."""

    port: PortSample
    pfc: list[PfcSample]
    events: list[LinkEvent]


@dataclass(slots=True)
class TrackerStats:
    """For /metrics."""

    readings: int = 0
    resets: int = 0
    absurd_rates: int = 0
    out_of_order: int = 0
    #: PFC samples not stored because no pause counter moved (see the module docstring).
    pfc_unchanged: int = 0


def _utc(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def _moved(before: int | None, after: int | None, tolerance_ns: int = 2_000_000_000) -> bool:
    return before is not None and after is not None and abs(after - before) > tolerance_ns


def _pfc_moved(prev: _PortState, r: PortReading) -> bool:
    """Whether any pause counter this reading carries differs from the previous one."""
    return (
        (r.pfc_rx is not None and r.pfc_rx != prev.pfc_rx)
        or (r.pfc_tx is not None and r.pfc_tx != prev.pfc_tx)
        or (r.pfc_rx_total is not None and r.pfc_rx_total != prev.pfc_rx_total)
        or (r.pfc_tx_total is not None and r.pfc_tx_total != prev.pfc_tx_total)
    )


def _status(up: bool | None) -> str:
    return "unknown" if up is None else "up" if up else "down"


class CounterTracker:
    """Keeps the previous reading of every port and derives rates and events from the next."""

    def __init__(self, pfc_heartbeat_s: float = PFC_HEARTBEAT_S) -> None:
        self._ports: dict[tuple[str, str], _PortState] = {}
        self.stats = TrackerStats()
        self._pfc_heartbeat_ns = int(pfc_heartbeat_s * 1e9)

    def forget(self, switch: str) -> None:
        """Drop a switch's baselines (e.g. it was removed from the inventory)."""
        for key in [k for k in self._ports if k[0] == switch]:
            del self._ports[key]

    def ingest(self, r: PortReading) -> Ingested:
        """Rates, resets and link events for one reading."""
        self.stats.readings += 1
        key = (r.switch, r.port)
        prev = self._ports.get(key)
        now = _utc(r.time_ns)
        if prev is not None and r.time_ns <= prev.time_ns:
            self.stats.out_of_order += 1
            return Ingested(self._sample(r, now, None, {}, reset=False), self._pfc(r, now, None, 0.0, False), [])
        state = prev or _PortState(time_ns=r.time_ns)
        oper = r.oper_up if r.oper_up is not None else state.oper_up
        speed = r.speed_bps if r.speed_bps is not None else state.speed_bps
        dt = (r.time_ns - prev.time_ns) / 1e9 if prev is not None else 0.0
        reset = prev is not None and self._reset_evidence(prev, r)
        deltas: dict[str, int] = {}
        if prev is not None and not reset:
            deltas, decreased = self._deltas(prev.values, r)
            reset = decreased
        if reset:
            self.stats.resets += 1
            deltas = {}
        rates = self._rates(deltas, dt, speed) if deltas and dt > 0 else None
        sample = self._sample(
            r, now, rates, deltas, reset=reset, interval_s=dt if prev is not None else None, oper=oper, speed=speed
        )
        moving = prev is not None and _pfc_moved(prev, r)
        if self._pfc_due(prev, r, reset, moving):
            pfc = self._pfc(r, now, prev if not reset else None, dt, reset)
            # A port's first heartbeat comes at a phase of its own, so that a fabric whose
            # collector started at once does not write every quiet port's rows in one burst.
            state.pfc_written_ns = r.time_ns - (self._phase_ns(key) if prev is None else 0)
        else:
            pfc = []
            self.stats.pfc_unchanged += 1
        state.pfc_moving = moving
        events = self._events(state, r, oper, now, deltas.get("carrier_transitions"))
        self._remember(state, r, oper, speed)
        self._ports[key] = state
        return Ingested(sample, pfc, events)

    # --- pieces -------------------------------------------------------------------------

    def _phase_ns(self, key: tuple[str, str]) -> int:
        hb = self._pfc_heartbeat_ns
        return zlib.crc32(f"{key[0]}\0{key[1]}".encode()) * hb >> 32  # spread over [0, hb)

    def _pfc_due(self, prev: _PortState | None, r: PortReading, reset: bool, moving: bool) -> bool:
        if prev is None or reset or moving or prev.pfc_moving or prev.pfc_written_ns is None:
            return True
        return r.time_ns - prev.pfc_written_ns >= self._pfc_heartbeat_ns

    @staticmethod
    def _reset_evidence(prev: _PortState, r: PortReading) -> bool:
        # SNMP derives both instants from sysUpTime, which jitters by the poll's round trip.
        return _moved(prev.boot_ns, r.boot_ns) or _moved(prev.last_clear_ns, r.last_clear_ns)

    @staticmethod
    def _deltas(old: dict[str, int], r: PortReading) -> tuple[dict[str, int], bool]:
        deltas: dict[str, int] = {}
        for name in _STORED:
            new = getattr(r, name)
            before = old.get(name)
            if new is None or before is None:
                continue
            d = new - before
            if d < 0:
                if name not in r.wrap32:
                    return {}, True
                d %= WRAP32
            deltas[name] = d
        return deltas, False

    def _rates(self, d: dict[str, int], dt: float, speed: int | None) -> dict[str, float | None]:
        line = float(speed) if speed else float(MAX_SPEED_BPS)
        max_bps = line * ABSURD_FACTOR
        max_pps = max_bps / MIN_FRAME_BITS
        out: dict[str, float | None] = {}

        def put(name: str, value: float | None, cap: float) -> None:
            if value is not None and value > cap:
                self.stats.absurd_rates += 1
                value = None
            out[name] = value

        put("in_bps", d["in_octets"] * 8 / dt if "in_octets" in d else None, max_bps)
        put("out_bps", d["out_octets"] * 8 / dt if "out_octets" in d else None, max_bps)
        put("in_pps", sum(d[n] for n in _PKTS_IN) / dt if all(n in d for n in _PKTS_IN) else None, max_pps)
        put("out_pps", sum(d[n] for n in _PKTS_OUT) / dt if all(n in d for n in _PKTS_OUT) else None, max_pps)
        for name in _PER_SECOND:
            put(f"{name}_ps", d[name] / dt if name in d else None, max_pps)
        return out

    @staticmethod
    def _sample(
        r: PortReading,
        now: datetime,
        rates: dict[str, float | None] | None,
        deltas: dict[str, int],
        *,
        reset: bool,
        interval_s: float | None = None,
        oper: bool | None = None,
        speed: int | None = None,
    ) -> PortSample:
        oper = r.oper_up if oper is None else oper
        speed = r.speed_bps if speed is None else speed
        rt = rates or {}

        def c(name: str) -> int | None:
            v = getattr(r, name)
            return None if v is None else to_int8(v % U64)

        return PortSample(
            now, r.switch, r.port,
            None if oper is None else 1 if oper else 2,
            speed,
            c("in_octets"), c("out_octets"), c("in_unicast_pkts"), c("out_unicast_pkts"),
            c("in_multicast_pkts"), c("out_multicast_pkts"), c("in_broadcast_pkts"), c("out_broadcast_pkts"),
            c("in_errors"), c("out_errors"), c("in_discards"), c("out_discards"), c("in_fcs_errors"),
            c("carrier_transitions"), c("in_pause_frames"), c("out_pause_frames"),
            interval_s if rates is not None else None,
            rt.get("in_bps"), rt.get("out_bps"), rt.get("in_pps"), rt.get("out_pps"),
            rt.get("in_errors_ps"), rt.get("out_errors_ps"), rt.get("in_discards_ps"), rt.get("out_discards_ps"),
            rt.get("in_fcs_errors_ps"),
            reset,
        )  # fmt: skip

    def _pfc(self, r: PortReading, now: datetime, prev: _PortState | None, dt: float, reset: bool) -> list[PfcSample]:
        out: list[PfcSample] = []
        if r.pfc_rx is not None and r.pfc_tx is not None:
            prx = prev.pfc_rx if prev is not None else None
            ptx = prev.pfc_tx if prev is not None else None
            for p in range(min(PFC_PRIORITIES, len(r.pfc_rx), len(r.pfc_tx))):
                out.append(
                    self._pfc_row(
                        r,
                        now,
                        p,
                        r.pfc_rx[p],
                        r.pfc_tx[p],
                        prx[p] if prx else None,
                        ptx[p] if ptx else None,
                        dt,
                        False,
                        reset,
                    )
                )
        if r.pfc_rx_total is not None or r.pfc_tx_total is not None:
            out.append(
                self._pfc_row(
                    r,
                    now,
                    -1,
                    r.pfc_rx_total,
                    r.pfc_tx_total,
                    prev.pfc_rx_total if prev else None,
                    prev.pfc_tx_total if prev else None,
                    dt,
                    PFC_TOTAL_WRAP32 in r.wrap32,
                    reset,
                )
            )
        return out

    @staticmethod
    def _pfc_row(
        r: PortReading,
        now: datetime,
        prio: int,
        rx: int | None,
        tx: int | None,
        prx: int | None,
        ptx: int | None,
        dt: float,
        wrap: bool,
        port_reset: bool,
    ) -> PfcSample:
        def rate(new: int | None, old: int | None) -> float | None:
            if new is None or old is None or dt <= 0:
                return None
            d = new - old
            if d < 0:
                if not wrap:
                    return None
                d %= WRAP32
            return d / dt

        reset = (
            port_reset
            or (rx is not None and prx is not None and rx < prx and not wrap)
            or (tx is not None and ptx is not None and tx < ptx and not wrap)
        )
        rx_rate, tx_rate = (None, None) if reset else (rate(rx, prx), rate(tx, ptx))
        return PfcSample(
            now, r.switch, r.port, prio,
            None if rx is None else to_int8(rx % U64), None if tx is None else to_int8(tx % U64),
            dt if (rx_rate is not None or tx_rate is not None) else None, rx_rate, tx_rate, reset,
        )  # fmt: skip

    @staticmethod
    def _events(
        state: _PortState, r: PortReading, oper: bool | None, now: datetime, carrier_delta: int | None
    ) -> list[LinkEvent]:
        events: list[LinkEvent] = []
        was = state.oper_up
        seen_transitions = 0
        if was is not None and oper is not None and was != oper:
            seen_transitions = 1
            if oper:
                down_s = (r.time_ns - state.down_since_ns) / 1e9 if state.down_since_ns is not None else None
                events.append(LinkEvent(now, r.switch, r.port, "down", "up", down_s))
                state.down_since_ns = None
            else:
                events.append(LinkEvent(now, r.switch, r.port, "up", "down", None))
                state.down_since_ns = r.time_ns
        elif was is None and oper is False:
            state.down_since_ns = r.time_ns
        if carrier_delta is not None and carrier_delta > seen_transitions:
            hidden = (carrier_delta - seen_transitions) // 2
            if hidden > 0:
                events.append(
                    LinkEvent(now, r.switch, r.port, _status(oper), "flap", None, "carrier-transitions", hidden)
                )
        return events

    @staticmethod
    def _remember(state: _PortState, r: PortReading, oper: bool | None, speed: int | None) -> None:
        state.time_ns = r.time_ns
        for name in _STORED:
            v = getattr(r, name)
            if v is not None:
                state.values[name] = v
        if r.pfc_rx is not None:
            state.pfc_rx = r.pfc_rx
        if r.pfc_tx is not None:
            state.pfc_tx = r.pfc_tx
        if r.pfc_rx_total is not None:
            state.pfc_rx_total = r.pfc_rx_total
        if r.pfc_tx_total is not None:
            state.pfc_tx_total = r.pfc_tx_total
        if r.boot_ns is not None:
            state.boot_ns = r.boot_ns
        if r.last_clear_ns is not None:
            state.last_clear_ns = r.last_clear_ns
        state.oper_up = oper
        state.speed_bps = speed
