"""The gNMI hot path: SubscribeResponse bytes → :class:`PortReading` / :class:`LldpReading`.

A :class:`StreamDecoder` belongs to one Subscribe stream. It receives the raw response bytes
(the stream is registered without a deserializer, so size limits and parse errors are ours to
handle, not the channel's) and assembles one reading per (interface, notification timestamp):
counters not in the notification stay None, ``oper_up``/``speed_bps`` carry the port's last
known value (they are ON_CHANGE), PFC per priority fills ``pfc_rx``/``pfc_tx``. LLDP updates
and deletes edit a per-port neighbour table, reported whole after each change. A delete of an
interface (a path the profile's ``removed_on_delete`` names: the interface, its ``state``, its
``oper-status``; SONiC's table key) is a reading with ``oper_up`` False and ``removed`` True at
the notification's timestamp, and the port's decoder state is forgotten, so a re-added
interface starts clean. Within a notification, deletes are applied before updates (gNMI spec
§3.5.2.3: a delete plus updates of the same node replaces it; the port is then not removed).

Speed comes from not building a Python object per value:

* responses are parsed with private messages (same field numbers as gnmi.proto, in a private
  descriptor pool so nothing collides with pygnmi's ``gnmi_pb2``) whose ``prefix`` and
  ``update`` fields are ``bytes``: the C parser hands over each Update's serialized bytes;
* an Update laid out as ``{path, val{uint_val}}`` (what every protobuf encoder writes for a
  PROTO counter) is split by two length checks; its path bytes are the cache key of the leaf,
  and the uint64 varints of one notification are decoded in one C call (a packed ``repeated
  uint64`` message); every other layout and type goes through ``gnmi_pb2`` (the slow path);
* a prefix's port and a path's leaf are resolved once (:mod:`collector.profiles`) and cached:
  per prefix bytes, and per (family, prefix shape) for the leaves, shared by all streams of a
  profile through a :class:`Resolver`.

Malformed values are skipped and counted through the ``invalid(kind, n)`` callback, with the
kinds of :mod:`collector.gnmi_values`; every value is checked against a bound before any
arithmetic on it. Decoding is total: a message the decoder fails on all the same (a bug) is
counted as ``decode_error`` and skipped, and the open group is dropped, so no single message
disables the stream (issue 28). The C fast path and this Python agree on every input; the
Python fast path takes exactly what protobuf takes (one varint per value, no deprecated
``Path.element``), the rest goes to ``gnmi_pb2``.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf.message import DecodeError  # type: ignore[import-untyped, unused-ignore]
from pygnmi.spec.v080 import gnmi_pb2

from collector.gnmi_group import GroupState
from collector.gnmi_values import (
    BAD_JSON,
    MALFORMED,
    MALFORMED_PATH,
    NEGATIVE,
    NOT_A_NUMBER,
    OUT_OF_RANGE,
    OVERSIZE,
    TOO_DEEP,
    UNKNOWN,
    UNKNOWN_PATH,
    WRONG_TYPE,
    Bad,
    PortState,
    Resolver,
    Response,
    Varints,
    flatten,
    path_elems,
    scalar,
    to_speed,
    to_status,
    to_text,
    to_uint,
)
from collector.profiles import (
    ROW_LEN,
    Elem,
    Kind,
    Leaf,
    format_path,
    strip_module,
)
from collector.speedups import fast_values as _c_fast_values
from wire.protobuf import U64_MAX, varint

log = logging.getLogger(__name__)

_MAX_CACHE = 500_000
_MAX_KEY = 1024  # bytes of a prefix kept as a cache key: a cache of 64 MiB keys would be a memory bomb

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RFC3339 = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)


class _Prefix:
    """A Notification prefix, resolved: its port (None: the port is in the update paths)."""

    __slots__ = ("elems", "port", "slots")

    def __init__(self, elems: tuple[Elem, ...], port: str | None, slots: dict[bytes, int | Leaf]) -> None:
        self.elems, self.port, self.slots = elems, port, slots


class StreamDecoder(GroupState):
    """Decodes one Subscribe stream's responses into readings (see the module docstring).

    Readings gather in ``ready_ports``/``ready_lldp`` as each timestamp's group completes
    (:meth:`close_group`, or a notification with another timestamp); the caller takes them
    with :meth:`take` and hands them to the sink.
    """

    def __init__(
        self,
        switch: str,
        resolver: Resolver,
        ports: dict[str, PortState],
        invalid: Callable[[str, int], None],
        *,
        max_message_bytes: int = 64 << 20,
        owns_lldp: bool = True,
        tap: Callable[[tuple[Elem, ...], Any, int], None] | None = None,
    ) -> None:
        """``tap``: handed each parsed JSON document, its path and its sample's timestamp, before
        it is stored (:mod:`collector.gnmi_counters_fec`); it must not raise or change it."""
        super().__init__(switch, resolver, ports, invalid, owns_lldp=owns_lldp)
        self._max = max_message_bytes
        self._tap = tap
        self._prefixes: dict[bytes, _Prefix] = {}
        self._empty_families = tuple(f for f in self._profile.families if f.empty_is_delete)

    # -- stream events ----------------------------------------------------------------------

    def feed(self, raw: bytes) -> bool:
        """Decode one SubscribeResponse; True when it was a ``sync_response``. Never raises."""
        try:
            return self._feed(raw)
        except Exception:  # a decoder bug costs this message, never the stream (issue 28)
            self._failed("a message")
            return False

    def _feed(self, raw: bytes) -> bool:
        if len(raw) > self._max:
            self._invalid(OVERSIZE, 1)
            return False
        try:
            resp = Response.FromString(raw)
        except DecodeError:
            self._invalid(MALFORMED, 1)
            return False
        if resp.HasField("update"):
            self._notification(resp.update)
            return False
        if resp.sync_response:
            self.sync()
            return True
        return False

    # -- notifications ----------------------------------------------------------------------

    def _notification(self, note: Any) -> None:
        ts = note.timestamp
        if ts <= 0:
            ts = time.time_ns()
        if ts != self._ts:
            if self._pending or self._lldp_dirty or self._removed:
                self.close_group()
            self._ts = ts
            self._received_ns = time.time_ns()
        self.notifications += 1
        raw_prefix = note.prefix
        ctx = self._prefixes.get(raw_prefix) or self._prefix(raw_prefix)
        if note.delete:  # before the updates: delete + update of one node is a replace
            self._deletes(ctx, note.delete)
        if ctx.port is not None:
            self._fast(ctx, ctx.port, note.update)
        else:
            for u in note.update:
                self._slow(ctx, u)

    def _fast(self, ctx: _Prefix, port: str, updates: Sequence[bytes]) -> None:
        if _c_fast_values is not None:  # the same in C, or -1: a layout or path it leaves to us
            row = self._pending.get(port)
            fresh = row is None
            if row is None:
                row = [None] * ROW_LEN
            n = _c_fast_values(updates, ctx.slots, row)
            if n >= 0:
                if fresh and n:
                    self._pending[port] = row
                self.values += n
                return
        keys, values, order = _split_counters(updates)
        if len(keys) == len(order):
            if keys:
                self._fast_values(ctx, port, keys, values)
            return
        # Split and careful updates mixed: applied in the Notification's order, so that of two
        # updates of one path the last wins, as protobuf reads them.
        start = done = 0
        for u in order:
            if u is None:
                done += 1
                continue
            if done > start:
                self._fast_values(ctx, port, keys[start:done], values[start:done])
            start = done
            self._slow(ctx, u)
        if done > start:
            self._fast_values(ctx, port, keys[start:done], values[start:done])

    def _fast_values(self, ctx: _Prefix, port: str, keys: list[bytes], values: Sequence[int]) -> None:
        row = self._pending.get(port)
        fresh = row is None
        if row is None:
            row = [None] * ROW_LEN
        slots = ctx.slots
        try:
            for key, value in zip(keys, values, strict=True):
                row[slots[key]] = value  # type: ignore[index]
        except (KeyError, TypeError):  # a path not cached yet, or a leaf that is not a plain counter
            for key, value in zip(keys, values, strict=True):
                s = slots.get(key)
                self._store(port, self._fast_slot(ctx, key) if s is None else s, value)
            return
        if fresh:
            self._pending[port] = row
        self.values += len(keys)

    def _fast_slot(self, ctx: _Prefix, key: bytes) -> int | Leaf:
        try:
            path = gnmi_pb2.Path.FromString(key)
        except DecodeError:  # as the slow path counts an Update it cannot parse
            slot: int | Leaf = MALFORMED_PATH
        else:
            if len(path.element):  # the deprecated string path: unknown, as the slow path says
                slot = UNKNOWN
            else:
                _, slot = self._r.leaf(ctx.elems + path_elems(path))
        if len(ctx.slots) < _MAX_CACHE:
            ctx.slots[key] = slot
        return slot

    def _slow(self, ctx: _Prefix, raw: bytes) -> None:
        try:
            upd = gnmi_pb2.Update.FromString(raw)
        except DecodeError:
            self._invalid(MALFORMED, 1)
            return
        if len(upd.path.element):  # the deprecated string path
            self._invalid(UNKNOWN_PATH, 1)
            return
        if not upd.HasField("val"):
            if len(upd.path.elem):
                self._invalid(WRONG_TYPE, 1)  # a path without a value (or with the deprecated Value)
            else:
                self.ignored += 1  # an empty Update: Huawei VRP sends one beside its deletes (telegraf#17412)
            return
        val = upd.val
        which = val.WhichOneof("value")
        elems = ctx.elems + path_elems(upd.path)
        try:
            if which in ("json_ietf_val", "json_val"):
                self._json(elems, getattr(val, which))
            else:
                self._resolve_store(elems, scalar(val, which))
        except Bad as bad:  # the whole update is skipped: a value out of bounds, or JSON too deep
            self._invalid(bad.args[0], 1)

    def _json(self, elems: tuple[Elem, ...], text: bytes) -> None:
        if len(text) > self._max:
            raise Bad(OVERSIZE)
        try:
            doc = json.loads(text)
        except RecursionError:  # nested past the interpreter's recursion limit (~1000)
            raise Bad(TOO_DEEP) from None
        except ValueError:  # also a number of more than 4300 digits, and bytes that are not UTF-8
            raise Bad(BAD_JSON) from None
        if self._tap is not None:
            self._tap(elems, doc, self._ts)
        if isinstance(doc, dict | list):
            out: list[tuple[tuple[Elem, ...], Any]] = []
            flatten(elems, doc, self._profile.list_keys, out)  # raises TOO_DEEP before storing any
            for sub, leaf_value in out:
                self._resolve_store(sub, leaf_value)
            if self._empty_families and isinstance(doc, dict):
                self._empty_members(elems, doc)
            return
        self._resolve_store(elems, doc)

    def _resolve_store(self, elems: tuple[Elem, ...], value: Any) -> None:
        port, slot = self._r.leaf(elems)
        if slot is UNKNOWN or port is None:
            self._invalid(UNKNOWN_PATH, 1)
            return
        self._store(port, slot, value)

    def _store(self, port: str, slot: int | Leaf, value: Any) -> None:
        """One value into the port's row or state, converted as its leaf says; bad ones counted."""
        try:
            if slot.__class__ is int:
                self._row(port)[slot] = to_uint(value)
            else:
                leaf: Leaf = slot  # type: ignore[assignment]
                kind = leaf.kind
                if kind is Kind.IGNORE:
                    if leaf is UNKNOWN:
                        raise Bad(UNKNOWN_PATH)
                    if leaf is MALFORMED_PATH:
                        raise Bad(MALFORMED)
                    self.ignored += 1
                    return
                if kind is Kind.COUNTER or kind is Kind.TIMETICKS:
                    number = to_uint(value) * leaf.scale
                    if number > U64_MAX:
                        raise Bad(OUT_OF_RANGE)
                    self._row(port)[leaf.index] = number
                elif kind is Kind.STATUS:
                    (self._ports.get(port) or self._state(port)).oper = to_status(leaf.word(value))
                    self._row(port)
                    self._oper_seen.add(port)
                elif kind is Kind.SPEED:
                    (self._ports.get(port) or self._state(port)).speed = to_speed(leaf.word(value), leaf.scale)
                    self._row(port)
                    self._speed_seen.add(port)
                elif kind is Kind.DATETIME:
                    number = datetime_ns(value) * leaf.scale
                    if number > U64_MAX:
                        raise Bad(OUT_OF_RANGE)
                    self._row(port)[leaf.index] = number
                else:
                    self._lldp_set(port, leaf, to_text(value))
        except Bad as bad:
            self._invalid(bad.args[0], 1)
            return
        self.values += 1

    def _prefix(self, raw: bytes) -> _Prefix:
        try:
            elems = path_elems(gnmi_pb2.Path.FromString(raw))
        except DecodeError:
            elems = ()
        found = self._profile.match(elems)
        if found is None:
            ctx = _Prefix(elems, None, {})
        else:
            fam, port, rest = found
            slots = self._r.shapes.setdefault((fam.name, tuple(rest)), {})
            ctx = _Prefix(elems, port, slots)
        if len(raw) <= _MAX_KEY:
            if len(self._prefixes) >= _MAX_CACHE:
                self._prefixes.clear()
            self._prefixes[raw] = ctx
        return ctx

    # -- deletes -----------------------------------------------------------------------------

    def _deletes(self, ctx: _Prefix, deletes: Sequence[bytes]) -> None:
        for raw in deletes:
            try:
                elems = ctx.elems + path_elems(gnmi_pb2.Path.FromString(raw))
            except DecodeError:
                self._invalid(MALFORMED, 1)
                continue
            self._delete(elems)

    def _delete(self, elems: tuple[Elem, ...], *, empty: bool = False) -> None:
        """A deleted path (``empty``: a JSON member that is ``{}``): an LLDP change or a removed port."""
        found = self._profile.match(elems)
        if found is None:
            return
        fam, port, rest = found
        if empty and not fam.empty_is_delete:
            return
        if fam.lldp:
            self._lldp_delete(fam, port, rest)
        elif format_path(rest) in fam.removed_by:
            self._remove(port)
        # anything else (a vanished counter, a subinterface): nothing to report

    def _empty_members(self, elems: tuple[Elem, ...], doc: dict[str, Any]) -> None:
        """Members at a family's root depth whose value is ``{}``, as deletes of their paths.

        SONiC's gNMI server reports a Redis ``del`` of a table key as the key with an empty object
        (``PORT_TABLE`` → ``{"Ethernet0": {}}``; sonic-gnmi sonic_data_client/db_client.go,
        dbSingleTableKeySubscribe); Redis keeps no empty hash, so the key is gone.
        """
        base = _before_wildcard(elems)
        for fam in self._empty_families:
            depth = len(fam.root) - len(base)
            if depth <= 0 or any(t not in (n, "{port}") for (n, _), (t, _) in zip(base, fam.root, strict=False)):
                continue
            level: list[tuple[tuple[Elem, ...], Any]] = [(base, doc)]
            for _ in range(depth):
                level = [((*p, (strip_module(k), ())), v) for p, d in level for k, v in _items(d)]
            for path, value in level:
                if isinstance(value, dict) and not value:
                    self._delete(path, empty=True)


