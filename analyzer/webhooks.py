"""The webhook sender: delivers the outbox (``webhook_deliveries``) to receivers, at least once.

:class:`WebhookSender` runs one task per receiver, each with its own HTTP session, so a slow or
dead receiver delays no other. A task loops:

1. **Claim** up to ``batch`` due rows of its receiver in one statement
   (``SELECT … FOR UPDATE SKIP LOCKED`` then ``UPDATE``): ``attempts + 1`` and a lease,
   ``next_attempt_at = now + timeout_s + lease_margin_s``. A row is due when its
   ``next_attempt_at`` has passed and no earlier delivery of the same alert to the same
   receiver is still pending (firing arrives before resolved, even across retries). Two
   senders (two analyzers) never hold one row at once; a sender that dies mid-send leaves
   the row to be retried when its lease runs out.
2. **Send** the claimed rows concurrently, outside any transaction: POST the stored body with
   fresh ``X-Fabricmon-Timestamp``/``X-Fabricmon-Signature`` headers and the row id as
   ``X-Fabricmon-Delivery``; ``timeout_s`` bounds each attempt; redirects are not followed.
3. **Record**: a 2xx marks the row ``delivered``. Anything else (status, timeout, connection
   error) stores ``last_error`` and schedules the next attempt after an exponential backoff
   (``backoff_initial_s`` * 2^(attempt-1), ±20 % jitter, at most ``backoff_max_s``), or marks it
   ``failed`` once ``max_attempts`` (0: never) attempts are spent. A client error (a 4xx other
   than 408 Request Timeout and 429 Too Many Requests) does not heal by retrying: after
   ``max_attempts_4xx`` of them in a row (``alerts.max_attempts_4xx``; the count is the row's
   ``client_errors``, reset by any other answer) the row is ``failed`` too, its ``last_error``
   saying so. A failed row no longer holds back the alert's later deliveries.
4. **Wait** for :meth:`WebhookSender.notify` (the analyzer calls it after enqueuing) or the poll
   interval, whichever comes first; another sender's rows are found by the poll.

Cancelling :meth:`~WebhookSender.run` releases the rows in flight (due again at once) on a best
effort basis; if that cannot reach the database the lease expires instead. Either way nothing
is lost, and a receiver may see a delivery id twice: receivers dedupe on
``X-Fabricmon-Delivery``. URLs are logged without credentials or query; secrets never.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp

from analyzer.config import WebhookConfig
from analyzer.outbox import unique_webhooks, webhook_key
from analyzer.payloads import delivery_headers, redact_url
from fabric.waits import wait_event
from store.db import UNAVAILABLE_ERRORS, Pool, PostgresError

log = logging.getLogger(__name__)

_DB_ERRORS: tuple[type[BaseException], ...] = (PostgresError, *UNAVAILABLE_ERRORS)
_RELEASE_ERRORS: tuple[type[BaseException], ...] = (*_DB_ERRORS, TimeoutError)
_MAX_ERROR_CHARS = 500
#: 4xx answers that say "later", not "never": retried like a 5xx and not counted as client errors.
RETRYABLE_4XX = frozenset({408, 429})


def is_client_error(status: int | None) -> bool:
    """Whether an HTTP answer is a client error that retrying the same request cannot fix."""
    return status is not None and 400 <= status < 500 and status not in RETRYABLE_4XX


@dataclass(slots=True)
class ReceiverStats:
    """One receiver's counters since the sender started (for ``/metrics``)."""

    webhook: str
    url: str
    delivered: int = 0
    failed_attempts: int = 0
    #: Deliveries given up: ``max_attempts`` spent, or ``max_attempts_4xx`` client errors in a row.
    failed: int = 0
    in_flight: int = 0
    last_error: str | None = None
    last_delivered_at: float | None = None


@dataclass(frozen=True, slots=True)
class _Claimed:
    id: uuid.UUID
    event: str
    body: bytes
    attempts: int
    #: Client errors (4xx but 408 and 429) in a row before this attempt.
    client_errors: int


@dataclass(slots=True)
class _Receiver:
    config: WebhookConfig
    key: str
    url: str
    stats: ReceiverStats
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    #: Whether the last attempt failed: state changes are logged, single attempts only at debug.
    failing: bool = False


def backoff_s(attempts: int, initial_s: float, max_s: float, rng: random.Random | None = None) -> float:
    """Delay before the next attempt after ``attempts`` failed ones: exponential, ±20 % jitter, capped."""
    base = initial_s * 2.0 ** min(max(attempts - 1, 0), 62)
    jitter = (rng or random).uniform(0.8, 1.2)
    return min(max_s, min(base, max_s) * jitter)


