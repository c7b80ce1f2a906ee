"""Incidents pushed to Alertmanager as Prometheus pushes its alerts (``POST /api/v2/alerts``).

After each evaluation the analyzer calls :meth:`AlertmanagerPusher.push`, which returns at once.
A background reader then reads, in one query, the firing incidents and those resolved lately,
and posts them as Alertmanager alerts (:func:`analyzer.alertmanager_alerts.build_alerts`: labels,
annotations, ``startsAt``, ``endsAt``).

Every configured Alertmanager gets every push (an HA pair is listed twice and never
load-balanced: its peers deduplicate notifications), through a task of its own with its own
HTTP session and timeout, so a slow one delays no other and nothing delays the evaluation.
Each task holds at most one state to send: a newer evaluation's state replaces one not yet
sent (counted as ``superseded``) and a push in flight finishes within its timeout; nothing
queues up. Lists longer than :data:`MAX_BATCH` go in several POSTs. A read that fails (the
database away) re-sends the last state read with renewed ``endsAt``, so a database outage does
not resolve every fabric incident in Alertmanager. Failures are logged once per outage
(WARNING with the cause, INFO on recovery) and counted per Alertmanager in :class:`PushStats`,
keyed by :func:`alertmanager_key` (``host:port``: never credentials, path or query).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import aiohttp

from analyzer.actions import AffectedJob, affected_jobs
from analyzer.alertmanager_alerts import (
    MAX_BATCH,
    RESOLVED_FOR_S,
    alertmanager_key,
    batches,
    build_alerts,
    fabric_label,
    jobs_by_incident,
)
from analyzer.config import AlertmanagerConfig
from analyzer.payloads import AlertRow, redact_url
from config.model import Config
from fabric.model import Fabric
from fabric.tasks import stop_task
from store.db import UNAVAILABLE_ERRORS, Pool, PostgresError

log = logging.getLogger(__name__)

API_PATH = "/api/v2/alerts"
_READ_TIMEOUT_S = 10.0
_MAX_ERROR_CHARS = 300
_DB_ERRORS: tuple[type[BaseException], ...] = (PostgresError, *UNAVAILABLE_ERRORS)
_SQL = """SELECT * FROM alerts
          WHERE state = 'firing' OR (state = 'resolved' AND ended_at >= $1)
          ORDER BY id"""


@dataclass(slots=True)
class PushStats:
    """One Alertmanager's counters since the analyzer started (for ``/metrics``)."""

    #: :func:`alertmanager_key`, the ``alertmanager`` metric label.
    alertmanager: str
    #: The URL without credentials or query, for logs.
    url: str
    #: Pushes attempted: one evaluation's state, in one or more POSTs.
    pushes: int = 0
    #: Pushes that failed (a POST not answered 2xx in time); the next evaluation sends again.
    failures: int = 0
    #: States replaced by a newer evaluation's before they were sent (the Alertmanager was slow).
    superseded: int = 0
    #: Alerts in the last push Alertmanager accepted.
    alerts: int = 0
    last_error: str | None = None
    #: Unix time of the last accepted push.
    last_success_at: float | None = None


@dataclass(slots=True)
class _Target:
    config: AlertmanagerConfig
    endpoint: str
    stats: PushStats
    #: The state to send next: (POST bodies, alert count); None: nothing new.
    pending: tuple[list[bytes], int] | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    busy: bool = False
    failing: bool = False


