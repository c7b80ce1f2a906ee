"""Link-health streams: a switch's transceiver and FEC paths over gNMI, into ``port_fec`` / ``transceiver_dom``.

A profile's ``optics`` section (:mod:`collector.profiles`) names the paths and the decoder's
schema; the collector opens one more Subscribe stream per target for them (:class:`OpticsStream`,
a :class:`collector.gnmi_stream.GnmiStream` with the same backoff, limits and stall handling),
so the counters' hot path (:mod:`collector.gnmi_decode`, its C fast path) never sees these leaves.
SAMPLE subscriptions marked ``interval: fec`` run at ``collector.fec_interval_s`` (FEC counters and
BER), those marked ``interval: dom`` at ``collector.dom_interval_s`` (DOM moves slowly), both 60 s
by default: the evidence is judged over hours. Such a stream's failure (a NOS without these
paths answers NOT_FOUND) is logged and retried but does not colour the switch's reachability:
the switch's counters say that.

:class:`OpticsDecoder` turns each Notification into samples with :mod:`collector.optics_decode`:

* ``openconfig``: every update becomes (path elements, value) leaves (JSON containers flattened
  as in the counters decoder, list keys ``interface[name]``, ``component[name]``,
  ``channel[index]``, ``threshold[severity]``); one decoder per stream keeps the device's
  interface ↔ transceiver map (``/interfaces/interface/state/transceiver``) across
  Notifications, so DOM lands on the interface the device names, never one guessed by name;
* ``sonic``: ``COUNTERS/<port|glob>[/<field>]`` (FEC fields), ``TRANSCEIVER_DOM_SENSOR`` and
  ``TRANSCEIVER_DOM_THRESHOLD`` (``/<port>[/<field>]``, or the whole table) become per-port
  hashes; the latest thresholds of each port are kept, so a sensor row carries them even when
  the two tables arrive in different Notifications.

Values from a switch are untrusted: every message is size-checked, parse errors and values out of
bounds are skipped and counted through ``invalid(kind, n)`` (the counters decoder's kinds, so
``fabricmon_collector_invalid_values_total``), JSON is bounded in depth, a table in ports
(:data:`MAX_KEYS`); the decoder never raises past the stream. A Notification's timestamp further
than ``max_skew_s`` from receive time is replaced by the receive time (SPEC §9.2's bound; the
counters' learned per-switch offset is not applied here).
"""

from __future__ import annotations

import json
import logging
import struct
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, runtime_checkable

from google.protobuf.message import DecodeError  # type: ignore[import-untyped, unused-ignore]
from pygnmi.spec.v080 import gnmi_pb2

from collector.gnmi_stream import GnmiStream
from collector.gnmi_values import (
    BAD_JSON,
    DECODE_ERROR,
    MALFORMED,
    MAX_TEXT,
    OVERSIZE,
    TOO_DEEP,
    TOO_LONG,
    TOO_MANY,
    UNKNOWN_PATH,
    WRONG_TYPE,
    Bad,
    Response,
    flatten,
    path_elems,
    scalar,
)
from collector.optics_decode import (
    HIGHEST,
    LOWEST,
    SET,
    UINT,
    Action,
    Invalid,
    OpenConfigOptics,
    OpticsBatch,
    Plan,
    SonicOptics,
    Tally,
    dom_sample,
    plan_of,
    resolve,
    sonic_limits,
    sonic_sensor,
)
from collector.profiles import Elem
from collector.records import LldpReading, PortReading
from collector.speedups import optics_note as _c_optics_note
from collector.speedups import optics_pairs as _c_optics_pairs
from collector.speedups import optics_slots as _c_optics_slots
from store.dom import DomSample
from store.fec import FecSample
from wire.protobuf import U64_MAX

log = logging.getLogger(__name__)

