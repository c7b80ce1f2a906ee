"""NetBox's REST API read for ``fabricmon inventory import netbox`` (SPEC §10.2).

Three lists, each followed through every ``next`` link: ``dcim/devices``, ``dcim/interfaces``
(cabled ones) and ``dcim/cables``, filtered by ``site`` (a slug) when one is given. The
conversion is :mod:`fabric.netbox_import`; this module only reads, and tells each way a read can
fail in one line: a token NetBox refuses (401/403), no API at the URL (404, a redirect, an HTML
page), an unknown site (400), an answer that is no NetBox list, no answer.

* The token (``$NETBOX_TOKEN``) goes as ``Authorization: Token <key>``, or ``Bearer nbt_...``
  for NetBox 4.5's v2 tokens; it is never printed.
* A ``next`` link is followed on the origin of ``--url``: NetBox behind a TLS proxy that does
  not forward the scheme writes ``http://`` links, and a link elsewhere would carry the token away.
* Every request has a time limit and every page a size limit; the pages of a list are bounded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import aiohttp

from discovery.errors import NetboxError
from fabric.netbox_import import NetboxData

#: Objects per page asked for (NetBox's default MAX_PAGE_SIZE; a smaller one gives more pages).
PAGE_SIZE = 1000
#: Pages of one list before the read gives up (a ``next`` link that never ends).
MAX_PAGES = 10_000
#: Bytes of one page (a page of 1,000 interfaces is about 3 MiB).
MAX_BODY = 64 * 1024 * 1024
#: The lists read, and the filters each takes besides ``site``.
LISTS: tuple[tuple[str, Mapping[str, str]], ...] = (
    ("dcim/devices/", {}),
    ("dcim/interfaces/", {"cabled": "true"}),
    ("dcim/cables/", {}),
)


@dataclass(frozen=True, slots=True)
class NetboxSource:
    """Where and how to read: NetBox's address (``--url``), the token, the site, the limits."""

    url: str
    token: str | None = None
    site: str | None = None
    timeout_s: float = 30.0
    page_size: int = PAGE_SIZE


