"""A bounded on-disk spool: batches a writer could not store while the database was away.

One directory per table; one file per batch, named by a sequence number so replay keeps the
order batches were spooled in, and by its row count (``000000000042-5000.batch``), so the rows
waiting are known without reading the files back (the collector's heartbeat reports them).
Files are written to a temp name and renamed, so a crash never leaves half a batch. The spool
survives restarts: a writer that starts with segments on disk replays them first. Past
``max_bytes`` the OLDEST batches are dropped (recent telemetry is worth more during an
incident) and the dropped rows are counted: the only way data is lost.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_SUFFIX = ".batch"


@dataclass(slots=True)
class SpoolStats:
    """For /metrics."""

    batches: int = 0
    bytes: int = 0
    rows_spooled: int = 0
    rows_replayed: int = 0
    rows_dropped: int = 0
    #: Rows on disk now, waiting to be replayed.
    rows: int = 0


class Spool:
    """FIFO of row batches in ``directory``, at most ``max_bytes`` on disk."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.stats = SpoolStats()
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.tmp"):
            stale.unlink(missing_ok=True)
        self._segments: list[Path] = sorted(directory.glob(f"*{_SUFFIX}"))
        self._sizes: dict[Path, int] = {p: p.stat().st_size for p in self._segments}
        self._rows: dict[Path, int] = {p: self._count(p) for p in self._segments}
        self._next = int(self._segments[-1].stem.split("-")[0]) + 1 if self._segments else 0
        self.stats.batches = len(self._segments)
        self.stats.bytes = sum(self._sizes.values())
        self.stats.rows = sum(self._rows.values())
        if self._segments:
            log.warning("spool %s: %d batch(es) from an earlier run will be replayed", directory, len(self._segments))

    def __len__(self) -> int:
        return len(self._segments)

    def push(self, rows: Sequence[Any]) -> None:
        """Append a batch; drop the oldest batches if the spool would exceed its limit."""
        data = pickle.dumps(list(rows), protocol=pickle.HIGHEST_PROTOCOL)
        path = self.directory / f"{self._next:012d}-{len(rows)}{_SUFFIX}"
        self._next += 1
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
        self._segments.append(path)
        self._sizes[path] = len(data)
        self._rows[path] = len(rows)
        self.stats.batches += 1
        self.stats.bytes += len(data)
        self.stats.rows += len(rows)
        self.stats.rows_spooled += len(rows)
        while self.stats.bytes > self.max_bytes and len(self._segments) > 1:
            oldest = self._segments[0]
            dropped = self._rows[oldest]
            self._remove(oldest)
            self.stats.rows_dropped += dropped
            log.error("spool %s full: dropped %d oldest rows", self.directory, dropped)

    def peek(self) -> list[Any] | None:
        """The oldest batch, or None when empty."""
        return self._load(self._segments[0]) if self._segments else None

    def pop(self) -> None:
        """Forget the oldest batch (after it was stored)."""
        if self._segments:
            self.stats.rows_replayed += self._rows[self._segments[0]]
            self._remove(self._segments[0])

    def _count(self, path: Path) -> int:
        """A segment's rows: from its name, or (a segment named before counts were) its content."""
        _, _, rows = path.stem.partition("-")
        if rows.isdigit():
            return int(rows)
        try:
            return len(self._load(path))
        except (OSError, EOFError, pickle.UnpicklingError):  # replay meets it and reports it; count none
            return 0

    def _load(self, path: Path) -> list[Any]:
        with path.open("rb") as f:
            rows: list[Any] = pickle.load(f)
        return rows

    def _remove(self, path: Path) -> None:
        self._segments.remove(path)
        self.stats.bytes -= self._sizes.pop(path, 0)
        self.stats.rows -= self._rows.pop(path, 0)
        self.stats.batches -= 1
        path.unlink(missing_ok=True)