def _items(doc: Any) -> list[tuple[str, Any]]:
    return list(doc.items()) if isinstance(doc, dict) else []


def _before_wildcard(elems: tuple[Elem, ...]) -> tuple[Elem, ...]:
    """The elements before the first wildcard name: where a SONiC virtual path roots its JSON."""
    for i, (name, _) in enumerate(elems):
        if "*" in name:
            return elems[:i]
    return elems


def datetime_ns(value: Any) -> int:
    """A yang:date-and-time (RFC 3339: ``2023-11-15T05:50:40+00:00``, ``...40.391Z``) as Unix ns."""
    if value.__class__ is not str:
        raise Bad(WRONG_TYPE)
    match = _RFC3339.fullmatch(value.strip())
    if match is None:  # also a time without an offset: RFC 3339 requires one (local time is ambiguous)
        raise Bad(NOT_A_NUMBER)
    day, clock, fraction, offset = match.groups()
    try:
        when = datetime.fromisoformat(f"{day}T{clock}{'+00:00' if offset in 'Zz' else offset}")
    except ValueError:
        raise Bad(NOT_A_NUMBER) from None
    delta = when - _EPOCH
    ns = (delta.days * 86_400 + delta.seconds) * 10**9 + int((fraction or "0")[:9].ljust(9, "0"))
    if ns < 0:
        raise Bad(NEGATIVE)
    return ns