class AlertmanagerPusher:
    """Pushes the incidents to every configured Alertmanager after each evaluation."""

    def __init__(
        self,
        pool: Pool,
        alertmanagers: Sequence[AlertmanagerConfig],
        *,
        interval_s: float,
        fabric: str,
        external_url: str | None = None,
        resolved_for_s: float = RESOLVED_FOR_S,
        batch: int = MAX_BATCH,
    ) -> None:
        self._pool = pool
        self._interval_s = interval_s
        self._fabric = fabric
        self._external_url = external_url
        self._resolved_for_s = resolved_for_s
        self._batch = max(1, batch)
        self._targets = _targets(alertmanagers)
        self._requested: datetime | None = None
        self._wake = asyncio.Event()
        self._reading = False
        self._read_failing = False
        self._last: tuple[list[AlertRow], dict[int, list[AffectedJob]]] | None = None
        self._task: asyncio.Task[None] | None = None
        #: Reads of the incidents that failed (each re-sent the last state read, if any).
        self.read_failures = 0

    @classmethod
    def from_config(cls, pool: Pool, config: Config, fabric: Fabric) -> AlertmanagerPusher:
        """The pusher ``alerts.alertmanagers`` describes (with none configured, it does nothing)."""
        alerts = config.alerts
        return cls(
            pool,
            alerts.alertmanagers,
            interval_s=config.analyzer.interval_s,
            fabric=fabric_label(config, fabric),
            external_url=str(alerts.external_url) if alerts.external_url is not None else None,
        )

    @property
    def stats(self) -> list[PushStats]:
        """Per-Alertmanager counters (live objects; read, do not change)."""
        return [t.stats for t in self._targets]

    def push(self, now: datetime) -> None:
        """Send the incidents as of ``now`` (an evaluation's time, timezone-aware) to every
        Alertmanager, in the background: returns at once. A push not yet read is replaced."""
        if now.tzinfo is None:
            raise ValueError("now must be timezone-aware")
        if self._targets:
            self._requested = now
            self._wake.set()

    def start(self) -> None:
        """Start the reader and one sender per Alertmanager (idempotent)."""
        if self._task is None and self._targets:
            self._task = asyncio.create_task(self._run(), name="alertmanager-pusher")

    async def flush(self, timeout_s: float) -> bool:
        """Wait until every push requested so far was attempted; False if ``timeout_s`` passed
        first, or if the pusher is not running while there is something to push."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            idle = not (
                self._wake.is_set() or self._reading or any(t.busy or t.pending is not None for t in self._targets)
            )
            if idle:
                return True
            if self._task is None or self._task.done() or loop.time() >= deadline:
                return False
            await asyncio.sleep(0.02)

    async def close(self, grace_s: float = 0.0) -> None:
        """Stop, after letting pushes in flight finish for up to ``grace_s``."""
        if self._task is None:
            return
        if grace_s > 0:
            await self.flush(grace_s)
        await stop_task(self._task, "the Alertmanager pusher", log)
        self._task = None

    async def _run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._read_loop(), name="alertmanager-reader")
            for t in self._targets:
                tg.create_task(self._serve(t), name=f"alertmanager-{t.stats.alertmanager}")

    async def _read_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            now = self._requested
            if now is None:
                continue
            self._reading = True
            try:
                state = await self._state(now)
            except Exception:  # a bug here must not end the pushes: log it, try the next round
                log.exception("building the Alertmanager push failed; retrying next evaluation")
                state = None
            finally:
                self._reading = False
            if state is None:
                continue
            for t in self._targets:
                if t.pending is not None:
                    t.stats.superseded += 1
                t.pending = state
                t.wake.set()

    async def _state(self, now: datetime) -> tuple[list[bytes], int] | None:
        """The bodies to send as of ``now``: from the database, else from the last read."""
        try:
            rows, jobs = await self._read(now)
        except _DB_ERRORS as exc:
            self.read_failures += 1
            if not self._read_failing:
                self._read_failing = True
                log.warning("cannot read incidents for Alertmanager (%s); re-sending the last state read", exc)
            if self._last is None:
                return None
            rows, jobs = self._last
        else:
            if self._read_failing:
                self._read_failing = False
                log.info("reading incidents for Alertmanager again")
            self._last = (rows, jobs)
        alerts = build_alerts(
            rows,
            jobs,
            now=now,
            interval_s=self._interval_s,
            fabric=self._fabric,
            external_url=self._external_url,
            resolved_for_s=self._resolved_for_s,
        )
        return batches(alerts, self._batch), len(alerts)

    async def _read(self, now: datetime) -> tuple[list[AlertRow], dict[int, list[AffectedJob]]]:
        async with self._pool.acquire() as conn:
            recs = await conn.fetch(_SQL, now - timedelta(seconds=self._resolved_for_s), timeout=_READ_TIMEOUT_S)
            rows = [AlertRow.from_record(r) for r in recs]
            servers = sorted({str(s) for r in rows for s in r.scope.get("servers", [])})
            jobs = await affected_jobs(conn, servers)
        return rows, jobs_by_incident(rows, jobs)

    async def _serve(self, t: _Target) -> None:
        cfg = t.config
        headers = {"Content-Type": "application/json", "User-Agent": "fabricmon-alertmanager/1"}
        auth = None
        if cfg.basic_auth is not None:
            auth = aiohttp.BasicAuth(cfg.basic_auth.username, cfg.basic_auth.password.get_secret_value())
        if cfg.bearer_token is not None:
            headers["Authorization"] = f"Bearer {cfg.bearer_token.get_secret_value()}"
        timeout = aiohttp.ClientTimeout(total=cfg.timeout_s)
        async with aiohttp.ClientSession(timeout=timeout, headers=headers, auth=auth) as session:
            log.info("pushing incidents to Alertmanager %s", t.stats.url)
            while True:
                await t.wake.wait()
                t.wake.clear()
                state, t.pending = t.pending, None
                if state is None:
                    continue
                t.busy = True
                try:
                    await self._send(t, session, *state)
                finally:
                    t.busy = False

    async def _send(self, t: _Target, session: aiohttp.ClientSession, bodies: list[bytes], count: int) -> None:
        t.stats.pushes += 1
        error = None
        for body in bodies:
            error = await self._post(t, session, body)
            if error is not None:
                break  # the next evaluation sends everything again
        if error is None:
            t.stats.alerts = count
            t.stats.last_success_at = time.time()
            if t.failing:
                t.failing = False
                log.info("Alertmanager %s is accepting alerts again", t.stats.url)
            return
        t.stats.failures += 1
        t.stats.last_error = error
        if not t.failing:
            t.failing = True
            log.warning("Alertmanager %s is failing (%s); pushing again every evaluation", t.stats.url, error)
        else:
            log.debug("Alertmanager %s: %s", t.stats.url, error)

    async def _post(self, t: _Target, session: aiohttp.ClientSession, body: bytes) -> str | None:
        """One POST; the error as text, or None when Alertmanager took it."""
        try:
            async with session.post(t.endpoint, data=body, allow_redirects=False) as resp:
                text = (await resp.content.read(2048)).decode(errors="replace")
                if 200 <= resp.status < 300:
                    return None
                return _masked(t, f"HTTP {resp.status} {resp.reason or ''}: {text.strip()}".strip(" :"))
        except TimeoutError:
            return f"timed out after {t.config.timeout_s:g} s"
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            return _masked(t, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # a bug must not end this Alertmanager's task: count it as a failure
            log.exception("pushing to Alertmanager %s", t.stats.url)
            return _masked(t, f"{type(exc).__name__}: {exc}")


def _masked(t: _Target, text: str) -> str:
    """``text`` with the URL's credentials masked, cut to a sane length."""
    text = text.replace(t.endpoint, t.stats.url.rstrip("/") + API_PATH)
    secrets = [t.config.url.password]
    if t.config.basic_auth is not None:
        secrets.append(t.config.basic_auth.password.get_secret_value())
    if t.config.bearer_token is not None:
        secrets.append(t.config.bearer_token.get_secret_value())
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text[:_MAX_ERROR_CHARS]


def _targets(configs: Sequence[AlertmanagerConfig]) -> list[_Target]:
    """One target per distinct Alertmanager; keys made unique when two share a host and port."""
    seen: set[str] = set()
    unique: list[AlertmanagerConfig] = []
    for cfg in configs:
        where = redact_url(str(cfg.url)).rstrip("/")
        if where not in seen:
            seen.add(where)
            unique.append(cfg)
    keys = [alertmanager_key(str(c.url)) for c in unique]
    shared = {k for k, n in Counter(keys).items() if n > 1}
    out = []
    for cfg, key in zip(unique, keys, strict=True):
        url = redact_url(str(cfg.url))
        if key in shared:
            key = f"{key}-{hashlib.sha256(url.encode()).hexdigest()[:6]}"
        endpoint = str(cfg.url).rstrip("/") + API_PATH
        out.append(_Target(cfg, endpoint, PushStats(key, url)))
    return out
