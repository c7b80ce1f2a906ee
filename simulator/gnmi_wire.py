"""gNMI wire bytes for the simulator's hot path: Notifications built from cached pieces.

The server streams every counter of a 16K-GPU fabric (~82K ports x ~20 leaves every 10 s)
from one process, so it does not build a protobuf object per value (~300K values/s on one
core with the upb runtime). Instead it assembles ``SubscribeResponse`` bytes directly:

* the Notification ``prefix`` (target + ``/interfaces/interface[name=N]``) is serialized
  once per (target, family, port) and cached;
* each leaf's relative ``Update.path`` is serialized once, together with the Update's tag
  and length bytes for every possible value length (:class:`LeafCodec`);
* all uint64 values of one switch are varint-encoded in a single C call (a packed
  ``repeated uint64`` message from a private descriptor pool, split with a regex), so the
  per-value Python work is one list lookup and one ``bytes`` concatenation;
* string-typed leaves (status, speed, description, LLDP) keep a memo of complete Update
  fields per raw value, since they rarely change.

Measured on one core (128-port switches, all interface leaves, PROTO): ~3M values/s, against
~0.3M values/s building ``gnmi_pb2`` objects; JSON_IETF about half as fast as PROTO.

A :class:`Layout` cuts each interface's leaves into one group per container (EOS); a group's
``note`` keeps apart groups whose prefix does not name the interface (XR). Per NOS shape
(:mod:`simulator.gnmi_shapes`), one 128-port switch's interface leaves and PFC rendered into
Notification bytes (2-core machine, one core, values/s; Notifications per switch per sample):
openconfig and cumulus 2.0M PROTO / 0.75M JSON_IETF (256); eos 1.3M / 0.6M (512: a
Notification per container, so gRPC's ~40 µs per message costs it twice as much); xr 0.9M
(256, JSON containers); sonic 7.2M (1: the whole switch in one JSON table).

The result decodes as an ordinary ``gnmi_pb2.SubscribeResponse`` (a ``GetResponse`` is the
same bytes concatenated: both carry their Notifications as field 1). Values: counters and
timeticks64 as ``uint_val`` (PROTO) or RFC 7951 strings (JSON_IETF), strings as
``string_val``, ``oper-status`` as ``UP``/``DOWN``, ``port-speed`` as the module-qualified
identity (``openconfig-if-ethernet:SPEED_400GB``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from simulator.gnmi_bytes import SYNC_RESPONSE as SYNC_RESPONSE  # the bytes helpers, imported from here too
from simulator.gnmi_bytes import Encoding as Encoding
from simulator.gnmi_bytes import LeafCodec as LeafCodec
from simulator.gnmi_bytes import json_ietf as json_ietf
from simulator.gnmi_bytes import notification as notification
from simulator.gnmi_bytes import path_bytes as path_bytes
from simulator.gnmi_bytes import prefix_field as prefix_field
from simulator.gnmi_bytes import string_val as string_val
from simulator.gnmi_bytes import timestamp as timestamp
from simulator.gnmi_bytes import update_field as update_field
from simulator.gnmi_bytes import varints as varints
from simulator.gnmi_paths import IF_FIELDS, LEAVES, LLDP_FIELDS, ROOTS, Elem, Family, Kind, Selection
from simulator.view import LldpNeighbor, PortCounters
from wire.protobuf import U64_MAX, varint

_MAX_CACHE = 1_000_000  # entries per cache; a 16K-GPU fabric needs ~250K prefixes
_MAX_MEMO = 200_000  # values per leaf memo (a 16K-GPU fabric has ~82K distinct descriptions)

#: ETHERNET_SPEED identities of openconfig-if-ethernet, by bits per second.
SPEEDS: dict[int, str] = {
    10**9: "SPEED_1GB",
    10 * 10**9: "SPEED_10GB",
    25 * 10**9: "SPEED_25GB",
    40 * 10**9: "SPEED_40GB",
    50 * 10**9: "SPEED_50GB",
    100 * 10**9: "SPEED_100GB",
    200 * 10**9: "SPEED_200GB",
    400 * 10**9: "SPEED_400GB",
    800 * 10**9: "SPEED_800GB",
}
_ETHERNET = "openconfig-if-ethernet:"


def _with_key(elems: Sequence[Elem], at: int, value: str) -> list[Elem]:
    out = list(elems)
    out[at] = Elem(out[at].name, tuple((k, value if v == "*" else v) for k, v in out[at].keys))
    return out


class Group(NamedTuple):
    """One interface's Notification content: prefix field, leaf path keys, Update fields.

    Groups with the same prefix (and ``note``) at one instant share one Notification; ``note``
    keeps apart the groups of shapes whose prefix does not name the interface (XR). ``port``
    is "" for a group that carries every port (a SONiC virtual-path table).
    """

    port: str
    prefix: bytes
    keys: Sequence[bytes]  # relative Path bytes of each update (for diffs and deletes)
    updates: list[bytes]
    note: bytes = b""


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a shape cuts an interface's leaves into Notifications (EOS: one per container).

    ``containers[family]`` lists paths below the family root; each leaf goes to the longest
    one above it and is sent relative to it, in a Notification whose prefix ends there. A
    family not listed keeps one Notification per interface (the root as the only container).
    """

    name: str
    containers: Mapping[Family, tuple[tuple[Elem, ...], ...]] = field(default_factory=dict)

    def split(self, family: Family, rel: tuple[Elem, ...]) -> tuple[int, tuple[Elem, ...]]:
        """(container index, path below it) of a leaf; index -1 is the family root."""
        best, at = -1, 0
        for i, c in enumerate(self.containers.get(family, ())):
            if len(c) > at and rel[: len(c)] == c and len(rel) > len(c):
                best, at = i, len(c)
        return best, rel[at:]


