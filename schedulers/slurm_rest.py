"""Slurm through slurmrestd (``schedulers.slurm.rest``): the :class:`~schedulers.slurm.SlurmClient`
of :mod:`schedulers.slurm`, over HTTP instead of Slurm's commands.

Every request carries ``X-SLURM-USER-NAME`` and ``X-SLURM-USER-TOKEN`` (a JWT from ``scontrol
token``): slurmrestd's ``rest_auth/jwt`` hands the token to slurmctld, which checks it
(``AuthAltTypes=auth/jwt``). The token is a ``SecretStr`` and appears in no log or error.

What an OpenAPI version can do is data (:data:`SINCE`), from the plugins' source and Slurm's
OpenAPI release notes, and for v0.0.38 from a running 22.05 slurmrestd's ``GET /openapi/v3``:

* jobs and nodes (``GET /slurm/<v>/jobs``, ``GET /slurm/<v>/nodes``): v0.0.38 (Slurm 22.05) on;
  :func:`~schedulers.slurm.parse_jobs` and :func:`~schedulers.slurm.parse_nodes` read both shapes;
* drain and resume (``POST /slurm/<v>/node/<name>`` with ``{"state": ["DRAIN"], "reason": ...}``):
  v0.0.39 (Slurm 23.02) on. 22.05's v0.0.38 has only ``GET`` there (a ``POST`` is HTTP 405), and
  nothing else in it updates a node: those operations raise :class:`SlurmRefused` naming the
  Slurm release needed, before any request is sent;
* a signal to the batch step only (``DELETE /slurm/<v>/job/<id>?signal=USR1&flags=BATCH_JOB``,
  what ``scancel --batch`` does): v0.0.40 (Slurm 23.11) on. Older versions' ``DELETE`` signals
  every step of the job, srun tasks included, whose default action on USR1 is to exit: refused
  rather than done differently.

What goes wrong maps onto the two classes of :mod:`schedulers.slurm`:

* :class:`SlurmUnavailable`: slurmrestd cannot be reached or does not answer within
  ``command_timeout_s``, a 5xx without a Slurm error, or a Slurm error that says slurmctld is away
  (``Unable to contact slurm controller``, the communication error numbers);
* :class:`SlurmRefused`: HTTP 401/403 (slurmrestd took no token), the authentication error numbers,
  any other Slurm error (an unknown node or job: 22.05 sends those with HTTP 500 too), a path this
  slurmrestd does not serve, and tokens fabricmon can see are bad itself (not a JWT, expired).

Slurm 22.05 answers ``{"error": "Unspecified error", "errno": -1}`` (HTTP 500) to a read both when
slurmctld is away and when slurmctld rejected the token (wrong key or signature): that one is
:class:`SlurmUnavailable`, and its message names both causes.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import aiohttp
from yarl import URL

from schedulers.config import SlurmConfig, SlurmRestConfig
from schedulers.slurm import (
    Operation,
    SlurmClient,
    SlurmCommands,
    SlurmJob,
    SlurmNode,
    SlurmRefused,
    SlurmReservation,
    SlurmUnavailable,
    is_outage,
    parse_jobs,
    parse_nodes,
    parse_reservations,
)

log = logging.getLogger(__name__)

Version = tuple[int, int, int]

#: The oldest OpenAPI version that can do each operation, and the Slurm release that brought it.
SINCE: dict[str, tuple[Version, str]] = {
    "jobs": ((0, 0, 38), "22.05"),
    "nodes": ((0, 0, 38), "22.05"),
    "reservations": ((0, 0, 38), "22.05"),
    "drain": ((0, 0, 39), "23.02"),
    "resume": ((0, 0, 39), "23.02"),
    "signal": ((0, 0, 40), "23.11"),
}
_WHY_NOT = {
    "drain": "its /node/{name} takes GET only",
    "resume": "its /node/{name} takes GET only",
    "signal": "its DELETE /job/{id} signals every step of the job, not only the batch step",
}
#: slurm_errno.h: communication failures (slurmctld away), and authentication failures.
_OUTAGE_ERRNOS = frozenset({1001, 1002, 1003, 1004, 1013, *range(1800, 1806), *range(5000, 5006)})
_AUTH_ERRNOS = frozenset({1007, *range(6000, 6012)})
_UNSPECIFIED = -1
_MAX_BODY = 64 * 1024 * 1024  # /jobs of a busy cluster is large; beyond this something is wrong
_EXPIRY_WARNING_S = 24 * 3600


def version_of(api_version: str) -> Version:
    """``"v0.0.39"`` → ``(0, 0, 39)``."""
    major, minor, micro = (int(p) for p in api_version.removeprefix("v").split("."))
    return major, minor, micro


def unsupported(kind: str, api_version: str) -> str | None:
    """Why ``kind`` cannot be done through slurmrestd ``api_version`` (None: it can)."""
    since, release = SINCE[kind]
    if version_of(api_version) >= since:
        return None
    v = "v" + ".".join(map(str, since))
    return (
        f"{kind} through slurmrestd needs OpenAPI {v} (Slurm {release}) or later; {api_version} cannot "
        f"({_WHY_NOT[kind]}): upgrade Slurm and set schedulers.slurm.rest.api_version, or leave rest unset "
        "to use scontrol/scancel"
    )


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request to slurmrestd, as data (``str()`` is the audit's form of it)."""

    method: str
    segments: tuple[str, ...]  # the path after the base URL, unencoded: ("slurm", "v0.0.39", "node", "n1")
    query: tuple[tuple[str, str], ...] = ()
    body: dict[str, Any] | None = None

    @property
    def path(self) -> str:
        return "/" + "/".join(self.segments)

    def url(self, base: URL) -> URL:
        """The request's URL under ``base`` (its path prefix kept, each segment percent-encoded)."""
        path = base.raw_path.rstrip("/") + "".join("/" + quote(s, safe="") for s in self.segments)
        url = base.with_path(path, encoded=True)
        return url.with_query(self.query) if self.query else url

    def __str__(self) -> str:
        query = "?" + "&".join(f"{k}={v}" for k, v in self.query) if self.query else ""
        body = f" {json.dumps(self.body)}" if self.body is not None else ""
        return f"{self.method} {self.path}{query}{body}"