def _split_counters(updates: Sequence[bytes]) -> tuple[list[bytes], Sequence[int], list[bytes | None]]:
    """(path bytes, uint values) of the updates split here (``Update{path (short), val{uint_val}}``
    and nothing else), and per update in order None (split) or the update itself (to be read the
    careful way). Every update careful when any split one does not hold one plain varint."""
    keys: list[bytes] = []
    parts: list[bytes] = []
    order: list[bytes | None] = []  # per update: None (split here, in keys) or itself (the careful way)
    try:
        for u in updates:
            # Update{path (short), val{uint_val}} and nothing else: split it here.
            # Each value's last byte ends a varint: with the count check below, each is one varint.
            # A value of at least one byte (u[j + 1] > 1): an empty one would let the count
            # check pass for a value with two varints in the same notification (issue 28).
            j = u[1] + 2
            if (
                u[0] == 0x0A
                and j < 0x82
                and u[j] == 0x1A
                and 1 < u[j + 1] == len(u) - j - 2
                and u[j + 2] == 0x18
                and u[-1] < 0x80
            ):
                keys.append(u[2:j])
                parts.append(u[j + 3 :])
                order.append(None)
            else:
                order.append(u)
    except IndexError:  # an update too short for that layout: decode them all the careful way
        keys, order = [], list(updates)
    values: Sequence[int] = ()
    if keys:
        raw = b"".join(parts)
        try:
            values = Varints.FromString(b"\x0a" + varint(len(raw)) + raw).v
        except DecodeError:  # a varint too wide: decode them properly (that one is malformed)
            values = ()
        if len(values) != len(keys):  # a value had fields after its varint: decode them properly
            keys, order = [], list(updates)
    return keys, values, order
