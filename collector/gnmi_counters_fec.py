"""SONiC's FEC fields taken from the counters' own stream, not subscribed to a second time.

orchagent keeps a port's FEC counters (``SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S0..S15``,
``..._CORRECTABLE_FRAMES``, ``..._NOT_CORRECTABLE_FRAMES``, ``..._SYMBOL_ERRORS``) in the same
``COUNTERS`` hash as its other SAI port stats (sonic-net/SONiC ``doc/port_fec_flr``), and the
counters' stream already subscribes to that whole hash every ``collector.gnmi_interval_s``. A
profile whose ``optics`` say ``fec: counters`` (``sonic``) therefore opens no FEC subscription:

* :class:`CountersFec` is handed each JSON document the counters' decoder parses at
  ``COUNTERS/<port|glob>`` (:class:`collector.gnmi_decode.StreamDecoder`'s ``tap``). It keeps a
  port's FEC fields when at least ``collector.fec_interval_s`` (less half a counters interval, so
  a device's jitter never skips one) has passed since it last kept that port's, or when the
  device's clock went back; each port is timed on its own, so per-port answers with their own
  timestamps, a glob answer split over several notifications and a first document without FEC
  fields lose nothing. It decodes them with :class:`collector.optics_decode.SonicOptics`, as the
  link-health stream would have. Between intervals a document costs one lookup per port.
* :class:`CountersFecStream` is the counters' :class:`collector.gnmi_stream.GnmiStream` that
  also hands those samples to the link-health sink after each flush, under the stream's lock (in
  order). The sink only waits (back-pressure); should it fail, the samples are kept for the next
  flush, at most :data:`MAX_PENDING` (the oldest beyond are dropped, logged and counted in
  ``dropped``), and the counters go on: link health never colours a switch's reachability.

What a switch sends is untrusted here as everywhere: at most :data:`MAX_KEYS` ports are timed,
port names are bounded, values checked and counted as invalid by the same decoder (a port
without FEC fields is not counted); a failure costs that document's FEC, never the counters (the
tap never raises). A sample time further than ``max_skew_s`` from receive time is replaced by
the receive time, as the link-health stream does. Only the exact field names are read (a bin
spelled ``S07`` is read only through a FEC subscription, whose decoder takes any spelling). In
``gnmi_mode: poll`` the same holds: FEC every ``fec_interval_s`` of the polled samples.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from collector.gnmi_optics import MAX_KEYS, OpticsSink, bounded_ns, count_invalid
from collector.gnmi_stream import GnmiStream
from collector.gnmi_values import MAX_TEXT, TOO_LONG, TOO_MANY
from collector.optics_decode import SONIC_FEC_NAMES, Invalid, SonicOptics, sonic_fec_plain
from collector.profiles import Elem
from store.fec import FecSample

log = logging.getLogger(__name__)


#: The most FEC samples kept for a sink that failed (then the oldest are dropped and counted).
MAX_PENDING = 8 * MAX_KEYS


class CountersFec:
    """One switch's FEC samples, cut from the COUNTERS documents its counters' stream receives."""

    def __init__(
        self, switch: str, invalid: Invalid, *, every_s: float, counters_s: float = 0.0, max_skew_s: float = 30.0
    ) -> None:
        """``every_s``: ``collector.fec_interval_s``; ``counters_s``: the counters' interval
        (half of it is the slack for a device's jitter)."""
        self.switch = switch
        self.failures = 0
        self.dropped = 0
        self._invalid = invalid
        self._sonic = SonicOptics(switch, invalid)
        self._gap_ns = max(int((every_s - counters_s / 2) * 1e9), 1)
        self._skew_ns = int(max_skew_s * 1e9)
        self._kept: dict[str, int] = {}  # port -> the sample time its FEC was last kept at
        self._ready: list[FecSample] = []

    def __call__(self, elems: tuple[Elem, ...], doc: Any, ts_ns: int) -> None:
        """Offer one parsed document at ``elems`` of the sample at ``ts_ns``. Never raises."""
        if len(elems) != 2 or elems[0][0] != "COUNTERS" or not isinstance(doc, dict):
            return
        key = elems[1][0]
        last = self._kept.get(key)
        if last is not None and 0 <= ts_ns - last < self._gap_ns and "*" not in key:
            return  # the common case: one port's hash, its FEC kept less than an interval ago
        try:
            self._take(key, doc, ts_ns)
        except Exception:  # a bug here costs this document's FEC, never the counters
            self.failures += 1
            log.debug("gNMI %s: FEC from COUNTERS failed on a document; skipped", self.switch, exc_info=True)

    def take(self) -> list[FecSample]:
        """The samples decoded since the last call."""
        rows, self._ready = self._ready, []
        return rows

    def give_back(self, rows: list[FecSample]) -> None:
        """Samples a sink could not take, kept before the newer ones (at most :data:`MAX_PENDING`)."""
        self._ready[:0] = rows
        over = len(self._ready) - MAX_PENDING
        if over > 0:
            del self._ready[:over]
            self.dropped += over
            log.warning("gNMI %s: %d FEC samples dropped: the link-health writer took none", self.switch, over)

    def _take(self, key: str, doc: dict[str, Any], ts_ns: int) -> None:
        hashes = doc.items() if "*" in key else ((key, doc),)
        kept, gap, ready = self._kept, self._gap_ns, self._ready
        at: datetime | None = None
        too_long = too_many = 0
        for port, fields in hashes:
            last = kept.get(port)
            if last is not None and 0 <= ts_ns - last < gap:
                continue  # the common case: kept less than an interval ago
            if not isinstance(fields, dict):
                continue  # not a hash: the counters' decoder counts it
            if not isinstance(port, str) or not port or len(port) > MAX_TEXT:
                if any(name in fields for name in SONIC_FEC_NAMES):
                    too_long += 1
                continue
            if at is None:
                at = self._at(ts_ns)
            sample = sonic_fec_plain(at, self.switch, port, fields)
            found = {} if sample is not None else {name: fields[name] for name in SONIC_FEC_NAMES if name in fields}
            if sample is None and not found:
                continue  # no FEC here
            if last is None and len(kept) >= MAX_KEYS:
                too_many += 1
                continue
            kept[port] = ts_ns
            if sample is not None:  # every field there, plain: what orchagent writes
                ready.append(sample)
            else:  # a field missing or not plain: the careful way, which counts what is wrong
                ready.extend(self._sonic.decode(at, counters={port: found}).fec)
        if too_long:
            self._count(TOO_LONG, too_long)
        if too_many:
            self._count(TOO_MANY, too_many)

    def _at(self, ts: int) -> datetime:
        return datetime.fromtimestamp(bounded_ns(ts, self._skew_ns) / 1e9, tz=UTC)

    def _count(self, kind: str, n: int) -> None:
        count_invalid(self._invalid, self.switch, kind, n)


class CountersFecStream(GnmiStream):
    """The counters' stream, handing the FEC samples its :class:`CountersFec` cut to an :class:`OpticsSink`."""

    def __init__(self, *args: Any, fec: CountersFec, optics: OpticsSink, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fec, self._fec_sink = fec, optics
        self.samples = 0

    async def _flush(self, *, close: bool) -> None:
        await super()._flush(close=close)
        async with self._lock:  # one hand-off at a time: the samples stay in order
            rows = self._fec.take()
            if not rows:
                return
            try:
                await self._fec_sink.put_optics(rows, [])
            except Exception as exc:  # kept for the next flush: the counters go on
                self._fec.give_back(rows)
                log.warning("gNMI %s: FEC samples not handed over (%s); kept for the next flush", self.switch, exc)
                return
            self.samples += len(rows)