Schema = Literal["openconfig", "sonic"]
#: The YANG list keys of the OpenConfig optics paths (JSON_IETF arrays of list entries).
LIST_KEYS: dict[str, tuple[str, ...]] = {
    "interface": ("name",),
    "component": ("name",),
    "channel": ("index",),
    "threshold": ("severity",),
}
#: The most keys (ports) one SONiC table answer may carry; more are skipped and counted.
MAX_KEYS = 4096
_MAX_PATHS = 200_000  # cached path bytes per stream (a switch has ~10 leaves per port)
_MAX_KEY = 1024  # bytes of a path kept as a cache key
_SONIC_TABLES = ("COUNTERS", "TRANSCEIVER_DOM_SENSOR", "TRANSCEIVER_DOM_THRESHOLD")
Row = FecSample | DomSample
_UNRESOLVED: Any = object()
#: What :meth:`OpticsDecoder._sensor_port` answers for ``TRANSCEIVER_DOM_SENSOR`` itself (a port
#: name never is: a name with ``*`` is read the careful way).
_WHOLE_TABLE = "*"
Hashes = dict[str, dict[str, Any]]


@runtime_checkable
class OpticsSink(Protocol):
    """Where link-health rows go (the collectors' :class:`collector.pipeline.Pipeline`)."""

    async def put_optics(self, fec: Sequence[FecSample], dom: Sequence[DomSample]) -> None:
        """Hand over FEC and DOM samples (back-pressure: may wait, never drops)."""
        ...


