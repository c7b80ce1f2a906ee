"""Leader election for an analyzer pair: one session-level PostgreSQL advisory lock.

Every ``fabricmon analyze`` (and ``fabricmon run``) of one database takes part. The one whose
session holds ``pg_try_advisory_lock(LOCK_KEY)`` leads: it alone evaluates, sends webhooks,
pushes to Alertmanagers and drives the schedulers. The lock lives on a connection of its own,
acquired from the pool once and kept (never returned while it holds the lock), so the lock is
exactly as alive as that session:

* **A standby** retries ``pg_try_advisory_lock`` every :attr:`ElectionTiming.retry_s`
  (``interval_s / 2``, at least once a second).
* **The leader** checks its session as often (``SELECT 1``, bounded by ``check_timeout_s``; a
  check that overruns terminates the connection). The service also asks :meth:`confirm` before
  every round, which re-checks when the last check is older than ``retry_s``, so a leader
  resumed after a freeze does not start a round on a lease it no longer has. A failed check
  ends leadership at once (WARNING ``lost leadership: <why>``); the connection is terminated,
  never returned holding the lock, and the next retry tries to lead again.
* **A leader that dies** (kill -9, OOM, a crashed host) drops its TCP connection; PostgreSQL
  ends the backend and frees the lock as soon as it notices, at once for a closed socket. The
  standby leads at its next retry: within ``retry_s`` plus its first round.
* **A leader that freezes** (SIGSTOP, a VM paused, a process hung) keeps its socket open, and its
  kernel still acknowledges TCP keepalives and data, so neither keepalives nor
  ``tcp_user_timeout`` end its session. ``idle_session_timeout`` does (PostgreSQL >= 14): the lock
  session sends a query every ``retry_s``, and a session silent for ``idle_timeout_s``
  (``max(interval_s, 3 s)``) is closed by the server. A frozen leader is therefore replaced within
  ``idle_timeout_s + retry_s`` plus the new leader's first round. On older servers there is no
  such bound (the lock is held until the process resumes or dies); a warning says so at start.
* **A leader frozen inside a transaction** (its alert sync holds the firing alerts' row locks)
  would block its successor's alert sync: that transaction sets
  ``idle_in_transaction_session_timeout`` to ``idle_timeout_s`` (``SET LOCAL``, in
  :func:`analyzer.alerts.lock_firing`), so the server ends it, and its locks go with the lock
  session.
* **A dead host or a partition** is bounded the same way; the session's keepalives
  (``tcp_keepalives_idle = ceil(idle_timeout_s)``, 1 s between 3 probes) and ``tcp_user_timeout``
  are the fallback where ``idle_session_timeout`` is missing.

The lock is per database (PostgreSQL scopes advisory locks by database), and one database holds
one fabric: one leader per fabric. Session locks need session pooling: a DSN through PgBouncer in
transaction mode would lose the lock between statements.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import os
import socket
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from fabric.waits import wait_event
from store.db import Connection, Pool

log = logging.getLogger(__name__)

T = TypeVar("T")

LOCK_NAME = "fabricmon-analyzer"


def lock_key(name: str) -> int:
    """The advisory lock key of ``name``: the first 8 bytes of its SHA-256 as a signed bigint."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


#: The analyzers' lock (store/migrate.py's key, 0x6661627269636D6F, is another one).
LOCK_KEY = lock_key(LOCK_NAME)

#: PostgreSQL 14 introduced ``idle_session_timeout``, the only bound on a frozen leader.
IDLE_TIMEOUT_SINCE = 14


@dataclass(frozen=True, slots=True)
class ElectionTiming:
    """How often the election acts and the lock session's server-side timeouts."""

    #: A standby's retry period, the leader's check period, and how long a check stays trusted.
    retry_s: float
    #: A check (or lock attempt) that takes longer terminates the lock connection.
    check_timeout_s: float
    #: The lock session's ``idle_session_timeout``: a leader silent this long loses the lock.
    idle_timeout_s: float
    keepalive_idle_s: int
    keepalive_interval_s: int
    keepalive_count: int
    user_timeout_ms: int

    @classmethod
    def for_interval(cls, interval_s: float) -> ElectionTiming:
        """The timing for an analyzer evaluating every ``interval_s``."""
        retry = float(min(interval_s / 2, 1.0))
        # A live leader queries every retry_s (at most 1 s), so 3 s of silence leaves it 2 s of
        # event-loop stall before it loses the lock by mistake; a 16K-GPU round takes < 1 s.
        idle = max(interval_s, 3.0)
        keepalive_idle = math.ceil(idle)
        return cls(
            retry_s=retry,
            check_timeout_s=float(min(max(interval_s, 1.0), 5.0)),
            idle_timeout_s=float(idle),
            keepalive_idle_s=keepalive_idle,
            keepalive_interval_s=1,
            keepalive_count=3,
            user_timeout_ms=(keepalive_idle + 3) * 1000,
        )

    def takeover_after_exit_s(self) -> float:
        """Longest a standby waits to lead after the leader's process ended (then: its first round)."""
        return self.retry_s

    def takeover_after_freeze_s(self) -> float:
        """Longest a standby waits to lead after the leader froze (PostgreSQL >= 14; then: its first round)."""
        return self.idle_timeout_s + self.retry_s


