"""The shared protobuf wire pieces: varints as the protobuf runtime writes them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2

from wire.protobuf import U64_MAX, varint


@given(st.integers(min_value=0, max_value=U64_MAX))
def test_varint_matches_protobuf(value: int) -> None:
    # TypedValue{uint_val (field 3, wire type 0)}: one tag byte, then the value's varint.
    assert varint(value) == gnmi_pb2.TypedValue(uint_val=value).SerializeToString()[1:]


def test_varint_edges() -> None:
    assert varint(0) == b"\x00" and varint(0x7F) == b"\x7f" and varint(0x80) == b"\x80\x01"
    assert varint(U64_MAX) == b"\xff" * 9 + b"\x01"
    assert U64_MAX == 2**64 - 1