class OpticsDecoder:
    """Decodes one optics stream's responses into FEC and DOM samples (see the module docstring).

    It offers what :class:`GnmiStream` reads of a decoder; ``ready_ports`` holds the samples
    decoded and not yet handed over (both kinds: the stream only counts them).
    """

    def __init__(
        self,
        switch: str,
        schema: Schema,
        invalid: Invalid,
        *,
        max_message_bytes: int = 64 << 20,
        max_skew_s: float = 30.0,
    ) -> None:
        self.switch = switch
        self.schema = schema
        self.values = 0
        self.notifications = 0
        self.ignored = 0
        self.failures = 0
        self.ready_ports: list[Row] = []
        self.ready_lldp: list[LldpReading] = []
        self._invalid = invalid
        self._max = max_message_bytes
        self._skew_ns = int(max_skew_s * 1e9)
        self._oc = OpenConfigOptics(switch, invalid)
        self._sonic = SonicOptics(switch, invalid)
        self._limits: Hashes = {}
        self._paths: dict[bytes, tuple[Elem, ...]] = {}
        #: prefix bytes -> path bytes -> what the leaf sets (None: nothing), resolved once
        self._acts: dict[bytes, dict[bytes, Action | None]] = {}
        self._cached = 0  # paths in _acts
        #: prefix bytes -> how its Notifications are read into slots (None: leaf by leaf), from _acts
        self._plans: dict[bytes, Plan | None] = {}
        #: (prefix bytes, path bytes) -> the port of a ``TRANSCEIVER_DOM_SENSOR/<port>`` path (None: another path)
        self._sensors: dict[tuple[bytes, bytes], str | None] = {}
        #: port -> its kept thresholds as read (values, invalid kinds): read again only when they change
        self._limit_reads: dict[str, tuple[dict[str, float], dict[str, int]]] = {}
        self._last: tuple[int, datetime] = (-1, datetime.fromtimestamp(0, tz=UTC))

    pending = False  # each Notification is decoded whole: nothing waits for a group to close

    def begin(self) -> None:
        """A new subscription: the device restates its map and thresholds in the dump."""

    def close_group(self) -> None:
        """Nothing is grouped across Notifications."""

    def take(self) -> tuple[list[PortReading], list[LldpReading]]:
        """No port readings or LLDP tables come from here (see :meth:`take_samples`)."""
        return [], []

    def take_samples(self) -> tuple[list[FecSample], list[DomSample]]:
        """The decoded samples, handed over (the list is replaced)."""
        rows, self.ready_ports = self.ready_ports, []
        fec = [r for r in rows if isinstance(r, FecSample)]
        dom = [r for r in rows if isinstance(r, DomSample)]
        return fec, dom

    def feed(self, raw: bytes) -> bool:
        """Decode one SubscribeResponse; True when it was a ``sync_response``. Never raises.

        A Notification under a planned prefix (every minute's FEC and DOM, once its paths are
        resolved) is read into its plan's slots by one C call straight from the message's bytes
        (``_note``'s twin); anything else, or without the C, is parsed first (:meth:`_feed`)."""
        try:
            if _c_optics_note is not None and self._plans and len(raw) <= self._max:
                got = _c_optics_note(raw, self._plans)
                if got is not None:
                    self.notifications += 1
                    self._planned(self._at(got[0]), got[1], got[2], got[3])
                    return False
            return self._feed(raw)
        except Exception:  # a decoder bug costs this message, never the stream
            self.failures += 1
            log.debug("gNMI %s optics: the decoder failed on a message; skipped", self.switch, exc_info=True)
            self._count(DECODE_ERROR, 1)
            return False

    def _count(self, kind: str, n: int) -> None:
        count_invalid(self._invalid, self.switch, kind, n)

    def _feed(self, raw: bytes) -> bool:
        if len(raw) > self._max:
            self._count(OVERSIZE, 1)
            return False
        try:
            resp = Response.FromString(raw)  # prefix and updates as bytes: paths resolved once, cached
        except DecodeError:
            self._count(MALFORMED, 1)
            return False
        if resp.HasField("update"):
            self._notification(resp.update)
            return False
        return bool(resp.sync_response)

    def _at(self, ts: int) -> datetime:
        """The sample time of a Notification: its own, unless out of bounds (then receive time)."""
        ts = bounded_ns(ts, self._skew_ns)
        if ts != self._last[0]:  # a sample's Notifications share their timestamp
            self._last = (ts, datetime.fromtimestamp(ts / 1e9, tz=UTC))
        return self._last[1]

    def _elems(self, raw: bytes) -> tuple[Elem, ...]:
        """A serialized Path's elements, cached by its bytes (DecodeError when malformed)."""
        found = self._paths.get(raw)
        if found is None:
            found = path_elems(gnmi_pb2.Path.FromString(raw))
            if len(raw) <= _MAX_KEY:
                if len(self._paths) >= _MAX_PATHS:
                    self._paths.clear()
                self._paths[raw] = found
        return found

    def _update(self, u: bytes) -> tuple[bytes | None, tuple[Elem, ...], Any]:
        """(path bytes or None, path elements, value) of one Update's bytes: ``{path, val}`` split
        here (its path bytes are then a cache key), the rest parsed."""
        split = _split(u)
        if split is not None:
            return split[0], self._elems(split[0]), self._value(gnmi_pb2.TypedValue.FromString(split[1]))
        upd = gnmi_pb2.Update.FromString(u)
        if not upd.HasField("val"):
            raise Bad(WRONG_TYPE)  # a path without a value (or with the deprecated Value)
        return None, path_elems(upd.path), self._value(upd.val)

    def _notification(self, note: Any) -> None:
        self.notifications += 1
        at = self._at(note.timestamp)
        raw_prefix, updates = note.prefix, note.update
        if self.schema == "openconfig":
            if self._known(at, raw_prefix, updates):
                return
        elif len(updates) == 1 and self._sensor(at, raw_prefix, updates[0]):
            return
        try:
            prefix = self._elems(raw_prefix)
        except DecodeError:
            self._count(MALFORMED, 1)
            return
        if self.schema == "sonic":
            found: list[tuple[tuple[Elem, ...], Any]] = []
            for u in updates:
                if (got := self._checked(u)) is not None:
                    found.append((prefix + got[1], got[2]))
            batch = self._sonic_batch(at, found)
        else:
            batch = self._openconfig(at, raw_prefix, prefix, updates)
        self.ready_ports.extend(batch.fec)
        self.ready_ports.extend(batch.dom)

    def _known(self, at: datetime, raw_prefix: bytes, updates: Sequence[bytes]) -> bool:
        """An OpenConfig Notification under a prefix already resolved, read the fast way: into
        its plan's slots (one port's FEC or one module's DOM, every value plain and in bounds), or
        as (action, value) pairs (every leaf known, every value plain). False: read it the careful way."""
        known = self._acts.get(raw_prefix)
        if known is None:
            return False
        plan = self._plans.get(raw_prefix, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = self._plans[raw_prefix] = plan_of(known)
        if plan is not None and (values := (_c_optics_slots or _slots)(updates, plan.layout, plan.bounds)) is not None:
            self._planned(at, plan, values, len(updates))
            return True
        pairs = (_c_optics_pairs or _pairs)(updates, known)
        if pairs is None:
            return False
        self.values += len(updates)
        batch = self._applied(at, pairs)
        self.ready_ports.extend(batch.fec)
        self.ready_ports.extend(batch.dom)
        return True

    def _planned(self, at: datetime, plan: Plan, values: list[int | float | None], updates: int) -> None:
        """The sample of one Notification read into ``plan``'s slots; its ``updates`` counted as values."""
        self.values += updates
        if (sample := self._oc.planned(at, plan, values)) is not None:
            self.ready_ports.append(sample)

    def _sensor(self, at: datetime, raw_prefix: bytes, u: bytes) -> bool:
        """SONiC's DOM the fast way: one Update holding one port's ``TRANSCEIVER_DOM_SENSOR/<port>``
        hash, or the whole table at ``TRANSCEIVER_DOM_SENSOR`` (``{"<port>": {...}, ...}``, what
        sonic-gnmi answers a table path with, once a minute), each hash read by
        :func:`collector.optics_decode.sonic_sensor` with its port's thresholds as last read.
        False: read it the careful way (:meth:`_sonic_batch`), which gives the same samples and
        counts, and counts what is wrong with it."""
        hashes = self._sensor_hashes(raw_prefix, u)
        if hashes is None:
            return False
        reads = []
        for port, sensor in hashes:
            if (got := sonic_sensor(sensor)) is None:
                return False
            reads.append((port, got, len(sensor)))
        for port, (read, bad), n in reads:
            self.values += n
            limits = self._limit_reads.get(port)
            if limits is None:
                limits = sonic_limits(self._limits.get(port, {}))
                if port in self._limits:
                    self._limit_reads[port] = limits
            if (sample := dom_sample(at, self.switch, port, port, read, limits[0])) is not None:
                self.ready_ports.append(sample)
            for kinds in (bad, limits[1]):  # a bad threshold is counted with every sample, as the careful way does
                for kind, count in kinds.items():
                    self._count(kind, count)
        return True

    def _sensor_hashes(self, raw_prefix: bytes, u: bytes) -> Sequence[tuple[str, dict[str, Any]]] | None:
        """The (port, hash) pairs of a sensor Update the fast way can read; None: any other."""
        if (split := _split(u)) is None:
            return None
        key = (raw_prefix, split[0])
        port = self._sensors.get(key, _UNRESOLVED)
        if port is _UNRESOLVED:
            port = self._sensor_port(key)
        if port is None:
            return None
        try:
            doc = self._value(gnmi_pb2.TypedValue.FromString(split[1]))
        except (DecodeError, Bad):
            return None
        if doc.__class__ is not dict:
            return None
        return _table_hashes(doc) if port == _WHOLE_TABLE else ((port, doc),)

    def _sensor_port(self, key: tuple[bytes, bytes]) -> str | None:
        """The port a sensor path names, :data:`_WHOLE_TABLE` for the table's own path (None: any
        other path, or a malformed one), remembered."""
        try:
            names = [n for n, _ in self._elems(key[0]) + self._elems(key[1])]
        except DecodeError:
            return None
        port = None
        if names == ["TRANSCEIVER_DOM_SENSOR"]:
            port = _WHOLE_TABLE
        elif len(names) == 2 and names[0] == "TRANSCEIVER_DOM_SENSOR":
            port = names[1] if "*" not in names[1] and 0 < len(names[1]) <= MAX_TEXT else None
        if len(key[0]) + len(key[1]) <= _MAX_KEY:
            if len(self._sensors) >= _MAX_PATHS:
                self._sensors.clear()
            self._sensors[key] = port
        return port

    def _checked(self, u: bytes) -> tuple[bytes | None, tuple[Elem, ...], Any] | None:
        """:meth:`_update`, a malformed or unusable one counted (None)."""
        try:
            return self._update(u)
        except DecodeError:
            self._count(MALFORMED, 1)
        except Bad as bad:
            self._count(bad.args[0], 1)
        return None

    def _openconfig(self, at: datetime, raw_prefix: bytes, prefix: tuple[Elem, ...], updates: Any) -> OpticsBatch:
        """One Notification's leaves, each path resolved once per stream (by its prefix's and its
        own bytes): a sample's leaves repeat every interval. A JSON container is flattened."""
        known = self._acts.get(raw_prefix, {})
        found: list[tuple[Action | None, Any]] = []
        for u in updates:
            split = _split(u)
            act = known.get(split[0], _UNRESOLVED) if split is not None else _UNRESOLVED
            if act is not _UNRESOLVED and split is not None and (value := _fast_scalar(split[1])) is not _SLOW:
                found.append((act, value))  # a known leaf, a plain value
                self.values += 1
            elif (got := self._checked(u)) is None:
                continue
            elif isinstance(got[2], dict | list):
                leaves: list[tuple[tuple[Elem, ...], Any]] = []
                self._leaves(prefix + got[1], got[2], leaves)
                found.extend((resolve(e), v) for e, v in leaves)
                self.values += len(leaves)
            else:
                raw, rel, value = got
                act = resolve(prefix + rel)
                if raw is not None and len(raw_prefix) + len(raw) <= _MAX_KEY:
                    self._remember(raw_prefix, raw, act)
                found.append((act, value))
                self.values += 1
        return self._applied(at, found)

    def _remember(self, raw_prefix: bytes, raw: bytes, act: Action | None) -> None:
        """A leaf's action cached by its prefix's and its own bytes (bounded: the bytes are the switch's)."""
        if self._cached >= _MAX_PATHS:
            self._acts.clear()
            self._plans.clear()
            self._cached = 0
        known = self._acts.setdefault(raw_prefix, {})
        if raw not in known:
            self._cached += 1
        known[raw] = act
        self._plans.pop(raw_prefix, None)  # planned again from what is now known

    def _applied(self, at: datetime, found: Iterable[tuple[Action | None, Any]]) -> OpticsBatch:
        """The samples of one Notification's (action, value) leaves; invalid values counted."""
        oc = self._oc
        fec: dict[str, Any] = {}
        dom: dict[str, Any] = {}
        tally = Tally()
        for act, v in found:
            if act is None:
                continue
            try:
                oc.apply(act, v, fec, dom)
            except Bad as exc:
                tally.bad(exc)
        return oc.batch(at, fec, dom, tally)

    def _value(self, val: Any) -> Any:
        """A TypedValue's Python value; JSON parsed (bounded); :class:`Bad` when unusable."""
        which = val.WhichOneof("value")
        if which in ("json_ietf_val", "json_val"):
            text = getattr(val, which)
            if len(text) > self._max:
                raise Bad(OVERSIZE)
            try:
                return json.loads(text)
            except RecursionError:
                raise Bad(TOO_DEEP) from None
            except ValueError:
                raise Bad(BAD_JSON) from None
        v = scalar(val, which)
        if v.__class__ is object:  # gnmi_values' marker for kinds no leaf takes
            raise Bad(WRONG_TYPE)
        return v

    def _leaves(self, elems: tuple[Elem, ...], value: Any, out: list[tuple[tuple[Elem, ...], Any]]) -> None:
        if not isinstance(value, dict | list):
            out.append((elems, value))
            return
        try:
            flatten(elems, value, LIST_KEYS, out)
        except Bad as bad:
            self._count(bad.args[0], 1)

    # -- SONiC ------------------------------------------------------------------------------

    def _sonic_batch(self, at: datetime, updates: Sequence[tuple[tuple[Elem, ...], Any]]) -> OpticsBatch:
        tables: dict[str, Hashes] = {t: {} for t in _SONIC_TABLES}
        for elems, value in updates:
            names = [n for n, _ in elems]
            try:
                self._sonic_update(names, value, tables)
            except Bad as bad:
                self._count(bad.args[0], 1)
        limits = tables["TRANSCEIVER_DOM_THRESHOLD"]
        for port, fields in limits.items():
            if port in self._limits or len(self._limits) < MAX_KEYS:
                self._limits[port] = {**self._limits.get(port, {}), **fields}
                self._limit_reads.pop(port, None)
        dom = tables["TRANSCEIVER_DOM_SENSOR"]
        kept = {p: self._limits[p] for p in dom if p in self._limits}
        return self._sonic.decode(at, tables["COUNTERS"], dom, kept)

    def _sonic_update(self, names: list[str], value: Any, tables: dict[str, Hashes]) -> None:
        """One update into ``tables[TABLE][port]`` (the forms of sonic-gnmi, see the module docstring)."""
        if not names or names[0] not in tables or len(names) > 3:
            raise Bad(UNKNOWN_PATH)
        table = tables[names[0]]
        whole = len(names) == 1 or "*" in names[1]
        if len(names) == 3 and not whole:
            self._put(table, names[1], {names[2]: value})
            return
        if not isinstance(value, dict):
            raise Bad(WRONG_TYPE)
        if not whole:
            self._put(table, names[1], value)
            return
        for port, fields in value.items():
            if len(table) >= MAX_KEYS:
                raise Bad(TOO_MANY)
            if not isinstance(fields, dict):  # a glob with a field: {"Ethernet0": "12"}
                if len(names) != 3:
                    raise Bad(WRONG_TYPE)
                fields = {names[2]: fields}
            self._put(table, port, fields)

    def _put(self, table: Hashes, port: str, fields: dict[str, Any]) -> None:
        if not port or len(port) > MAX_TEXT or max(map(len, fields), default=0) > MAX_TEXT:
            raise Bad(TOO_LONG)
        self.values += len(fields)
        table.setdefault(port, {}).update(fields)


def bounded_ns(ts: int, skew_ns: int) -> int:
    """A device's sample time (ns): its own, unless unset or further than ``skew_ns`` from now
    (then the receive time): SPEC §9.2's bound, as link-health samples take it."""
    now = time.time_ns()
    return now if ts <= 0 or abs(ts - now) > skew_ns else ts


def count_invalid(invalid: Invalid, switch: str, kind: str, n: int) -> None:
    """``invalid(kind, n)``; the counter's own failure is logged, never raised into the decoding."""
    try:
        invalid(kind, n)
    except Exception:
        log.debug("gNMI %s optics: could not count %s", switch, kind, exc_info=True)


class OpticsStream(GnmiStream):
    """A :class:`GnmiStream` whose decoder gives link-health samples, handed to an :class:`OpticsSink`."""

    def __init__(self, *args: Any, decoder: OpticsDecoder, optics: OpticsSink, **kwargs: Any) -> None:
        super().__init__(*args, decoder=decoder, **kwargs)
        self._optics, self._optics_sink = decoder, optics
        self.samples = 0
        self.read_every_s = self._tuning.optics_read_every_s  # a minute's burst read in one batch or a few

    async def _flush(self, *, close: bool) -> None:
        async with self._lock:
            fec, dom = self._optics.take_samples()
            self._account()
            if fec or dom:
                self.samples += len(fec) + len(dom)
                await self._optics_sink.put_optics(fec, dom)


def _table_hashes(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]] | None:
    """A whole ``TRANSCEIVER_DOM_SENSOR`` table's (port, hash) pairs in port order (the careful
    way's), when it has at most :data:`MAX_KEYS` ports, each named (at most ``MAX_TEXT``
    characters) with a hash; None otherwise (read the careful way, which counts what is wrong)."""
    if len(doc) > MAX_KEYS:
        return None
    for port, sensor in doc.items():
        if sensor.__class__ is not dict or not port or len(port) > MAX_TEXT:
            return None
    return sorted(doc.items())


