"""Python's garbage collector in a process that holds a whole fabric's port state.

The collector keeps millions of long-lived objects (every port's baselines, status runs, the
decoders' rows) and allocates a few short-lived ones per counter value, almost all freed by
reference counting. With CPython's default thresholds (700, 10, 10), a full collection walks
every long-lived object, and the stream of medium-lived ones (records waiting for the next COPY)
triggers one every few seconds: measured at 16,384 GPUs, one process at 30 s, 17.6 % of the
collector's CPU went to collections, 8.3 of its 11.2 s to 20 full ones of ~0.42 s each
(docs/benchmarks.md).

So: a larger first generation (fewer collections, fewer records promoted while they wait for
their COPY), and once the fabric's state is built, one full collection and ``gc.freeze()``: what
is alive then is moved out of the collector's sight for good, and later full collections walk only
what came after. Frozen objects are still freed by reference counting; a reference cycle among
them is not. Most of what is frozen is the port state the process keeps for life, but not all:
the streams' tasks, connections and frames of that moment too, so each reconnect may leave one
such cycle behind, once per object frozen (bounded: nothing frozen later). Accepted for a
collector; the library (tests, the demo, ``fabricmon run``) keeps CPython's defaults.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator

from fabric.tasks import stop_task

log = logging.getLogger(__name__)

#: Allocations between first-generation collections (CPython's default: 700).
GEN0_THRESHOLD = 50_000


def tune() -> None:
    """Raise the first generation's threshold (the others keep CPython's defaults)."""
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)


def freeze() -> float:
    """One full collection, then freeze what survived it; the seconds it took."""
    t0 = time.perf_counter()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - t0


async def freeze_when_settled(after_s: float) -> None:
    """Wait ``after_s`` (the fabric's first readings in, its state built), then :func:`freeze`."""
    await asyncio.sleep(after_s)
    took = freeze()
    log.info("froze %d long-lived objects out of the garbage collector's walks (%.2f s)", gc.get_freeze_count(), took)


@contextlib.asynccontextmanager
async def tuned(settled_s: float) -> AsyncIterator[None]:
    """For a collector process's lifetime: :func:`tune` now, :func:`freeze` ``settled_s`` later;
    CPython's thresholds are back on exit (what is frozen stays frozen)."""
    before = gc.get_threshold()
    tune()
    freezer = asyncio.create_task(freeze_when_settled(settled_s), name="gc-freeze")
    try:
        yield
    finally:
        await stop_task(freezer, "the gc freeze timer", log)  # our own cancellation still propagates
        gc.set_threshold(*before)


def settle_time(interval_s: float) -> float:
    """When a collector's state is built: two sampling intervals in (every switch answered), at
    least 30 s."""
    return max(30.0, 2 * interval_s)
