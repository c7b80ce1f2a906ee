"""A bounded on-disk spool: batches a writer could not store while the database was away.

One directory per table; one file per batch, named by a sequence number so replay keeps the
order batches were spooled in, and by its row count (``000000000042-5000.batch``), so the rows
waiting are known without reading the files back (the collector's heartbeat reports them). The
spool survives restarts: a writer that starts with batches on disk replays them first.

Nothing on disk is trusted to run, or trusted at all: a batch is data (JSON), checksummed, and
written atomically (temp file, fsync, rename, fsync of the directory), so a crash never leaves
half a batch. A batch that cannot be read back (a flipped bit, truncation, an unknown version,
garbage) is moved to the quarantine directory with a ``.reason`` file beside it, counted and
never replayed: it cannot block the batches behind it. The directories are ours alone (mode
0700); one that others can write is refused with :class:`~store.errors.SpoolError`.

Past ``max_bytes`` the OLDEST batches are dropped (recent telemetry is worth more during an
incident) and the dropped rows are counted: the only way the spool loses data. A disk that
refuses a batch (full, read-only, failing) makes :meth:`Spool.push` return False; the caller
keeps its rows and decides.

The batch format (version 2, and reading version 1) is :mod:`store.spool_format`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from store.errors import SpoolError
from store.spool_format import BadBatch, SpoolBatch, UnreadableBatch, encode, read

log = logging.getLogger(__name__)

_SUFFIX = ".batch"
_NAME = re.compile(r"(?P<seq>\d{12})(?:-(?P<rows>\d+))?\.batch")


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
    #: Batches that could not be read back, moved aside and never replayed, and their rows.
    batches_quarantined: int = 0
    rows_quarantined: int = 0
    #: Pushes the disk refused (full, read-only, I/O error); their rows stayed with the caller.
    write_errors: int = 0


def prepare_directory(path: Path) -> Path:
    """Create ``path`` (and the parents it lacks) with mode 0700, or check the one there is ours alone.

    Raises SpoolError for a path that is not a directory, is owned by another user than ours,
    or is writable by group or others: whoever can write it could forge or remove batches.
    """
    missing: list[Path] = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            continue  # made meanwhile by someone else: the check below judges it
        except OSError as exc:
            raise SpoolError(f"cannot create spool directory {d}: {exc.strerror}") from exc
        d.chmod(0o700)  # mkdir's mode went through the umask
    try:
        st = path.stat()
    except OSError as exc:
        raise SpoolError(f"spool directory {path}: {exc.strerror}") from exc
    if not stat.S_ISDIR(st.st_mode):
        raise SpoolError(f"spool directory {path} is not a directory")
    if st.st_uid != (euid := os.geteuid()):
        raise SpoolError(
            f"spool directory {path} is owned by uid {st.st_uid}, not by this process's uid {euid}; "
            f"fix: chown {euid} {path} && chmod 700 {path}, or configure another spool_dir"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o002:
        raise SpoolError(
            f"spool directory {path} has mode {mode:04o}: others can write it and forge batches; fix: chmod 700 {path}"
        )
    if mode & 0o077:  # ours, open to our group (an earlier version under umask 002 made it 0775)
        try:
            path.chmod(0o700)
        except OSError as exc:
            raise SpoolError(f"spool directory {path} has mode {mode:04o}; chmod 700 failed: {exc.strerror}") from exc
        log.warning("spool directory %s had mode %04o: tightened to 0700 (the spool is ours alone)", path, mode)
    return path


class Spool:
    """FIFO of row batches in ``directory``, at most ``max_bytes`` on disk.

    Bad batches go to ``quarantine`` (default: ``<directory's parent>/quarantine/<directory's name>``).
    """

    def __init__(self, directory: Path, max_bytes: int, quarantine: Path | None = None) -> None:
        self.directory = prepare_directory(directory)
        self.quarantine = prepare_directory(
            quarantine if quarantine is not None else directory.parent / "quarantine" / directory.name
        )
        self.max_bytes = max_bytes
        self.stats = SpoolStats()
        self._failing = False  # the last push failed: log the streak once
        self._cached: SpoolBatch | None = None  # the oldest batch, decoded once however often it is peeked
        self._handed: Path | None = None  # what peek() returned last, for pop()
        for stale in directory.glob("*.tmp"):
            stale.unlink(missing_ok=True)
        found: list[tuple[int, Path, str | None]] = []
        for path in directory.glob(f"*{_SUFFIX}"):
            if m := _NAME.fullmatch(path.name):
                found.append((int(m["seq"]), path, m["rows"]))
            else:
                self._quarantine(path, 0, "not a spool batch name")
        found.sort()
        self._segments: list[Path] = [path for _, path, _ in found]
        self._sizes: dict[Path, int] = {p: p.lstat().st_size for p in self._segments}  # a link is not followed
        self._rows: dict[Path, int] = {p: int(n) if n else _count(p) for _, p, n in found}
        self._next = found[-1][0] + 1 if found else 0
        self.stats.batches = len(self._segments)
        self.stats.bytes = sum(self._sizes.values())
        self.stats.rows = sum(self._rows.values())
        if self._segments:
            log.warning("spool %s: %d batch(es) from an earlier run will be replayed", directory, len(self._segments))

    def __len__(self) -> int:
        return len(self._segments)

    def push(self, rows: Sequence[Sequence[Any]], columns: Sequence[str] | None = None) -> bool:
        """Append a batch (rows in ``columns``, if given); drop the oldest batches past the limit.

        True once the batch is durably on disk. False when the disk refused it (full, read-only,
        failing): nothing of it stays on disk and the caller keeps its rows. Values the spool
        cannot store raise TypeError, rows of different lengths ValueError: programming errors.
        """
        if not rows:
            return True
        data = encode(rows, columns)
        path = self.directory / f"{self._next:012d}-{len(rows)}{_SUFFIX}"
        try:
            _write_atomically(path, data)
        except OSError as exc:
            self.stats.write_errors += 1
            if self._failing:
                log.debug("spool %s still not writable: %s", self.directory, exc)
            else:
                self._failing = True
                log.error("spool %s cannot take a batch of %d rows: %s", self.directory, len(rows), exc)
            return False
        if self._failing:
            self._failing = False
            log.info("spool %s writable again", self.directory)
        self._next += 1
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
        return True

    def peek(self) -> SpoolBatch | None:
        """The oldest batch that reads back, or None when empty; bad ones on the way are quarantined."""
        while self._segments:
            path = self._segments[0]
            if self._cached is None:
                try:
                    self._cached = read(path)
                except UnreadableBatch as exc:  # EIO, EMFILE...: the disk, not the batch; next round
                    log.error("spool %s: cannot read %s now (%s); retried later", self.directory, path.name, exc)
                    raise OSError(f"spool: cannot read {path}: {exc}") from exc
                except BadBatch as exc:
                    rows = self._rows[path]
                    self._forget(path)
                    self._quarantine(path, rows, str(exc))
                    continue
                self._recount(path, len(self._cached.rows))
            self._handed = path
            return self._cached
        return None

    def quarantine_batch(self, reason: str) -> None:
        """Move the batch peek() returned to quarantine: it reads back, but is refused for good."""
        path = self._handed or (self._segments[0] if self._segments else None)
        self._handed = None
        if path is None or path not in self._rows:
            return
        rows = self._rows[path]
        self._forget(path)
        self._quarantine(path, rows, reason)

    def pop(self) -> None:
        """Forget the batch peek() returned, once it is stored (without a peek: the oldest)."""
        path = self._handed or (self._segments[0] if self._segments else None)
        self._handed = None
        if path is not None and path in self._rows:  # not dropped over the limit meanwhile
            self.stats.rows_replayed += self._rows[path]
            self._remove(path)

    def _recount(self, path: Path, rows: int) -> None:
        """Trust a batch's content over its name (a renamed file) for the rows waiting."""
        self.stats.rows += rows - self._rows[path]
        self._rows[path] = rows

    def _forget(self, path: Path) -> None:
        self._segments.remove(path)
        self.stats.bytes -= self._sizes.pop(path, 0)
        self.stats.rows -= self._rows.pop(path, 0)
        self.stats.batches -= 1
        if self._cached is not None and self._cached.name == path.name:
            self._cached = None

    def _remove(self, path: Path) -> None:
        self._forget(path)
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            log.error("spool %s: cannot delete %s, replayed again after a restart: %s", self.directory, path, exc)

    def _quarantine(self, path: Path, rows: int, reason: str) -> None:
        """Move a bad batch aside with a ``.reason`` file, count it, log it once."""
        self.stats.batches_quarantined += 1
        self.stats.rows_quarantined += rows
        dest, n = self.quarantine / path.name, 0
        while dest.exists() or _reason_path(dest).exists():  # a name used before, by an earlier run
            n += 1
            dest = self.quarantine / f"{path.name}.{n}"
        try:
            shutil.move(path, dest)
        except OSError as exc:
            log.error("spool: skipped bad batch %s (%d rows: %s), cannot quarantine it: %s", path, rows, reason, exc)
            return
        try:
            _reason_path(dest).write_text(f"{reason}\nfrom: {path}\nat: {datetime.now(UTC).isoformat()}\n")
            _fsync_directory(self.quarantine)
            _fsync_directory(path.parent)
        except OSError as exc:
            log.error("spool: quarantined %s to %s, but its .reason file could not be written: %s", path, dest, exc)
        log.error("spool: quarantined %s (%d rows, not replayed) to %s: %s", path, rows, dest, reason)


def _reason_path(batch: Path) -> Path:
    return batch.with_name(batch.name + ".reason")


def _count(path: Path) -> int:
    """A batch's rows, for a batch named before names carried the count; 0 if it does not read back."""
    try:
        return len(read(path).rows)
    except BadBatch:  # peek() meets it and quarantines it
        return 0


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` all or nothing, durably; on OSError nothing of it is left."""
    tmp = path.with_suffix(".tmp")
    renamed = False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with open(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        renamed = True
        _fsync_directory(path.parent)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if renamed:  # not durable: take it back, so the caller's rows are never in two places
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
        raise


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