def _split(u: bytes) -> tuple[bytes, bytes] | None:
    """(path bytes, TypedValue bytes) of a serialized ``Update{path, val}`` whose path is under
    128 bytes and has nothing else; None for any other form (parsed the careful way). The value's
    length is a varint of up to four bytes: a JSON document (a module's DOM hash, a whole table)
    runs to kilobytes; a scalar's is one byte, and :func:`_fast_scalar` takes nothing longer."""
    n = len(u)
    if n > 4 and u[0] == 0x0A and u[1] < 0x80:
        j = u[1] + 2
        if j + 2 <= n and u[j] == 0x1A:
            length, shift, k = 0, 0, j + 1
            while k < n and k < j + 5:
                b = u[k]
                length |= (b & 0x7F) << shift
                k += 1
                if b < 0x80:
                    return (u[2:j], u[k:]) if length == n - k else None
                shift += 7
    return None


_SLOW: Any = object()
_DOUBLE = struct.Struct("<d")


def _pairs(updates: Sequence[bytes], acts: dict[bytes, Action | None]) -> list[tuple[Action, Any]] | None:
    """The (action, value) leaves of a Notification whose every update is ``{path, val}`` with a
    path in ``acts`` and a value :func:`_fast_scalar` reads (leaves whose action is None left out);
    None for any other (decoded the careful way). ``collector._speedups.optics_pairs`` is its C twin."""
    out: list[tuple[Action, Any]] = []
    for u in updates:
        if not isinstance(u, bytes) or (split := _split(u)) is None:
            return None
        value = _fast_scalar(split[1])
        act = acts.get(split[0], _UNRESOLVED)
        if value is _SLOW or act is _UNRESOLVED:
            return None
        if act is not None:
            out.append((act, value))
    return out