def api_base(url: str) -> str:
    """``https://netbox.example.com`` (or ``.../api/``) → ``https://netbox.example.com/api``."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NetboxError(f"--url {url!r}: expected NetBox's address, http(s)://HOST[:PORT][/PATH]")
    path = parts.path.rstrip("/")
    if not path.endswith("/api"):
        path += "/api"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def auth_headers(token: str | None) -> dict[str, str]:
    """The request headers: JSON, and the token as NetBox takes it (v1 ``Token``, v2 ``Bearer nbt_``)."""
    headers = {"Accept": "application/json", "User-Agent": "fabricmon-netbox/1"}
    if token:
        headers["Authorization"] = f"Bearer {token}" if token.startswith("nbt_") else f"Token {token}"
    return headers


def list_url(base: str, path: str, filters: Mapping[str, str], page_size: int) -> str:
    return f"{base}/{path}?{urlencode({**filters, 'limit': page_size})}"


def on_origin(base: str, link: str) -> str:
    """A ``next`` link with the scheme, host and port of ``base`` (its path and query kept)."""
    b, n = urlsplit(base), urlsplit(link)
    return urlunsplit((b.scheme, b.netloc, n.path, n.query, ""))


async def fetch(source: NetboxSource) -> NetboxData:
    """Every device, cabled interface and cable of the site (of NetBox when no site is given)."""
    base = api_base(source.url)
    filters = {"site": source.site} if source.site else {}
    timeout = aiohttp.ClientTimeout(total=source.timeout_s)
    lists: list[list[Any]] = []
    try:
        async with aiohttp.ClientSession(headers=auth_headers(source.token), timeout=timeout) as session:
            for path, more in LISTS:
                url = list_url(base, path, {**filters, **more}, source.page_size)
                lists.append(await _read_list(session, base, url, source))
    except TimeoutError:
        raise NetboxError(f"NetBox at {base} gave no answer within {source.timeout_s:g} s") from None
    except aiohttp.ClientConnectorCertificateError as exc:
        raise NetboxError(f"NetBox at {base}: its TLS certificate: {exc.certificate_error}") from None
    except aiohttp.ClientConnectorError as exc:
        raise NetboxError(f"cannot reach NetBox at {base}: {exc.os_error.strerror or exc.os_error}") from None
    except (aiohttp.ClientError, OSError) as exc:
        raise NetboxError(f"NetBox at {base}: {type(exc).__name__}: {exc}") from None
    devices, interfaces, cables = lists
    return NetboxData(devices, interfaces, cables)


async def _read_list(session: aiohttp.ClientSession, base: str, url: str, source: NetboxSource) -> list[Any]:
    results: list[Any] = []
    for _ in range(MAX_PAGES):
        doc = await _get(session, url, source)
        if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
            keys = ", ".join(sorted(doc)[:5]) if isinstance(doc, dict) else type(doc).__name__
            raise NetboxError(f"GET {url}: not a NetBox list (no 'results'; got {keys}): is --url NetBox's address?")
        results += doc["results"]
        link = doc.get("next")
        if not link:
            return results
        if not isinstance(link, str):
            raise NetboxError(f"GET {url}: 'next' is not a link ({link!r})")
        url = on_origin(base, link)
    raise NetboxError(f"GET {url}: more than {MAX_PAGES} pages of {source.page_size}; stopped")


async def _get(session: aiohttp.ClientSession, url: str, source: NetboxSource) -> Any:
    async with session.get(url, allow_redirects=False) as resp:
        body = await _read_capped(resp, url)
        kind = resp.headers.get("Content-Type", "").partition(";")[0].strip() or "no content type"
        if resp.status >= 300:
            raise NetboxError(_refusal(url, resp.status, body, resp.headers.get("Location"), source))
        try:
            return json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError):
            start = body[:40].decode("utf-8", "replace").strip()
            raise NetboxError(
                f"GET {url}: not a NetBox API answer ({kind}, starting {start!r}): is --url NetBox's address?"
            ) from None


def _refusal(url: str, status: int, body: bytes, location: str | None, source: NetboxSource) -> str:
    """One line for an HTTP error: what NetBox said, and what to do about it."""
    detail = _detail(body)
    said = f"HTTP {status}" + (f": {detail}" if detail else "")
    if status in (401, 403):
        if source.token:
            return f"GET {url}: NetBox refused the token in $NETBOX_TOKEN ({said})"
        return f"GET {url}: NetBox refused an anonymous read ({said}): set $NETBOX_TOKEN to an API token"
    if status == 404:
        return f"GET {url}: {said}: no NetBox API there; give --url NetBox's address (https://netbox.example.com)"
    if status == 400 and source.site and "site" in detail:
        return f"GET {url}: NetBox has no site {source.site!r} (--site takes a site's slug; {said})"
    if 300 <= status < 400:
        return f"GET {url}: HTTP {status}, redirected to {location or '?'}: give --url as NetBox's address itself"
    return f"GET {url}: {said}"


def _detail(body: bytes) -> str:
    """NetBox's error text: ``{"detail": ...}`` or a field's messages; else nothing (an HTML page)."""
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return ""
    if isinstance(doc, dict):
        if isinstance(doc.get("detail"), str):
            return str(doc["detail"])
        return "; ".join(f"{k}: {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in doc.items())[:300]
    return ""


async def _read_capped(resp: aiohttp.ClientResponse, url: str) -> bytes:
    buf = bytearray()
    async for chunk in resp.content.iter_chunked(1 << 16):
        buf += chunk
        if len(buf) > MAX_BODY:
            raise NetboxError(f"GET {url}: a page larger than {MAX_BODY // (1024 * 1024)} MiB")
    return bytes(buf)