def read_request(api_version: str, what: str) -> Request:
    """``GET /slurm/<v>/jobs`` or ``/nodes``."""
    return Request("GET", ("slurm", api_version, what))


def op_requests(op: Operation, api_version: str) -> list[Request]:
    """The requests that make ``op`` (one per node for drain and resume); :class:`SlurmRefused`
    when this API version cannot."""
    why = unsupported(op.kind, api_version)
    if why is not None:
        raise SlurmRefused(why)
    if op.kind == "signal":
        query = (("signal", op.signal), ("flags", "BATCH_JOB"))
        return [Request("DELETE", ("slurm", api_version, "job", op.job_id), query)]
    body: dict[str, Any] = {"state": ["DRAIN"], "reason": op.reason} if op.kind == "drain" else {"state": ["RESUME"]}
    return [Request("POST", ("slurm", api_version, "node", n), body=body) for n in op.nodes]


def token_claims(token: str) -> dict[str, Any] | None:
    """A JWT's claims, read without checking its signature (slurmctld does that); None: not a JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    return claims if isinstance(claims, dict) else None


def token_expiry(claims: dict[str, Any]) -> float | None:
    """The ``exp`` claim (None: the token does not expire)."""
    exp = claims.get("exp")
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


def token_problem(token: str, now: float) -> str | None:
    """What is wrong with a token that shows without its key: not a JWT, or expired (None: nothing)."""
    claims = token_claims(token)
    if claims is None:
        return "the token is not a JWT (make one with: scontrol token username=<user> lifespan=<seconds>)"
    exp = token_expiry(claims)
    if exp is not None and exp <= now:
        return f"the token expired at {_utc(exp)} (scontrol token makes a new one)"
    return None


def _utc(ts: float) -> str:
    return f"{datetime.fromtimestamp(ts, UTC):%Y-%m-%d %H:%M:%S} UTC"


def slurm_errors(doc: Any) -> list[tuple[int | None, str]]:
    """The ``errors`` of a slurmrestd answer as (error number, text); v0.0.38 names the number
    ``errno`` in some answers and ``error_number`` in others."""
    out: list[tuple[int | None, str]] = []
    if not isinstance(doc, dict):
        return out
    for e in doc.get("errors") or []:
        if not isinstance(e, dict):
            out.append((None, str(e)))
            continue
        number = e.get("error_number", e.get("errno"))
        texts = [str(e[k]) for k in ("description", "error") if e.get(k)]
        text = ": ".join(dict.fromkeys(texts)) or json.dumps(e)
        out.append((number if isinstance(number, int) and not isinstance(number, bool) else None, text))
    return out


def check_answer(status: int, body: bytes, what: str) -> dict[str, Any]:
    """A slurmrestd answer's JSON object, or the error it stands for (pure)."""
    doc: Any = None
    try:
        doc = json.loads(body) if body.strip() else None
    except ValueError:
        doc = None
    if status in (401, 403):
        raise SlurmRefused(
            f"{what}: HTTP {status}: slurmrestd took no valid token: is rest.user/rest.token set, and does "
            "slurmrestd run with rest_auth/jwt (SLURM_JWT=daemon)?"
        )
    errors = slurm_errors(doc)
    if errors:
        numbers = {n for n, _ in errors}
        texts = "; ".join(t for _, t in errors)
        if numbers & _AUTH_ERRNOS:
            raise SlurmRefused(f"{what}: slurmctld rejected the token ({texts}): make a new one with scontrol token")
        if numbers & _OUTAGE_ERRNOS or any(is_outage(t) for _, t in errors):
            raise SlurmUnavailable(f"{what}: slurmrestd cannot reach slurmctld ({texts})")
        if numbers == {_UNSPECIFIED}:
            raise SlurmUnavailable(
                f"{what}: slurmrestd says {texts!r}: slurmctld is unreachable, or it rejected the token "
                "(Slurm 22.05 answers both alike; slurmctld's log says 'jwt_decode failure' for the token)"
            )
        raise SlurmRefused(f"{what}: HTTP {status}: {texts}")
    if status >= 500:
        raise SlurmUnavailable(f"{what}: HTTP {status} from slurmrestd{_excerpt(body)}")
    if status == 404:
        raise SlurmRefused(
            f"{what}: HTTP 404: slurmrestd does not serve this path: is the api_version one it has "
            "(GET /openapi/v3 lists its paths)?"
        )
    if status == 405:
        raise SlurmRefused(f"{what}: HTTP 405: this slurmrestd's API has no such method at this path")
    if not 200 <= status < 300:
        raise SlurmRefused(f"{what}: HTTP {status}{_excerpt(body)}")
    if not isinstance(doc, dict):
        raise SlurmRefused(f"{what}: HTTP {status} without a JSON object")
    return doc