_UNPLANNED: Any = object()


def _slots(
    updates: Sequence[bytes], layout: dict[bytes, int], bounds: tuple[tuple[float, float], ...]
) -> list[int | float | None] | None:
    """One planned Notification's values in its plan's slots (:class:`collector.optics_decode.Plan`:
    a path's code is ``slot * 8 + op``); None when an update is not plain (:func:`_pairs`), its path
    is not in ``layout``, its value is not its op's type (a uint stored, a double set or the lowest
    or the highest kept) or a double is outside its slot's bounds: that Notification is read another
    way, and what is wrong with it counted there. ``collector._speedups.optics_slots`` is its C twin."""
    out: list[int | float | None] = [None] * len(bounds)
    for u in updates:
        if not isinstance(u, bytes) or (split := _split(u)) is None:
            return None
        value = _fast_scalar(split[1])
        code = layout.get(split[0])
        if value is _SLOW or code is None or code.__class__ is not int or code < 0:
            return None
        slot, op = code >> 3, code & 7
        if slot >= len(bounds) or op > HIGHEST:
            return None
        if not op:
            continue
        if op == UINT:
            if value.__class__ is not int:
                return None
            out[slot] = value
            continue
        low, high = bounds[slot]
        if value.__class__ is not float or not low <= value <= high:
            return None  # not a double, out of bounds or NaN
        now = out[slot]
        if now.__class__ is not float or op == SET or (op == LOWEST and value < now) or (op == HIGHEST and value > now):
            out[slot] = value
    return out


