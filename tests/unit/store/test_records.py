"""Unsigned 64-bit counters as PostgreSQL bigints (store/records.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.records import I64_MAX, U64, from_int8, to_int8, to_int8s

#: Values around every edge: negative, 2^63 - 1 / 2^63, 2^64 - 1 / 2^64, and anything between.
_EDGES = st.sampled_from([-1, 0, I64_MAX, I64_MAX + 1, U64 - 1, U64, 1 << 200])
_VALUES = st.one_of(_EDGES, st.integers(-10, U64 + 10))


@given(st.lists(_VALUES, max_size=20))
def test_a_list_at_once_is_each_value_one_by_one(values: list[int]) -> None:
    try:
        want: list[int] | None = [to_int8(v) for v in values]
    except ValueError:
        want = None
    if want is None:
        with pytest.raises(ValueError, match="not an unsigned 64-bit value"):
            to_int8s(values)
    else:
        got = to_int8s(tuple(values))
        assert got == want and type(got) is list
        assert [from_int8(v) for v in got] == values
