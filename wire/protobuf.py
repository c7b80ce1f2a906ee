"""Protobuf wire format: the base-128 varint and the range of a ``uint64`` field.

The collector's decoder builds a packed-varint message around raw bytes with :func:`varint`;
the simulator builds whole responses from cached pieces with it. ``U64_MAX`` is the largest
value a ``uint64`` holds; the modulus of 64-bit counter arithmetic, 2^64, is
``store.records.U64``.
"""

from __future__ import annotations

U64_MAX = (1 << 64) - 1

_SHORT = [bytes((n,)) for n in range(128)]


def varint(value: int) -> bytes:
    """One unsigned LEB128 varint (the protobuf wire form of a uint64 / length); ``value`` >= 0."""
    if value < 0x80:
        return _SHORT[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
