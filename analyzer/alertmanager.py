"""Incidents pushed to Alertmanager as Prometheus pushes its alerts (``POST /api/v2/alerts``).

After each evaluation the analyzer calls :meth:`AlertmanagerPusher.push`, which returns at once.
A background reader then reads, in one query, the firing incidents and those resolved in the
last :data:`RESOLVED_FOR_S` (five minutes), and :func:`build_alerts` turns each into an alert:

* ``labels``: the incident's Alertmanager labels, fixed when it opened
  (:func:`analyzer.payloads.alertmanager_labels`: ``alertname``, ``fingerprint``, and ``switch``,
  ``port``, ``rail``, ``group``, ``server`` when the scope holds exactly one), plus ``fabric``.
  They are the same on every push, firing or resolved, so Alertmanager sees one alert. When a
  label set is both firing (a re-opened incident) and resolved, only the firing one is sent.
* ``annotations``: the webhook format's (:func:`analyzer.payloads._annotations`: ``summary``,
  ``description``, ``severity``, ``recommended_action``, ``action_hosts``, ``jobs``, …) plus
  ``hosts`` (the servers in scope) and ``incident_url`` (``alerts.external_url`` +
  ``/v1/incidents/<id>``, also the ``generatorURL``), when an external URL is configured.
* ``startsAt``: the incident's start. ``endsAt``: while firing, now + 4 * ``analyzer.interval_s``
  (if fabricmon stops pushing, Alertmanager resolves the alert by itself, as with Prometheus);
  once resolved, the incident's end, re-sent every evaluation for five minutes.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast
from urllib.parse import urlsplit

import aiohttp

from analyzer.actions import ACTION_ORDER, Action, AffectedJob, affected_jobs
from analyzer.config import AlertmanagerConfig
from analyzer.payloads import AlertRow, _annotations, alertmanager_labels, dumps, iso, redact_url
from config.model import Config
from fabric.model import Fabric
from fabric.tasks import stop_task
from store.db import UNAVAILABLE_ERRORS, Pool, PostgresError

log = logging.getLogger(__name__)

#: How long a resolved incident is re-sent as resolved.
RESOLVED_FOR_S = 300.0
#: A firing alert's ``endsAt`` is this many evaluation intervals ahead (Prometheus uses 4 too).
ENDS_AFTER_INTERVALS = 4
#: Alerts per POST; a longer list is sent in several.
MAX_BATCH = 256
#: Servers listed in the ``hosts`` annotation before it says how many more.
MAX_HOSTS = 64
API_PATH = "/api/v2/alerts"
_READ_TIMEOUT_S = 10.0
_MAX_ERROR_CHARS = 300
_DB_ERRORS: tuple[type[BaseException], ...] = (PostgresError, *UNAVAILABLE_ERRORS)
_SQL = """SELECT * FROM alerts
          WHERE state = 'firing' OR (state = 'resolved' AND ended_at >= $1)
          ORDER BY id"""


def alertmanager_key(url: str) -> str:
    """``host:port`` of an Alertmanager URL: its ``alertmanager`` metric label and log name."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def fabric_label(config: Config, fabric: Fabric) -> str:
    """The ``fabric`` label: the inventory file's name without its extension, or ``aipod-<gpus>``."""
    if config.fabric.inventory is not None:
        return config.fabric.inventory.stem
    return fabric.label


def incident_url(external_url: str | None, alert_id: int) -> str | None:
    """The incident in fabricmon's API, or None without an external URL."""
    return f"{external_url.rstrip('/')}/v1/incidents/{alert_id}" if external_url else None


def ends_at(alert: AlertRow, now: datetime, interval_s: float) -> datetime:
    """``endsAt``: the incident's end once resolved, else ``ENDS_AFTER_INTERVALS`` evaluations ahead."""
    if alert.state == "resolved" and alert.ended_at is not None:
        return alert.ended_at
    return now + timedelta(seconds=ENDS_AFTER_INTERVALS * interval_s)


def labels_of(alert: AlertRow, fabric: str) -> dict[str, str]:
    """The alert's identifying labels (empty values dropped: Alertmanager treats them as absent)."""
    labels = alertmanager_labels(alert)
    labels.setdefault("fabric", fabric)
    return {k: v for k, v in labels.items() if v != ""}


def prometheus_alert(
    alert: AlertRow,
    jobs: Sequence[AffectedJob],
    *,
    now: datetime,
    interval_s: float,
    fabric: str,
    external_url: str | None = None,
) -> dict[str, Any]:
    """One incident as an Alertmanager v2 ``postableAlert``."""
    action = cast(Action, alert.recommended_action if alert.recommended_action in ACTION_ORDER else "observe")
    annotations = _annotations(alert, jobs, action)
    servers = [str(s) for s in alert.scope.get("servers", [])]
    if servers:
        more = f" (+{len(servers) - MAX_HOSTS} more)" if len(servers) > MAX_HOSTS else ""
        annotations["hosts"] = ",".join(servers[:MAX_HOSTS]) + more
    url = incident_url(external_url, alert.id)
    out: dict[str, Any] = {
        "labels": labels_of(alert, fabric),
        "annotations": annotations,
        "startsAt": iso(alert.started_at),
        "endsAt": iso(ends_at(alert, now, interval_s)),
    }
    if url is not None:
        annotations["incident_url"] = url
        out["generatorURL"] = url
    return out


def build_alerts(
    rows: Sequence[AlertRow],
    jobs: Mapping[int, Sequence[AffectedJob]],
    *,
    now: datetime,
    interval_s: float,
    fabric: str,
    external_url: str | None = None,
    resolved_for_s: float = RESOLVED_FOR_S,
) -> list[dict[str, Any]]:
    """The list to POST: firing incidents and those resolved within ``resolved_for_s`` of ``now``,
    one alert per label set (firing before resolved, then the latest), ordered by incident id."""
    cutoff = now - timedelta(seconds=resolved_for_s)
    best: dict[frozenset[tuple[str, str]], tuple[tuple[bool, datetime, int], AlertRow]] = {}
    for row in rows:
        if row.state == "resolved" and (row.ended_at is None or row.ended_at < cutoff):
            continue
        rank = (row.state == "firing", row.ended_at or row.started_at, row.id)
        key = frozenset(labels_of(row, fabric).items())
        if key not in best or rank > best[key][0]:
            best[key] = (rank, row)
    chosen = sorted((row for _, row in best.values()), key=lambda r: r.id)
    return [
        prometheus_alert(
            r, jobs.get(r.id, ()), now=now, interval_s=interval_s, fabric=fabric, external_url=external_url
        )
        for r in chosen
    ]


def jobs_by_incident(rows: Sequence[AlertRow], jobs: Sequence[AffectedJob]) -> dict[int, list[AffectedJob]]:
    """Each incident's jobs, from the jobs affected by the union of all their servers."""
    out: dict[int, list[AffectedJob]] = {}
    for row in rows:
        servers = {str(s) for s in row.scope.get("servers", [])}
        hit = [AffectedJob(id=j["id"], affected_hosts=[h for h in j["affected_hosts"] if h in servers]) for j in jobs]
        if any(j["affected_hosts"] for j in hit):
            out[row.id] = [j for j in hit if j["affected_hosts"]]
    return out


def batches(alerts: Sequence[Mapping[str, Any]], size: int = MAX_BATCH) -> list[bytes]:
    """The JSON bodies to POST, at most ``size`` alerts each (one empty list when there are none:
    an empty push still says "this Alertmanager is reachable")."""
    size = max(1, size)
    return [dumps(list(alerts[i : i + size])) for i in range(0, max(len(alerts), 1), size)]


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