class WebhookSender:
    """Delivers pending outbox rows to each configured receiver until cancelled."""

    def __init__(
        self,
        pool: Pool,
        webhooks: Sequence[WebhookConfig],
        *,
        poll_interval_s: float = 1.0,
        lease_margin_s: float = 5.0,
        batch: int = 8,
        rng: random.Random | None = None,
        max_attempts_4xx: int = 5,
    ) -> None:
        if max_attempts_4xx < 1:
            raise ValueError(f"max_attempts_4xx must be >= 1, got {max_attempts_4xx}")
        self._pool = pool
        self._max_4xx = max_attempts_4xx
        self._poll_s = poll_interval_s
        self._margin_s = lease_margin_s
        self._batch = max(1, batch)
        self._rng = rng or random.Random()
        self._receivers = [
            _Receiver(wh, key, url, ReceiverStats(key, url))
            for wh in unique_webhooks(webhooks)
            for key, url in [(webhook_key(wh), redact_url(str(wh.url)))]
        ]

    @property
    def stats(self) -> list[ReceiverStats]:
        """Per-receiver counters (live objects; read, do not change)."""
        return [r.stats for r in self._receivers]

    async def pending(self) -> dict[str, int]:
        """Pending deliveries per receiver key, from the database (all senders' view)."""
        rows = await self._pool.fetch(
            "SELECT webhook, count(*) AS n FROM webhook_deliveries WHERE status = 'pending' GROUP BY webhook"
        )
        counts = {r.key: 0 for r in self._receivers}
        counts.update({row["webhook"]: row["n"] for row in rows})
        return counts

    def notify(self) -> None:
        """New deliveries were enqueued: look now instead of at the next poll."""
        for r in self._receivers:
            r.wake.set()

    async def run(self) -> None:
        """Serve every receiver until cancelled."""
        if not self._receivers:
            await asyncio.Event().wait()  # nothing to deliver: idle until cancelled
        async with asyncio.TaskGroup() as tg:
            for r in self._receivers:
                tg.create_task(self._serve(r), name=f"webhook-{r.key}")

    async def _serve(self, rx: _Receiver) -> None:
        timeout = aiohttp.ClientTimeout(total=rx.config.timeout_s)
        connector = aiohttp.TCPConnector(limit=self._batch)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            log.info("delivering webhooks to %s (%s format)", rx.url, rx.config.format)
            while True:
                rx.wake.clear()
                try:
                    claimed = await self._claim(rx)
                except _DB_ERRORS as exc:
                    log.warning("webhook outbox for %s unavailable: %s", rx.url, exc)
                    await self._wait(rx, max(self._poll_s, 1.0))
                    continue
                if claimed:
                    await self._send_all(rx, session, claimed)
                    continue  # more may be due, e.g. the resolved behind a firing just delivered
                await self._wait(rx, self._poll_s)

    async def _wait(self, rx: _Receiver, seconds: float) -> None:
        await wait_event(rx.wake, seconds)

    async def _claim(self, rx: _Receiver) -> list[_Claimed]:
        rows = await self._pool.fetch(
            """WITH due AS (
                   SELECT d.id FROM webhook_deliveries d
                   WHERE d.webhook = $1 AND d.status = 'pending' AND d.next_attempt_at <= clock_timestamp()
                     AND NOT EXISTS (
                         SELECT 1 FROM webhook_deliveries e
                         WHERE e.webhook = d.webhook AND e.alert_id = d.alert_id
                           AND e.status = 'pending' AND e.seq < d.seq)
                   ORDER BY d.next_attempt_at, d.seq
                   LIMIT $2
                   FOR UPDATE OF d SKIP LOCKED)
               UPDATE webhook_deliveries w
               SET attempts = w.attempts + 1, next_attempt_at = clock_timestamp() + make_interval(secs => $3)
               FROM due WHERE w.id = due.id
               RETURNING w.id, w.event, w.body, w.attempts, w.client_errors, w.seq""",
            rx.key,
            self._batch,
            rx.config.timeout_s + self._margin_s,
        )
        rows = sorted(rows, key=lambda r: r["seq"])
        return [_Claimed(r["id"], r["event"], bytes(r["body"]), r["attempts"], r["client_errors"]) for r in rows]

    async def _send_all(self, rx: _Receiver, session: aiohttp.ClientSession, claimed: list[_Claimed]) -> None:
        done: set[uuid.UUID] = set()

        async def one(d: _Claimed) -> None:
            await self._deliver(rx, session, d)
            done.add(d.id)

        rx.stats.in_flight += len(claimed)
        try:
            await asyncio.gather(*(one(d) for d in claimed))
        except asyncio.CancelledError:
            await self._release([d.id for d in claimed if d.id not in done])
            raise
        finally:
            rx.stats.in_flight -= len(claimed)

    async def _deliver(self, rx: _Receiver, session: aiohttp.ClientSession, d: _Claimed) -> None:
        secret = rx.config.secret.get_secret_value() if rx.config.secret is not None else None
        headers = delivery_headers(d.event, str(d.id), d.body, secret)
        error: str | None = None
        status: int | None = None
        try:
            async with session.post(str(rx.config.url), data=d.body, headers=headers, allow_redirects=False) as resp:
                await resp.content.read(65536)  # let the receiver finish; the body itself is not used
                status = resp.status
                if not 200 <= resp.status < 300:
                    error = f"HTTP {resp.status} {resp.reason or ''}".strip()
        except TimeoutError:
            error = f"timed out after {rx.config.timeout_s:g} s"
        except (aiohttp.ClientError, OSError) as exc:
            error = self._describe(rx, exc)
        try:
            await self._record(rx, d, error, status)
        except _DB_ERRORS as exc:  # the lease runs out and the delivery is retried: at least once
            log.warning("could not record webhook delivery %s to %s: %s", d.id, rx.url, exc)

    def _describe(self, rx: _Receiver, exc: BaseException) -> str:
        """The error as text for logs and ``last_error``, with the URL's password and query masked."""
        text = f"{type(exc).__name__}: {exc}".replace(str(rx.config.url), rx.url)
        for secret in (rx.config.url.password, rx.config.url.query):
            if secret:
                text = text.replace(secret, "***")
        return text[:_MAX_ERROR_CHARS]

    async def _record(self, rx: _Receiver, d: _Claimed, error: str | None, status: int | None) -> None:
        if error is None:
            rx.stats.delivered += 1  # counted when the receiver took it, even if recording it fails
            rx.stats.last_delivered_at = time.time()
            if rx.failing:
                rx.failing = False
                log.info("webhook receiver %s is accepting deliveries again", rx.url)
            await self._pool.execute(
                """UPDATE webhook_deliveries SET status = 'delivered', delivered_at = clock_timestamp(),
                          last_error = NULL
                   WHERE id = $1 AND status = 'pending'""",
                d.id,
            )
            log.debug("webhook %s %s delivered to %s (attempt %d)", d.event, d.id, rx.url, d.attempts)
            return
        rx.stats.failed_attempts += 1
        rx.stats.last_error = error
        if not rx.failing:
            rx.failing = True
            log.warning("webhook receiver %s is failing (%s); retrying with backoff", rx.url, error)
        client_errors = d.client_errors + 1 if is_client_error(status) else 0
        limit = rx.config.max_attempts
        reason = None
        if client_errors >= self._max_4xx:
            reason = f"{error}: a client error {client_errors} times in a row; not retried"
        elif limit and d.attempts >= limit:
            reason = error
        if reason is not None:
            rx.stats.failed += 1
            rx.stats.last_error = reason[:_MAX_ERROR_CHARS]
            log.error("webhook %s %s to %s failed after %d attempts: %s", d.event, d.id, rx.url, d.attempts, reason)
            await self._pool.execute(
                """UPDATE webhook_deliveries SET status = 'failed', last_error = $3, client_errors = $4
                   WHERE id = $1 AND status = 'pending' AND attempts = $2""",
                d.id,
                d.attempts,
                reason[:_MAX_ERROR_CHARS],
                client_errors,
            )
            return
        delay = backoff_s(d.attempts, rx.config.backoff_initial_s, rx.config.backoff_max_s, self._rng)
        log.debug("webhook %s %s to %s: %s; retry in %.1f s", d.event, d.id, rx.url, error, delay)
        await self._pool.execute(
            """UPDATE webhook_deliveries SET last_error = $3, client_errors = $5,
                      next_attempt_at = clock_timestamp() + make_interval(secs => $4)
               WHERE id = $1 AND status = 'pending' AND attempts = $2""",
            d.id,
            d.attempts,
            error,
            delay,
            client_errors,
        )

    async def _release(self, ids: list[uuid.UUID]) -> None:
        """Make rows whose send was interrupted due again now (best effort, bounded)."""
        if not ids:
            return
        try:
            async with asyncio.timeout(2.0):
                await self._pool.execute(
                    """UPDATE webhook_deliveries SET next_attempt_at = clock_timestamp()
                       WHERE id = ANY($1::uuid[]) AND status = 'pending'""",
                    ids,
                )
        except _RELEASE_ERRORS as exc:
            log.debug("could not release %d webhook deliveries (their lease will expire): %s", len(ids), exc)
