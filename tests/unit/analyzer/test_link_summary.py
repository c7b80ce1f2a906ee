"""Which rolled buckets link health's summary reads from the rollup (analyzer/link_summary.py): the
latest run of consecutive ones; the rows outside it are read as rows. Buckets start at multiples of
10 minutes (store/link_rollup.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from analyzer.link_summary import latest_run
from store.link_rollup import BUCKET, floor_bucket

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def test_the_latest_run_of_consecutive_buckets_is_read_from_the_rollup() -> None:
    b = [T0 + k * BUCKET for k in (0, 1, 3, 4, 5)]
    assert latest_run(b) == (T0 + 3 * BUCKET, T0 + 6 * BUCKET)
    assert latest_run([]) is None
    assert latest_run(b[:1]) == (T0, T0 + BUCKET)


@given(st.sets(st.integers(0, 60), max_size=40))
def test_the_run_is_consecutive_rolled_ends_at_the_latest_and_cannot_grow(ks: set[int]) -> None:
    b = [T0 + k * BUCKET for k in sorted(ks)]
    run = latest_run(b)
    if not b:
        assert run is None
        return
    assert run is not None
    lo, hi = run
    assert hi == b[-1] + BUCKET and lo - BUCKET not in b
    n = (hi - lo) // BUCKET
    assert all(lo + i * BUCKET in b for i in range(n))


@given(st.integers(0, 10**9))
def test_a_bucket_starts_on_a_multiple_of_its_width_and_holds_its_time(seconds: int) -> None:
    t = datetime(2020, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds, microseconds=seconds % 997)
    b = floor_bucket(t)
    assert b <= t < b + BUCKET
    assert (b - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() % BUCKET.total_seconds() == 0
