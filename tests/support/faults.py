"""Real storage faults for the "never loses a row" tests: a full disk, a read-only database, a crash.

Nothing here is simulated: the faults are the kernel's and PostgreSQL's own (root is needed for
the mount; everything else runs against a real cluster, the test's ``private_store`` for anything
cluster-wide).

* :func:`small_filesystem`: a size-limited tmpfs at a fresh directory (skips the test when
  mounting is not permitted).
* :func:`tablespace_on`: a tablespace there, with the new (and existing) TimescaleDB chunks of
  the given hypertables in it; :func:`fill` / :func:`free` make its filesystem full on demand, so
  that the next INSERT that must extend a relation file fails with ``DiskFullError`` (SQLSTATE
  53100). WAL stays in the data directory, so only relation extension fails: inserts that fit
  in pages already allocated still succeed, and commits are still logged.
* :func:`read_only`: ``default_transaction_read_only`` for every session, existing pooled
  connections included (``ReadOnlySQLTransactionError``, 25006); :func:`terminate_sessions`.
* :func:`kill_postgres`: SIGKILL the postmaster (crash recovery at the next start).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from store.pgserver import EmbeddedStore
from store.pgsystem import server_account

FILLER_PREFIX = ".fabricmon-filler-"
_CHUNK = 1 << 20
_NOT_PERMITTED = re.compile(r"permission denied|not permitted|only root|must be superuser", re.IGNORECASE)


# --- a small filesystem ---------------------------------------------------------------------


@contextlib.contextmanager
def small_filesystem(size: int | str, *, prefix: str = "fabricmon-smallfs-") -> Iterator[Path]:
    """A tmpfs of ``size`` (bytes, or mount's ``4m`` / ``512k``) mounted at a fresh directory.

    The mount is mode 755 (the ``postgres`` account may pass through). On the way out it is
    unmounted (lazily if still busy: a server that still holds a file open) and the directory
    removed. Skips the test when this process may not mount.
    """
    where = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    where.chmod(0o755)
    try:
        _mount(where, str(size))
    except BaseException:
        where.rmdir()
        raise
    try:
        yield where
    finally:
        _unmount(where)
        with contextlib.suppress(OSError):
            where.rmdir()


def _mount(where: Path, size: str) -> None:
    argv = ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError:
        pytest.skip("no mount(8) here: cannot make a small filesystem")
    if done.returncode != 0:
        reason = done.stderr.strip() or f"mount exited {done.returncode}"
        if os.geteuid() != 0 or _NOT_PERMITTED.search(reason):
            pytest.skip(f"cannot mount a tmpfs here: {reason}")
        raise RuntimeError(f"mount -t tmpfs at {where} failed: {reason}")


def _unmount(where: Path) -> None:
    done = subprocess.run(["umount", str(where)], capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0 and _mounted(where):
        lazy = subprocess.run(["umount", "-l", str(where)], capture_output=True, text=True, timeout=30, check=False)
        if lazy.returncode != 0:
            raise RuntimeError(f"cannot unmount {where}: {done.stderr.strip()}; {lazy.stderr.strip()}")


def _mounted(where: Path) -> bool:
    target = str(where.resolve())
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        return any(line.split()[1] == target for line in mounts if len(line.split()) > 1)


def free_bytes(directory: Path) -> int:
    """Bytes an unprivileged writer may still put on ``directory``'s filesystem."""
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


def fill(directory: Path, leave_bytes: int = 0) -> Path:
    """Fill ``directory``'s filesystem with a filler file so that at most ~``leave_bytes`` stay free.

    What stays is ``leave_bytes`` rounded up to the block size (a page on tmpfs). Returns the
    filler; :func:`free` removes it (or every filler in a directory). The file is allocated, not
    sparse, so the space is really gone.
    """
    path = directory / f"{FILLER_PREFIX}{uuid.uuid4().hex[:8]}"
    block = os.statvfs(directory).f_frsize
    want = (free_bytes(directory) - leave_bytes) // block * block
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        if want > 0:
            try:
                os.posix_fallocate(fd, 0, want)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                _write_zeros(fd, want)  # a filesystem without fallocate
    finally:
        os.close(fd)
    return path


def _write_zeros(fd: int, size: int) -> None:
    zeros = bytes(_CHUNK)
    left = size
    while left > 0:
        try:
            left -= os.write(fd, zeros[: min(left, _CHUNK)])
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                return
            raise


def free(target: Path) -> int:
    """Remove a filler file, or every filler in a directory; the bytes given back."""
    paths = [target] if target.is_file() else sorted(target.glob(f"{FILLER_PREFIX}*"))
    freed = 0
    for path in paths:
        freed += path.stat().st_blocks * 512
        path.unlink()
    return freed


# --- a tablespace there ---------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _connection(target: Any) -> AsyncIterator[Any]:
    """A connection from a DSN (opened and closed here) or from a pool (borrowed)."""
    if isinstance(target, str):
        conn = await asyncpg.connect(target, timeout=30)
        try:
            yield conn
        finally:
            await conn.close()
    else:
        async with target.acquire() as conn:
            yield conn


@contextlib.asynccontextmanager
async def tablespace_on(
    target: Any, directory: Path, tables: Sequence[str] = ("port_counters",), *, move_existing: bool = True
) -> AsyncIterator[str]:
    """A tablespace at ``directory`` holding the chunks of the hypertables ``tables``; yields its name.

    ``target``: a DSN or pool of the database whose hypertables move (its role must be a
    superuser, as the embedded store's ``fabricmon`` is). ``directory`` is created if needed and
    given to the server's account; it must be empty. New chunks go there
    (``attach_tablespace``); with ``move_existing`` so do the chunks that exist already, with
    their indexes (a chunk created before would otherwise take the current hour's rows
    elsewhere). On the way out everything in the tablespace moves back to ``pg_default`` and
    the tablespace is dropped: free the filesystem first if it is full.

    A tablespace is cluster-wide: on the shared test cluster use a ``fresh_db`` and keep the
    block short; each call makes a tablespace of its own name.
    """
    location = _location(directory).replace("'", "''")
    name = f"fm_ts_{uuid.uuid4().hex[:10]}"
    async with _connection(target) as conn:
        await conn.execute(f"CREATE TABLESPACE {name} LOCATION '{location}'")
        try:
            for table in tables:
                await conn.execute("SELECT attach_tablespace($1, $2::regclass)", name, table)
                if move_existing:
                    await _move_chunks(conn, table, name)
        except BaseException:
            await _drop_tablespace(conn, name, tables)
            raise
    try:
        yield name
    finally:
        async with _connection(target) as conn:
            await _drop_tablespace(conn, name, tables)


def _location(directory: Path) -> str:
    """Create the tablespace's directory if needed, check it is empty, give it to the server account."""
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise ValueError(f"a tablespace needs an empty directory; {directory} is not")
    server_account().chown(directory)  # PostgreSQL makes it mode 700 itself
    return str(directory.resolve())


async def _move_chunks(conn: Any, table: str, tablespace: str) -> None:
    """Move the existing chunks of a hypertable, and their indexes, into ``tablespace``."""
    for chunk in await conn.fetch("SELECT show_chunks($1::regclass)::text AS name", table):
        await _set_tablespace(conn, chunk["name"], tablespace)


async def _set_tablespace(conn: Any, relation: str, tablespace: str) -> None:
    await conn.execute(f"ALTER TABLE {relation} SET TABLESPACE {tablespace}")
    indexes = await conn.fetch(
        "SELECT indexrelid::regclass::text AS name FROM pg_index WHERE indrelid = $1::regclass", relation
    )
    for index in indexes:
        await conn.execute(f"ALTER INDEX {index['name']} SET TABLESPACE {tablespace}")


async def _drop_tablespace(conn: Any, name: str, tables: Sequence[str]) -> None:
    for table in tables:
        await conn.execute("SELECT detach_tablespace($1, $2::regclass, if_attached => true)", name, table)
    inside = await conn.fetch(
        # TOAST tables and their indexes move with their table (and may not be named)
        "SELECT c.oid::regclass::text AS name, c.relkind FROM pg_class c JOIN pg_tablespace t "
        "ON t.oid = c.reltablespace WHERE t.spcname = $1 AND c.relkind IN ('r', 'm', 'i') "
        "AND c.relnamespace <> 'pg_toast'::regnamespace ORDER BY c.relkind DESC",  # tables before indexes
        name,
    )
    for rel in inside:
        kind = "INDEX" if rel["relkind"] in (b"i", "i") else "TABLE"
        await conn.execute(f"ALTER {kind} {rel['name']} SET TABLESPACE pg_default")
    await conn.execute(f"DROP TABLESPACE {name}")


# --- a read-only database -------------------------------------------------------------------


def dsn_for(dsn: str, database: str) -> str:
    """``dsn`` pointed at another database of the same server."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + database))


Scope = Literal["cluster", "database"]


@contextlib.asynccontextmanager
async def read_only(
    admin_dsn: str, database: str | None = None, *, scope: Scope = "cluster", timeout_s: float = 15.0
) -> AsyncIterator[None]:
    """Make the database read-only for every session for the block, then writable again (also on error).

    ``scope="cluster"`` (the default; use a ``private_store``): ``ALTER SYSTEM SET
    default_transaction_read_only`` and a reload, so sessions that exist already, pooled
    connections included, get ``ReadOnlySQLTransactionError`` (25006) from their next
    transaction on, and writable ones again after the block. Every database of the cluster is
    affected. Returns once a new session sees the setting: by then the postmaster has signalled
    every backend, and each applies the reload before its next command.
    ``scope="database"``: ``ALTER DATABASE database SET ...``, which only new sessions see, so the
    database's sessions are terminated on the way in (pools reconnect, read-only) and again on the
    way out (sessions opened during the block keep the setting until they reconnect).
    A transaction already open when the block begins stays writable until it ends.
    """
    if scope == "database" and database is None:
        raise ValueError("read_only(scope='database') needs the database name")
    probe = dsn_for(admin_dsn, database) if database else admin_dsn
    await _set_read_only(admin_dsn, database, scope, on=True)
    try:
        await _await_setting(probe, "on", timeout_s)
        yield
    finally:
        await _set_read_only(admin_dsn, database, scope, on=False)
        await _await_setting(probe, "off", timeout_s)


async def _set_read_only(admin_dsn: str, database: str | None, scope: Scope, *, on: bool) -> None:
    conn = await asyncpg.connect(admin_dsn, timeout=30)
    try:
        await conn.execute("SET default_transaction_read_only = off")  # this session must write its undo
        verb = "SET default_transaction_read_only = on" if on else "RESET default_transaction_read_only"
        if scope == "cluster":
            await conn.execute(f"ALTER SYSTEM {verb}")
            await conn.execute("SELECT pg_reload_conf()")
        else:
            assert database is not None
            await conn.execute(f"ALTER DATABASE {_ident(database)} {verb}")
    finally:
        await conn.close()
    if scope == "database":
        assert database is not None
        await terminate_sessions(admin_dsn, database)


def _ident(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


async def _await_setting(dsn: str, value: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        conn = await asyncpg.connect(dsn, timeout=30)
        try:
            seen = await conn.fetchval("SELECT current_setting('default_transaction_read_only')")
        finally:
            await conn.close()
        if seen == value:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"default_transaction_read_only is still {seen!r} after {timeout_s:g}s")
        await asyncio.sleep(0.05)


async def terminate_sessions(admin_dsn: str, database: str, *, wait_ms: int = 5000) -> int:
    """End every client session of ``database`` but this one (pools reconnect); how many ended."""
    conn = await asyncpg.connect(admin_dsn, timeout=30)
    try:
        ended = await conn.fetchval(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, $2)) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
            database,
            wait_ms,
        )
    finally:
        await conn.close()
    return int(ended)


# --- a crash --------------------------------------------------------------------------------


def postmaster_pid(store: EmbeddedStore) -> int | None:
    """The pid in the store's ``postmaster.pid`` (None: no pid file)."""
    try:
        return int((store.data_dir / "postmaster.pid").read_text(encoding="utf-8").splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def kill_postgres(store: EmbeddedStore, *, wait: bool = True, timeout_s: float = 30.0) -> int:
    """SIGKILL the store's postmaster (as the OOM killer would); its pid.

    The stale ``postmaster.pid`` stays, and the next start runs crash recovery. With ``wait``,
    returns only once the process is gone from the process table (reaped, not a zombie) and the
    old shared memory segment has no process attached, the two things PostgreSQL checks before
    it starts on that data directory ("lock file already exists", "pre-existing shared memory
    block is still in use"); ``store.start()`` does not wait for them itself.
    """
    lines = (store.data_dir / "postmaster.pid").read_text(encoding="utf-8").splitlines()
    pid = int(lines[0])
    shmid = _shmid(lines)
    os.kill(pid, signal.SIGKILL)
    if wait:
        wait_gone(pid, shmid, timeout_s=timeout_s)
    return pid


def wait_gone(pid: int, shmid: int | None = None, *, timeout_s: float = 30.0) -> float:
    """Block until ``pid`` left the process table and segment ``shmid`` has nobody attached; seconds waited.

    A killed process stays a zombie until its parent reaps it; the postmaster's parent is PID 1,
    which here (the sandbox's ``process_api``) takes about a second and a half to do so.
    """
    began = time.monotonic()
    while _exists(pid) or (shmid is not None and _attached(shmid)):
        if time.monotonic() - began > timeout_s:
            raise TimeoutError(
                f"process {pid} still in the process table ({_proc_state(pid)}) or shared memory "
                f"{shmid} still attached after {timeout_s:g}s"
            )
        time.sleep(0.02)
    return time.monotonic() - began


def _shmid(pidfile_lines: list[str]) -> int | None:
    """The System V shared memory id of line 7 of postmaster.pid (``key id``)."""
    try:
        return int(pidfile_lines[6].split()[1])
    except (IndexError, ValueError):
        return None


def _exists(pid: int) -> bool:
    """Whether ``pid`` is in the process table at all (a zombie included)."""
    return Path(f"/proc/{pid}").exists()


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def _attached(shmid: int) -> bool:
    """Whether the System V segment ``shmid`` exists with processes attached."""
    try:
        lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        if len(fields) > 6 and fields[1] == str(shmid):
            return int(fields[6]) > 0
    return False
