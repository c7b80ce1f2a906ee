"""The on-disk spool: FIFO, bounded (oldest dropped and counted), kept across restarts."""

from __future__ import annotations

import pickle
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from store.spool import Spool


def test_fifo_and_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10_000_000)
    spool.push([(1, "a"), (2, "b")])
    spool.push([(3, "c")])
    again = Spool(tmp_path, max_bytes=10_000_000)  # a restarted process finds both, in order
    assert len(again) == 2
    assert again.peek() == [(1, "a"), (2, "b")]
    again.pop()
    again.push([(4, "d")])
    assert again.peek() == [(3, "c")]
    again.pop()
    assert again.peek() == [(4, "d")]
    again.pop()
    assert again.peek() is None and again.stats.bytes == 0
    assert again.stats.rows_replayed == 4


def test_over_the_limit_drops_the_oldest_and_counts(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=2_000)
    for i in range(50):
        spool.push([(i, "x" * 50)] * 3)
    assert spool.stats.bytes <= 2_000
    assert spool.stats.rows_dropped == 150 - 3 * len(spool)
    first = spool.peek()
    assert first is not None and first[0][0] == 50 - len(spool)


def test_a_half_written_batch_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "000000000007.tmp").write_bytes(b"\x80\x05garbage")
    spool = Spool(tmp_path, max_bytes=1_000_000)
    assert len(spool) == 0 and not list(tmp_path.glob("*.tmp"))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(), min_size=1, max_size=5), max_size=20))
def test_replays_exactly_what_was_pushed(batches: list[list[int]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        spool = Spool(Path(d), max_bytes=1 << 30)
        for batch in batches:
            spool.push([(x,) for x in batch])
        out: list[list[int]] = []
        while (got := spool.peek()) is not None:
            out.append([x for (x,) in got])
            spool.pop()
        assert out == batches


def test_rows_waiting_are_counted_across_restarts_and_old_names(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10_000_000)
    spool.push([(1,), (2,), (3,)])
    spool.push([(4,)])
    assert spool.stats.rows == 4
    # A segment written before names carried the row count is counted from its content.
    (tmp_path / "000000000007.batch").write_bytes(pickle.dumps([(5,), (6,)]))
    again = Spool(tmp_path, max_bytes=10_000_000)
    assert again.stats.rows == 6 and len(again) == 3
    again.pop()
    assert again.stats.rows == 3
    again.push([(7,)])  # numbered after the old-style segment
    assert again.peek() == [(4,)]
    again.pop()
    assert again.peek() == [(5,), (6,)]
    again.pop()
    assert again.peek() == [(7,)] and again.stats.rows == 1
    again.pop()
    assert again.stats.rows == 0