def _note(raw: bytes, plans: dict[bytes, Plan | None]) -> tuple[int, Plan, list[int | float | None], int] | None:
    """A serialized SubscribeResponse that is one Notification (timestamp and prefix at most once,
    updates, nothing else) whose prefix bytes (b"" when it has none) have a plan, read into the
    plan's slots by :func:`_slots`: (timestamp, plan, values, updates). None for any other message,
    a prefix without a plan, or an update :func:`_slots` hands back: read the careful way, which
    gives the same samples and counts what is wrong. ``collector._speedups.optics_note`` is its C twin."""
    fields = _fields(raw, 0, len(raw))
    if fields is None or [(f, wt) for f, wt, _ in fields] != [(1, 2)]:
        return None
    start, end = fields[0][2]
    inner = _fields(raw, start, end)
    if inner is None:
        return None
    ts, prefix, updates = 0, b"", list[bytes]()
    seen: set[int] = set()
    for field, wire, value in inner:
        if (field, wire) == (4, 2) and len(updates) < _MAX_NOTE_UPDATES:
            updates.append(raw[value[0] : value[1]])
        elif (field, wire) in ((1, 0), (2, 2)) and field not in seen:
            seen.add(field)
            if field == 1:
                ts = value - (1 << 64) if value >= 1 << 63 else value
            else:
                prefix = raw[value[0] : value[1]]
        else:
            return None
    plan = plans.get(prefix)
    if plan is None:
        return None
    values = _slots(updates, plan.layout, plan.bounds)
    return None if values is None else (ts, plan, values, len(updates))