def _excerpt(body: bytes) -> str:
    text = body[:200].decode(errors="replace").strip()
    return f": {text}" if text else ""


class SlurmRest:
    """slurmrestd as a :class:`~schedulers.slurm.SlurmClient`.

    A session per call (each poll makes one request, each action a few): there is no connection
    pool to own or to close, and one instance serves the executor and the discovery at once.
    """

    def __init__(self, config: SlurmConfig) -> None:
        if config.rest is None:
            raise ValueError("SlurmRest needs schedulers.slurm.rest")
        self.config = config
        self.rest: SlurmRestConfig = config.rest
        self.base = URL(str(self.rest.url))
        self._warned_expiry = False
        wanted = [k for k, on in (("drain", config.drain), ("signal", config.checkpoint_signal is not None)) if on]
        for kind in wanted:
            why = unsupported(kind, self.rest.api_version)
            if why is not None:
                log.warning("schedulers.slurm.rest: every %s action will be refused: %s", kind, why)

    def __repr__(self) -> str:
        return f"SlurmRest({self.base}, user={self.rest.user!r}, api_version={self.rest.api_version})"

    def _token(self) -> str:
        token = self.rest.token.get_secret_value().strip().removeprefix("SLURM_JWT=")
        problem = token_problem(token, time.time())
        if problem is not None:
            raise SlurmRefused(f"schedulers.slurm.rest.token: {problem}")
        exp = token_expiry(token_claims(token) or {})
        if exp is not None and exp - time.time() < _EXPIRY_WARNING_S and not self._warned_expiry:
            self._warned_expiry = True
            log.warning("schedulers.slurm.rest.token expires at %s: replace it before then", _utc(exp))
        return token

    async def _send(self, requests: Sequence[Request]) -> list[dict[str, Any]]:
        """Send requests in order, all within one ``command_timeout_s``; their answers."""
        headers = {
            "X-SLURM-USER-NAME": self.rest.user,
            "X-SLURM-USER-TOKEN": self._token(),
            "Accept": "application/json",
            "User-Agent": "fabricmon-slurm/1",
        }
        timeout_s = self.config.command_timeout_s
        out: list[dict[str, Any]] = []
        current = requests[0] if requests else None
        try:
            async with (
                asyncio.timeout(timeout_s),
                aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
            ):
                for current in requests:
                    log.debug("slurmrestd: %s %s", current.method, current.path)
                    async with session.request(
                        current.method, current.url(self.base), json=current.body, allow_redirects=False
                    ) as resp:
                        what = f"{current.method} {current.path}"
                        out.append(check_answer(resp.status, await _read_capped(resp, what), what))
        except TimeoutError:
            raise SlurmUnavailable(f"{_what(current)}: slurmrestd gave no answer within {timeout_s:g} s") from None
        except aiohttp.ClientConnectorCertificateError as exc:
            raise SlurmRefused(f"{_what(current)}: slurmrestd's TLS certificate: {exc.certificate_error}") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise SlurmUnavailable(f"{_what(current)}: slurmrestd at {self.base}: {_client_error(exc)}") from None
        return out

    async def _get(self, what: str) -> dict[str, Any]:
        (doc,) = await self._send([read_request(self.rest.api_version, what)])
        if not isinstance(doc.get(what), list):
            raise SlurmRefused(f"GET /slurm/{self.rest.api_version}/{what}: an answer without a {what!r} list")
        return doc

    async def jobs(self, max_nodes: int = 1_000_000) -> list[SlurmJob]:
        """The running jobs."""
        return parse_jobs(await self._get("jobs"), max_nodes)

    async def nodes(self) -> dict[str, SlurmNode]:
        """Every node's state and reason."""
        return parse_nodes(await self._get("nodes"))

    async def reservations(self) -> list[SlurmReservation]:
        """Every reservation (``GET /slurm/<v>/reservations``)."""
        return parse_reservations(await self._get("reservations"))

    async def execute(self, op: Operation) -> None:
        await self._send(op_requests(op, self.rest.api_version))

    def describe(self, op: Operation) -> str:
        try:
            return "; ".join(str(r) for r in op_requests(op, self.rest.api_version))
        except SlurmRefused as exc:
            return f"not sent: {exc}"


async def _read_capped(resp: aiohttp.ClientResponse, what: str) -> bytes:
    buf = bytearray()
    async for chunk in resp.content.iter_chunked(1 << 16):
        buf += chunk
        if len(buf) > _MAX_BODY:
            raise SlurmRefused(f"{what}: an answer larger than {_MAX_BODY // (1024 * 1024)} MiB")
    return bytes(buf)


def _what(request: Request | None) -> str:
    return f"{request.method} {request.path}" if request is not None else "slurmrestd"


def _client_error(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect ({exc.os_error.strerror or exc.os_error})"
    return f"{type(exc).__name__}: {exc}"


def client_for(config: SlurmConfig) -> SlurmClient:
    """The Slurm client the config asks for: slurmrestd when ``rest`` is set, else Slurm's commands."""
    if config.rest is not None:
        return SlurmRest(config)
    return SlurmCommands(config)


__all__ = [
    "SINCE",
    "Request",
    "SlurmRest",
    "check_answer",
    "client_for",
    "op_requests",
    "read_request",
    "slurm_errors",
    "token_claims",
    "token_expiry",
    "token_problem",
    "unsupported",
    "version_of",
]
