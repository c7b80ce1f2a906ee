"""SONiC's FEC fields taken from the counters' own stream, not subscribed to a second time.

orchagent keeps a port's FEC counters (``SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S0..S15``,
``..._CORRECTABLE_FRAMES``, ``..._NOT_CORRECTABLE_FRAMES``, ``..._SYMBOL_ERRORS``) in the same
``COUNTERS`` hash as its other SAI port stats (sonic-net/SONiC ``doc/port_fec_flr``), and the
counters' stream already subscribes to that whole hash every ``collector.gnmi_interval_s``. A
profile whose ``optics`` say ``fec: counters`` (``sonic``) therefore opens no FEC subscription:

* :class:`CountersFec` is handed each JSON document the counters' decoder parses at
  ``COUNTERS/<port|glob>`` (:class:`collector.gnmi_decode.StreamDecoder`'s ``tap``). Once per
  ``collector.fec_interval_s`` of sample time it keeps the FEC fields of every port of the
  sample (all documents with that sample's timestamp: a glob answer is one document, per-port
  answers are one each) and decodes them with :class:`collector.optics_decode.SonicOptics`, as
  the link-health stream would have. Other samples cost one integer division.
* :class:`CountersFecStream` is the counters' :class:`collector.gnmi_stream.GnmiStream` that
  also hands those samples to the link-health sink (``port_fec``) after each flush.

What a switch sends is untrusted here as everywhere: at most :data:`MAX_KEYS` ports per
document, port names bounded, values checked and counted as invalid by the same decoder; a
failure costs that document's FEC, never the counters (the tap never raises). A sample time
further than ``max_skew_s`` from receive time is replaced by the receive time, as the link-health
stream does. Only the exact field names are read (a bin spelled ``S07`` is read only through a
FEC subscription, whose decoder takes any spelling).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from collector.gnmi_optics import MAX_KEYS, OpticsSink
from collector.gnmi_stream import GnmiStream
from collector.gnmi_values import MAX_TEXT, TOO_LONG, TOO_MANY
from collector.optics_decode import SONIC_FEC_NAMES, Invalid, SonicOptics
from collector.profiles import Elem
from store.fec import FecSample

log = logging.getLogger(__name__)


class CountersFec:
    """One switch's FEC samples, cut from the COUNTERS documents its counters' stream receives."""

    def __init__(self, switch: str, invalid: Invalid, *, every_s: float, max_skew_s: float = 30.0) -> None:
        self.switch = switch
        self.failures = 0
        self._invalid = invalid
        self._sonic = SonicOptics(switch, invalid)
        self._every_ns = max(int(every_s * 1e9), 1)
        self._skew_ns = int(max_skew_s * 1e9)
        self._bucket = -1  # the fec_interval_s slot of the last sample taken
        self._taking = -1  # that sample's timestamp: its other documents are taken too
        self._ready: list[FecSample] = []

    def __call__(self, elems: tuple[Elem, ...], doc: Any, ts_ns: int) -> None:
        """Offer one parsed document at ``elems`` of the sample at ``ts_ns``. Never raises."""
        if ts_ns != self._taking:
            if ts_ns // self._every_ns == self._bucket:
                return  # the common case: not a FEC sample
            if len(elems) != 2 or elems[0][0] != "COUNTERS" or not isinstance(doc, dict):
                return
            self._bucket, self._taking = ts_ns // self._every_ns, ts_ns
        elif len(elems) != 2 or elems[0][0] != "COUNTERS" or not isinstance(doc, dict):
            return
        try:
            self._take(elems[1][0], doc, ts_ns)
        except Exception:  # a bug here costs this document's FEC, never the counters
            self.failures += 1
            log.debug("gNMI %s: FEC from COUNTERS failed on a document; skipped", self.switch, exc_info=True)

    def take(self) -> list[FecSample]:
        """The samples decoded since the last call."""
        rows, self._ready = self._ready, []
        return rows

    def _take(self, key: str, doc: dict[str, Any], ts_ns: int) -> None:
        hashes = doc.items() if "*" in key else ((key, doc),)
        fec: dict[str, dict[str, Any]] = {}
        too_long = 0
        for port, fields in hashes:
            if not isinstance(fields, dict):
                continue  # not a hash: the counters' decoder counts it
            if len(fec) >= MAX_KEYS:
                self._count(TOO_MANY, 1)
                break
            if not port or len(port) > MAX_TEXT:
                too_long += 1
                continue
            found = {name: fields[name] for name in SONIC_FEC_NAMES if name in fields}
            if found:
                fec[port] = found
        if too_long:
            self._count(TOO_LONG, too_long)
        if fec:
            self._ready.extend(self._sonic.decode(self._at(ts_ns), counters=fec).fec)

    def _at(self, ts: int) -> datetime:
        now = time.time_ns()
        if ts <= 0 or abs(ts - now) > self._skew_ns:
            ts = now
        return datetime.fromtimestamp(ts / 1e9, tz=UTC)

    def _count(self, kind: str, n: int) -> None:
        try:
            self._invalid(kind, n)
        except Exception:  # the counter's own failure must not undo the decoding
            log.debug("gNMI %s: could not count %s", self.switch, kind, exc_info=True)


class CountersFecStream(GnmiStream):
    """The counters' stream, handing the FEC samples its :class:`CountersFec` cut to an :class:`OpticsSink`."""

    def __init__(self, *args: Any, fec: CountersFec, optics: OpticsSink, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fec, self._fec_sink = fec, optics
        self.samples = 0

    async def _flush(self, *, close: bool) -> None:
        await super()._flush(close=close)
        rows: Sequence[FecSample] = self._fec.take()
        if rows:
            self.samples += len(rows)
            await self._fec_sink.put_optics(rows, [])