_MAX_NOTE_UPDATES = 1024


def _fields(raw: bytes, pos: int, end: int) -> list[tuple[int, int, Any]] | None:
    """The (field, wire type, value) of a message's varint (0: the int) and length-delimited (2: the
    payload's (start, end)) fields in ``raw[pos:end]``; None when truncated, a varint is wider than
    64 bits or a field has another wire type."""
    out: list[tuple[int, int, Any]] = []
    while pos < end:
        got = _varint(raw, pos, end)
        if got is None:
            return None
        tag, pos = got
        wire = tag & 7
        got = _varint(raw, pos, end)
        if wire not in (0, 2) or got is None:
            return None
        value, pos = got
        if wire == 0:
            out.append((tag >> 3, wire, value))
            continue
        if value > end - pos:
            return None
        out.append((tag >> 3, wire, (pos, pos + value)))
        pos += value
    return out


def _varint(raw: bytes, pos: int, end: int) -> tuple[int, int] | None:
    """The varint at ``raw[pos:end]`` (at most 64 bits) and the position after it."""
    value = 0
    for i in range(10):
        if pos >= end:
            return None
        b = raw[pos]
        pos += 1
        if i == 9 and b > 1:
            return None
        value |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            return value, pos
    return None


def _fast_scalar(v: bytes) -> Any:
    """The value of a TypedValue holding only a ``uint_val`` (a varint of at most 10 bytes) or a
    ``double_val``, as upb would give it; ``_SLOW`` for anything else (parsed the careful way)."""
    n = len(v)
    if n == 9 and v[0] == 0x71:  # double_val (14), fixed64
        return _DOUBLE.unpack_from(v, 1)[0]
    if 1 < n <= 11 and v[0] == 0x18:  # uint_val (3), varint
        value = shift = 0
        for i in range(1, n):
            b = v[i]
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value if i == n - 1 and value <= U64_MAX else _SLOW
        return _SLOW
    return _SLOW