def session_settings(timing: ElectionTiming, server_major: int, identity: str) -> dict[str, str]:
    """The lock session's settings (all user-settable), for a server of major version ``server_major``."""
    settings = {
        # who holds the lock, for pg_stat_activity (at most 63 bytes are kept)
        "application_name": f"fabricmon-analyzer {identity}"[:63],
        "tcp_keepalives_idle": str(timing.keepalive_idle_s),
        "tcp_keepalives_interval": str(timing.keepalive_interval_s),
        "tcp_keepalives_count": str(timing.keepalive_count),
        "tcp_user_timeout": str(timing.user_timeout_ms),
    }
    if server_major >= IDLE_TIMEOUT_SINCE:
        settings["idle_session_timeout"] = str(math.ceil(timing.idle_timeout_s * 1000))
    return settings


def process_identity() -> str:
    """``host:pid``: the pod name in Kubernetes, a process on a host elsewhere."""
    return f"{socket.gethostname()}:{os.getpid()}"


class LeaderElection:
    """Leads while its session holds :data:`LOCK_KEY`; :meth:`start` it, :meth:`close` it.

    ``leader`` and ``transitions`` (role changes since start) are for metrics; the service waits
    on :meth:`wait_leading` and :meth:`wait_standby`.
    """

    def __init__(
        self,
        pool: Pool,
        interval_s: float,
        *,
        key: int = LOCK_KEY,
        identity: str | None = None,
        timing: ElectionTiming | None = None,
    ) -> None:
        self._pool = pool
        self.key = key
        self.identity = identity or process_identity()
        self.timing = timing or ElectionTiming.for_interval(interval_s)
        self.transitions = 0
        self._conn: Connection | None = None
        self._leading = asyncio.Event()
        self._standby = asyncio.Event()
        self._standby.set()
        self._closing = asyncio.Event()
        self._lock = asyncio.Lock()  # one operation at a time on the lock connection
        self._confirmed_at = -math.inf
        self._task: asyncio.Task[None] | None = None
        self._told_standby = False
        self._unavailable = False

    @property
    def leader(self) -> bool:
        """Whether this process leads now."""
        return self._leading.is_set()

    def start(self) -> None:
        """Start taking part (idempotent): the first attempt to lead is made at once."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="leader-election")

    async def close(self) -> None:
        """Stop taking part and give the lock up (the standby leads at its next retry).

        The loop is not cancelled but told to stop, so a connection being opened is finished
        and returned (asyncpg leaks one cancelled mid-connect: MagicStack/asyncpg#467)."""
        if self._task is None:
            return
        self._closing.set()
        try:
            await self._task
        finally:
            self._task = None

    async def wait_leading(self) -> None:
        """Return once this process leads."""
        await self._leading.wait()

    async def wait_standby(self) -> None:
        """Return once this process does not lead (at once if it does not)."""
        await self._standby.wait()

    async def confirm(self) -> bool:
        """Whether this process still leads, checked again if the last check is older than ``retry_s``."""
        if not self.leader:
            return False
        if asyncio.get_running_loop().time() - self._confirmed_at <= self.timing.retry_s:
            return True
        async with self._lock:
            if self.leader and asyncio.get_running_loop().time() - self._confirmed_at > self.timing.retry_s:
                await self._check()
        return self.leader

    async def _run(self) -> None:
        try:
            while not self._closing.is_set():
                try:
                    async with self._lock:
                        await self._step()
                except Exception:  # a bug must not leave a leader that stopped checking its lock
                    log.exception("leader election: unexpected failure")
                    await self._discard()
                    self._lose("unexpected failure of the election (logged above)")
                await wait_event(self._closing, self.timing.retry_s)
        finally:
            await self._release()

    async def _step(self) -> None:
        if self._conn is None:
            try:
                self._conn = await self._open()
            except Exception as exc:  # the database is down, or refuses: try again next time
                self._database_unavailable(exc)
                return
        if self.leader:
            await self._check()
        else:
            await self._try_lock()

    async def _open(self) -> Connection:
        conn = await self._pool.acquire()  # no acquire timeout (see close); connect_timeout_s bounds it
        try:
            major = conn.get_server_version().major
            settings = session_settings(self.timing, major, self.identity)
            await self._guarded(
                conn,
                conn.execute(
                    "SELECT set_config(name, value, false) FROM unnest($1::text[], $2::text[]) AS s(name, value)",
                    list(settings),
                    list(settings.values()),
                ),
            )
        except BaseException:
            await self._drop(conn)
            raise
        if major < IDLE_TIMEOUT_SINCE:
            log.warning(
                "leader election: PostgreSQL %d has no idle_session_timeout; a frozen leader keeps the lock "
                "until it resumes or dies",
                major,
            )
        return conn

    async def _try_lock(self) -> None:
        conn = self._conn
        assert conn is not None
        try:
            got = await self._guarded(conn, conn.fetchval("SELECT pg_try_advisory_lock($1)", self.key))
        except Exception as exc:
            await self._discard()
            self._database_unavailable(exc)
            return
        self._unavailable = False
        if got:
            self._confirmed_at = asyncio.get_running_loop().time()
            self._become(leader=True)
            log.info("leading (%s holds the analyzer lock)", self.identity)
        elif not self._told_standby:
            self._told_standby = True
            log.info("standby: another analyzer leads; trying every %.2g s", self.timing.retry_s)

    async def _check(self) -> None:
        conn = self._conn
        if conn is None:
            self._lose("the lock connection is gone")
            return
        try:
            await self._guarded(conn, conn.fetchval("SELECT 1"))
        except Exception as exc:
            await self._discard()
            self._lose(_why(exc, self.timing.check_timeout_s))
            return
        self._confirmed_at = asyncio.get_running_loop().time()

    async def _guarded(self, conn: Connection, op: Awaitable[T]) -> T:
        """``op`` on ``conn``, the connection terminated if it overruns ``check_timeout_s``: a
        terminated session fails the await at once, and the server frees what it held."""
        fired = False

        def expire() -> None:
            nonlocal fired
            fired = True
            _terminate(conn)

        handle = asyncio.get_running_loop().call_later(self.timing.check_timeout_s, expire)
        try:
            return await op
        except Exception as exc:
            if fired:
                raise TimeoutError(f"no answer within {self.timing.check_timeout_s:g} s") from exc
            raise
        finally:
            handle.cancel()

    def _become(self, *, leader: bool) -> None:
        if leader == self.leader:
            return
        self.transitions += 1
        self._told_standby = False
        if leader:
            self._standby.clear()
            self._leading.set()
        else:
            self._leading.clear()
            self._standby.set()

    def _lose(self, why: str) -> None:
        if self.leader:
            self._become(leader=False)
            log.warning("lost leadership: %s", why)

    def _database_unavailable(self, exc: BaseException) -> None:
        if not self._unavailable:
            self._unavailable = True
            log.warning("leader election: database unavailable, retrying: %s", _why(exc, self.timing.check_timeout_s))

    async def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._drop(conn)

    async def _drop(self, conn: Any) -> None:
        """Terminate ``conn`` (it may hold the lock) and hand its slot back to the pool."""
        _terminate(conn)
        try:
            async with asyncio.timeout(2.0):
                await self._pool.release(conn)
        except Exception as exc:  # terminated: its slot comes back when the pool notices
            log.debug("leader election: releasing a terminated connection: %s", exc)

    async def _release(self) -> None:
        """Give the lock up on the way out: unlock and return the connection, or terminate it."""
        conn, self._conn = self._conn, None
        was_leader = self.leader
        self._become(leader=False)
        if conn is None:
            return
        try:
            if was_leader:
                await self._guarded(conn, conn.fetchval("SELECT pg_advisory_unlock($1)", self.key))
            async with asyncio.timeout(self.timing.check_timeout_s):
                await self._pool.release(conn)
        except Exception as exc:
            log.debug("leader election: could not release the lock connection cleanly: %s", exc)
            await self._drop(conn)
        if was_leader:
            log.info("stopped leading: the analyzer lock is released")


def _terminate(conn: Any) -> None:
    """Close ``conn`` at once. A pooled connection the server closed is already detached from its
    proxy (asyncpg returns its slot to the pool), and the proxy then refuses every call."""
    with contextlib.suppress(Exception):
        conn.terminate()


def _why(exc: BaseException, timeout_s: float) -> str:
    """Why the lock connection failed, in words for the log."""
    if isinstance(exc, TimeoutError):
        return f"the lock connection did not answer within {timeout_s:g} s"
    if "released back to the pool" in str(exc):  # asyncpg's proxy of a connection the server closed
        return "the database closed the lock session (restart, failover, pg_terminate_backend or idle_session_timeout)"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


__all__ = [
    "LOCK_KEY",
    "LOCK_NAME",
    "ElectionTiming",
    "LeaderElection",
    "lock_key",
    "process_identity",
    "session_settings",
]
