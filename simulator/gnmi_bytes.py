"""The gNMI protobuf bytes the simulator writes, built by hand: fields, values, Notifications.

The cold helpers serialize a Path once (:func:`path_bytes`); the hot ones join cached bytes
(:func:`notification`, :class:`LeafCodec`), and :func:`varints` encodes a switch's uint64 values in
one C call. :mod:`simulator.gnmi_wire` renders a switch's state with them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import IntEnum
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # type: ignore[import-untyped, unused-ignore]
from pygnmi.spec.v080 import gnmi_pb2

from simulator.gnmi_paths import Elem
from wire.protobuf import U64_MAX, varint


class Encoding(IntEnum):
    """The gNMI encodings served (values as in ``gnmi_pb2.Encoding``)."""

    PROTO = 2
    JSON_IETF = 4


#: ``SubscribeResponse{sync_response: true}``.
SYNC_RESPONSE = b"\x18\x01"

_VARINT_RE = re.compile(rb"[\x80-\xff]*[\x00-\x7f]")


def _varints_class() -> Any:
    # A private pool: nothing here can collide with the gnmi descriptors in the default pool.
    fdp = descriptor_pb2.FileDescriptorProto(name="fabricmon/varints.proto", package="fabricmon", syntax="proto3")
    msg = fdp.message_type.add(name="Varints")
    msg.field.add(
        name="v",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("fabricmon.Varints"))


_Varints = _varints_class()


def varints(values: list[int]) -> list[bytes]:
    """Varint encodings of many uint64 values at once (values are taken modulo 2^64)."""
    if not values:
        return []
    try:
        raw = _Varints(v=values).SerializeToString()
    except (ValueError, TypeError):
        raw = _Varints(v=[int(v) & U64_MAX for v in values]).SerializeToString()
    i = 1  # skip the field tag, then the length varint
    while raw[i] & 0x80:
        i += 1
    found: list[bytes] = _VARINT_RE.findall(raw, i + 1)
    return found


def path_bytes(elems: Sequence[Elem], target: str = "", origin: str = "") -> bytes:
    """A serialized ``gnmi_pb2.Path`` (cold path: used to fill caches)."""
    path = gnmi_pb2.Path(target=target, origin=origin)
    for e in elems:
        path.elem.add(name=e.name, key=dict(e.keys))
    data: bytes = path.SerializeToString()
    return data


def prefix_field(path: bytes) -> bytes:
    """The Notification.prefix field carrying serialized Path bytes."""
    return b"\x12" + varint(len(path)) + path


def update_field(path: bytes, typed_value: bytes) -> bytes:
    """An Update field: serialized Path bytes and an encoded TypedValue (cold or per-container use)."""
    body = b"\x0a" + varint(len(path)) + path + b"\x1a" + varint(len(typed_value)) + typed_value
    return b"\x22" + varint(len(body)) + body


def json_ietf(doc: bytes) -> bytes:
    """A TypedValue ``json_ietf_val`` with this RFC 7951 text."""
    return b"\x5a" + varint(len(doc)) + doc


def string_val(text: bytes) -> bytes:
    """A TypedValue ``string_val``."""
    return b"\x0a" + varint(len(text)) + text


def timestamp(ts: int) -> bytes:
    """The encoded Notification.timestamp field (computed once per batch, not per Notification)."""
    return b"\x08" + varint(ts)


def notification(ts_field: bytes, prefix: bytes, updates: Sequence[bytes], deletes: Sequence[bytes] = ()) -> bytes:
    """``SubscribeResponse{update: Notification}`` bytes (also one GetResponse.notification).

    ``ts_field`` comes from :func:`timestamp`, ``prefix`` is the encoded prefix field
    (:meth:`Renderer.prefix`), ``updates`` encoded Update fields, ``deletes`` relative Path bytes.
    """
    body = ts_field + prefix + b"".join(updates)
    if deletes:
        body += b"".join(b"\x2a" + varint(len(d)) + d for d in deletes)
    return b"\x0a" + varint(len(body)) + body


class LeafCodec:
    """The cached bytes of one leaf path: ``head(n) + TypedValue`` is a complete Update field."""

    __slots__ = ("_field", "_heads", "fast", "memo", "path")

    def __init__(self, path: bytes) -> None:
        self.path = path
        self._field = b"\x0a" + varint(len(path)) + path + b"\x1a"
        self._heads: dict[int, bytes] = {}
        #: Complete Update fields of string-typed values, by encoding and raw view value.
        self.memo: dict[Encoding, dict[Any, bytes]] = {e: {} for e in Encoding}
        #: ``fast[len(vb)] + vb`` is the Update field of a uint_val whose varint is ``vb``.
        self.fast = [b""] + [self.head(n + 1) + b"\x18" for n in range(1, 11)]

    def head(self, value_len: int) -> bytes:
        """Update tag, length, path and TypedValue tag+length for a TypedValue of that size."""
        head = self._heads.get(value_len)
        if head is None:
            lv = varint(value_len)
            head = b"\x22" + varint(len(self._field) + len(lv) + value_len) + self._field + lv
            self._heads[value_len] = head
        return head

    def update(self, typed_value: bytes) -> bytes:
        """The Update field carrying this encoded TypedValue."""
        return self.head(len(typed_value)) + typed_value