OPENCONFIG_LAYOUT = Layout("openconfig")


_IF_ROW = attrgetter(*IF_FIELDS)
_LLDP_ROW = attrgetter(*(f for _, f in LLDP_FIELDS))


def _pfc_row(p: PortCounters) -> tuple[int, ...]:
    return p.pfc_rx + p.pfc_tx


class Renderer:
    """Turns FabricView rows into Notification pieces; owns the byte caches (one per server)."""

    def __init__(self) -> None:
        self._prefixes: dict[tuple[str, Family, tuple[Elem, ...]], dict[str, bytes]] = {}
        self._codecs: dict[tuple[Family, int, str, str], LeafCodec] = {}
        self._splits: dict[tuple[str, Family], list[tuple[int, tuple[Elem, ...]]]] = {}

    def prefix(self, target: str, family: Family, port: str, below: tuple[Elem, ...] = ()) -> bytes:
        """The encoded Notification.prefix field for one interface of one family (or a container)."""
        ports = self._prefix_map(target, family, below)
        found = ports.get(port)
        if found is None:
            root = ROOTS[family]
            data = path_bytes(_with_key(root, len(root) - 1, port) + list(below), target)
            found = ports[port] = b"\x12" + varint(len(data)) + data
        return found

    def _prefix_map(self, target: str, family: Family, below: tuple[Elem, ...] = ()) -> dict[str, bytes]:
        found = self._prefixes.get((target, family, below))
        if found is None:
            if len(self._prefixes) >= _MAX_CACHE // 100:
                self._prefixes.clear()
            found = self._prefixes[(target, family, below)] = {}
        return found

    def codec(self, family: Family, index: int, neighbor: str = "", layout: Layout = OPENCONFIG_LAYOUT) -> LeafCodec:
        """The codec of one leaf (LLDP leaves: of one neighbour id), relative to its container."""
        key = (family, index, neighbor, layout.name)
        found = self._codecs.get(key)
        if found is None:
            rel = LEAVES[family][index].rel
            if neighbor:
                rel = tuple(_with_key(rel, 1, neighbor))
            found = LeafCodec(path_bytes(layout.split(family, rel)[1]))
            if len(self._codecs) >= _MAX_CACHE:
                self._codecs.clear()
            self._codecs[key] = found
        return found

    def _split(self, layout: Layout, family: Family) -> list[tuple[int, tuple[Elem, ...]]] | None:
        """Per leaf index: (container index, container path); None when the family is not split."""
        if family not in layout.containers:
            return None
        key = (layout.name, family)
        found = self._splits.get(key)
        if found is None:
            found = []
            for leaf in LEAVES[family]:
                ci, _ = layout.split(family, leaf.rel)
                found.append((ci, layout.containers[family][ci] if ci >= 0 else ()))
            self._splits[key] = found
        return found

    @staticmethod
    def typed(kind: Kind, value: Any, encoding: Encoding) -> bytes:
        """An encoded TypedValue (the slow path: cold values, JSON counters)."""
        if kind is Kind.UINT:
            v = int(value) & U64_MAX
            if encoding is Encoding.PROTO:
                return b"\x18" + varint(v)
            text = b'"%d"' % v
            return b"\x5a" + varint(len(text)) + text
        if kind is Kind.STATUS:
            s = "UP" if value else "DOWN"
        elif kind is Kind.SPEED:
            s = _ETHERNET + (SPEEDS.get(int(value), "SPEED_UNKNOWN") if value else "SPEED_UNKNOWN")
        else:
            s = str(value)
        if encoding is Encoding.PROTO:
            raw = s.encode()
            return b"\x0a" + varint(len(raw)) + raw
        raw = json.dumps(s, ensure_ascii=False).encode()
        return b"\x5a" + varint(len(raw)) + raw

    def render(
        self,
        target: str,
        sel: Selection,
        encoding: Encoding,
        ports: Sequence[PortCounters],
        lldp: Sequence[LldpNeighbor],
        layout: Layout = OPENCONFIG_LAYOUT,
    ) -> list[Group]:
        """The Notification groups of one selection: one per interface (and container) with data."""
        if sel.family is Family.LLDP:
            return self._render_lldp(target, sel, encoding, lldp)
        if sel.port is not None:
            ports = [p for p in ports if p.name == sel.port]
        leaves = LEAVES[sel.family]
        uint_ix = [i for i in sel.leaves if leaves[i].kind is Kind.UINT]
        other_ix = [i for i in sel.leaves if leaves[i].kind is not Kind.UINT]
        codecs = [self.codec(sel.family, i, layout=layout) for i in uint_ix]
        other = [(self.codec(sel.family, i, layout=layout), leaves[i]) for i in other_ix]
        memos = [(c.memo[encoding], c, leaf.column, leaf.kind) for c, leaf in other]
        keys = tuple(c.path for c in codecs) + tuple(c.path for c, _ in other)
        rows: list[tuple[Any, ...]] = [(_IF_ROW(p) if sel.family is Family.INTERFACES else _pfc_row(p)) for p in ports]
        n = len(uint_ix)
        flat: list[int] = []
        if n == 1:
            col = leaves[uint_ix[0]].column
            flat = [r[col] for r in rows]
        elif n:
            cols = itemgetter(*(leaves[i].column for i in uint_ix))
            for r in rows:
                flat.extend(cols(r))
        proto = encoding is Encoding.PROTO
        encoded = varints(flat) if proto else [self.typed(Kind.UINT, v, encoding) for v in flat]
        fasts = [c.fast for c in codecs]
        prefixes = self._prefix_map(target, sel.family)
        groups: list[Group] = []
        for k, (p, r) in enumerate(zip(ports, rows, strict=True)):
            chunk = encoded[k * n : (k + 1) * n]
            if proto:
                ups = [f[len(vb)] + vb for f, vb in zip(fasts, chunk, strict=True)]
            else:
                ups = [c.update(tv) for c, tv in zip(codecs, chunk, strict=True)]
            for memo, codec, column, kind in memos:
                value = r[column]
                up = memo.get(value)
                if up is None:
                    up = _remember(memo, value, codec.update(self.typed(kind, value, encoding)))
                ups.append(up)
            name = p.name
            prefix = prefixes.get(name) or self.prefix(target, sel.family, name)
            groups.append(Group(name, prefix, keys, ups))
        split = self._split(layout, sel.family)
        if split is not None:
            return self._containers(target, sel.family, groups, [split[i] for i in (*uint_ix, *other_ix)])
        return groups

    def _containers(
        self, target: str, family: Family, groups: list[Group], where: list[tuple[int, tuple[Elem, ...]]]
    ) -> list[Group]:
        """Cut each interface's group into one group per container (``where``: per update)."""
        below = sorted(set(where), key=lambda c: c[0])
        slot = {c: k for k, c in enumerate(below)}
        pos = [slot[c] for c in where]
        out: list[Group] = []
        if not groups:
            return out
        keys: list[list[bytes]] = [[] for _ in below]
        for k, key in zip(pos, groups[0].keys, strict=True):
            keys[k].append(key)
        for g in groups:
            buckets: list[list[bytes]] = [[] for _ in below]
            for k, up in zip(pos, g.updates, strict=True):
                buckets[k].append(up)
            for (_, path), ks, ups in zip(below, keys, buckets, strict=True):
                if ups:
                    out.append(Group(g.port, self.prefix(target, family, g.port, path), ks, ups))
        return out

    def _render_lldp(
        self, target: str, sel: Selection, encoding: Encoding, lldp: Sequence[LldpNeighbor]
    ) -> list[Group]:
        by_port: dict[str, list[LldpNeighbor]] = {}
        for nb in lldp:
            if sel.port is None or nb.local_port == sel.port:
                by_port.setdefault(nb.local_port, []).append(nb)
        leaves = LEAVES[Family.LLDP]
        per_id: dict[str, list[tuple[dict[Any, bytes], LeafCodec, int]]] = {}
        groups: list[Group] = []
        for port, neighbors in by_port.items():
            keys: list[bytes] = []
            ups: list[bytes] = []
            for number, nb in enumerate(neighbors, start=1):
                nid = str(number)
                if sel.neighbor is not None and nid != sel.neighbor:
                    continue
                codecs = per_id.get(nid)
                if codecs is None:
                    codecs = per_id[nid] = [
                        (c.memo[encoding], c, leaves[i].column)
                        for i in sel.leaves
                        for c in (self.codec(Family.LLDP, i, nid),)
                    ]
                row = _LLDP_ROW(nb)
                for memo, codec, column in codecs:
                    value = row[column]
                    up = memo.get(value)
                    if up is None:
                        up = _remember(memo, value, codec.update(self.typed(Kind.TEXT, value, encoding)))
                    keys.append(codec.path)
                    ups.append(up)
            if ups:
                groups.append(Group(port, self.prefix(target, Family.LLDP, port), keys, ups))
        return groups


def _remember(memo: dict[Any, bytes], value: Any, update: bytes) -> bytes:
    if len(memo) >= _MAX_MEMO:
        memo.clear()
    memo[value] = update
    return update


class JsonTexts:
    """JSON string literals as bytes, memoized (descriptions, names and identities repeat)."""

    __slots__ = ("_memo",)

    def __init__(self) -> None:
        self._memo: dict[str, bytes] = {}

    def __call__(self, s: str) -> bytes:
        found = self._memo.get(s)
        if found is None:
            if len(self._memo) >= _MAX_MEMO:
                self._memo.clear()
            found = self._memo[s] = json.dumps(s, ensure_ascii=False).encode()
        return found
