"""Maintenance windows (SPEC §10.4): the one validation of a window and the one module that reads
and writes ``maintenance_windows``.

A window names places, ``switches``, ``servers`` and ``rails`` (at least one), and a time,
``start`` to ``end`` (``end`` after ``start``). It comes from two sources:

* an operator (``POST /v1/maintenance``, body :class:`WindowIn`; source ``api``), cancelled by
  ``DELETE /v1/maintenance/{id}`` (:func:`delete_window`: one in progress ends now, others go);
* Slurm: a reservation with the ``MAINT`` flag is a window for its nodes (source
  ``slurm:<reservation name>``), kept equal to what Slurm holds by :func:`replace_slurm`.

Whether the names are places of the inventory is the caller's rule (the API refuses unknown ones;
Slurm's nodes are mapped to servers and the others dropped). The analyzer reads the windows in
force, and those ended within its flap window (their link events are not judged after the end
either), with :func:`windows_between`; :mod:`analyzer.coverage` decides what they cover.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, WithJsonSchema

from store.db import Connection, Pool, Record

#: A switch or server name: printable, no control characters.
PlaceName = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
MAX_PLACES = 65_536
SOURCE_API = "api"
SLURM_PREFIX = "slurm:"

# RFC 3339 ``date-time`` (section 5.6) in the years 1970-2999, the calendar in the pattern (days
# per month, leap years), so every string that matches is a time the server accepts; ``[0-9]``,
# not ``\d`` (which matches other scripts' digits). Up to nine fraction digits (microseconds kept).
_YEAR = r"(19[7-9][0-9]|2[0-9]{3})"
_LEAP_YEAR = r"(19(7[26]|8[048]|9[26])|2[0-9](0[48]|[2468][048]|[13579][26])|2[048]00)"
_MONTH_DAY = r"((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)"
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?"
_OFFSET = r"([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
RFC3339 = rf"^({_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)[Tt]{_TIME}{_OFFSET}$"
_RFC3339 = re.compile(RFC3339)


def parse_rfc3339(value: Any) -> datetime:
    """An aware datetime from an RFC 3339 ``date-time`` string (fractions beyond microseconds dropped)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value
    if not isinstance(value, str) or not _RFC3339.match(value):
        raise ValueError("expected an RFC 3339 date-time with an offset, e.g. 2026-05-01T22:00:00Z")
    text = value.upper()
    head, dot, rest = text.partition(".")
    if dot:  # Python keeps microseconds: cut the fraction to six digits
        digits = re.match(r"[0-9]+", rest)
        assert digits is not None
        text = f"{head}.{digits.group()[:6]}{rest[digits.end() :]}"
    return datetime.fromisoformat(text)


def _integral(value: Any) -> Any:
    """A rail number: JSON says ``1.0`` is the integer 1 (a bool or a string is not)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: A rail number (bounds first: after the validator pydantic would write them as ``ge``/``le``).
RailNumber = Annotated[int, Field(ge=0, le=1024, strict=True), BeforeValidator(_integral)]

Rfc3339 = Annotated[
    datetime,
    BeforeValidator(parse_rfc3339),
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": RFC3339, "maxLength": 40}),
]


class WindowIn(BaseModel):
    """A maintenance window as an operator opens it (``POST /v1/maintenance``)."""

    model_config = ConfigDict(extra="forbid")
    switches: list[PlaceName] = Field([], max_length=MAX_PLACES, description="switch names from the inventory")
    servers: list[PlaceName] = Field([], max_length=MAX_PLACES, description="server names from the inventory")
    rails: list[RailNumber] = Field(
        [], max_length=1025, description="rail numbers: every switch of the rail and every link on one"
    )
    start: Rfc3339 = Field(description="RFC 3339, e.g. 2026-05-01T22:00:00Z")
    end: Rfc3339 = Field(description="RFC 3339, after start")
    reason: Annotated[str, StringConstraints(max_length=1000, pattern=r"^[^\x00-\x1f\x7f]*$")] = ""

    def to_window(self, source: str = SOURCE_API) -> Window:
        """The :class:`Window` (names deduplicated, first one kept; not yet stored)."""
        return Window(
            id=None,
            switches=tuple(dict.fromkeys(self.switches)),
            servers=tuple(dict.fromkeys(self.servers)),
            rails=tuple(dict.fromkeys(self.rails)),
            start=self.start,
            end=self.end,
            reason=self.reason,
            source=source,
        )


@dataclass(frozen=True, slots=True)
class Window:
    """A maintenance window: places and a time (``start`` inclusive, ``end`` exclusive)."""

    id: int | None
    switches: tuple[str, ...]
    servers: tuple[str, ...]
    rails: tuple[int, ...]
    start: datetime
    end: datetime
    reason: str = ""
    source: str = SOURCE_API
    created_at: datetime | None = None

    def active(self, now: datetime) -> bool:
        """Whether it is in force at ``now``."""
        return self.start <= now < self.end

    def holds(self, t: datetime) -> bool:
        """Whether ``t`` is inside it (the same as :meth:`active`)."""
        return self.start <= t < self.end

    @property
    def empty(self) -> bool:
        return not (self.switches or self.servers or self.rails)

    def as_json(self, now: datetime) -> dict[str, Any]:
        """The API's window object."""
        return {
            "id": self.id,
            "switches": list(self.switches),
            "servers": list(self.servers),
            "rails": list(self.rails),
            "start": self.start,
            "end": self.end,
            "reason": self.reason,
            "source": self.source,
            "created_at": self.created_at,
            "active": self.active(now),
        }


_COLUMNS = "id, switches, servers, rails, start_at, end_at, reason, source, created_at"


def _window(r: Record) -> Window:
    return Window(
        id=r["id"],
        switches=tuple(r["switches"]),
        servers=tuple(r["servers"]),
        rails=tuple(r["rails"]),
        start=r["start_at"],
        end=r["end_at"],
        reason=r["reason"],
        source=r["source"],
        created_at=r["created_at"],
    )


async def add_window(db: Pool | Connection, window: Window) -> Window:
    """Store a new window (the caller validated it); the stored one, with its id."""
    row = await db.fetchrow(
        f"""INSERT INTO maintenance_windows (switches, servers, rails, start_at, end_at, reason, source)
            VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {_COLUMNS}""",
        list(window.switches),
        list(window.servers),
        list(window.rails),
        window.start,
        window.end,
        window.reason,
        window.source,
    )
    assert row is not None  # INSERT ... RETURNING always returns the row
    return _window(row)


async def get_window(db: Pool | Connection, window_id: int) -> Window | None:
    """The window with this id."""
    row = await db.fetchrow(f"SELECT {_COLUMNS} FROM maintenance_windows WHERE id = $1", window_id)
    return None if row is None else _window(row)


async def list_windows(
    db: Pool | Connection, now: datetime, *, active: bool | None = None, limit: int = 100, offset: int = 0
) -> tuple[list[Window], int]:
    """One page of the windows (by start, then id) and how many match; ``active``: only those in
    force at ``now`` (True), or only those that are not (False)."""
    rows = await db.fetch(
        f"""SELECT {_COLUMNS}, count(*) OVER () AS total FROM maintenance_windows
            WHERE $1::boolean IS NULL OR $1 = (start_at <= $2 AND $2 < end_at)
            ORDER BY start_at, id LIMIT $3 OFFSET $4""",
        active,
        now,
        limit,
        offset,
    )
    if rows:
        total = rows[0]["total"]
    else:
        total = await db.fetchval(
            """SELECT count(*) FROM maintenance_windows
               WHERE $1::boolean IS NULL OR $1 = (start_at <= $2 AND $2 < end_at)""",
            active,
            now,
        )
    return [_window(r) for r in rows], int(total)


async def delete_window(db: Pool | Connection, window_id: int, now: datetime) -> bool:
    """Cancel a window; whether there was one. A window in progress ends ``now`` (kept: what
    happened inside it was planned, and stays not judged for the analyzer's look-back); one that
    has not started, or has ended, is removed."""
    ended = await db.fetchval(
        """UPDATE maintenance_windows SET end_at = $2, updated_at = now()
           WHERE id = $1 AND start_at < $2 AND end_at > $2 RETURNING id""",
        window_id,
        now,
    )
    if ended is not None:
        return True
    return await db.fetchval("DELETE FROM maintenance_windows WHERE id = $1 RETURNING id", window_id) is not None


async def windows_between(db: Pool | Connection, since: datetime, until: datetime) -> list[Window]:
    """The windows that overlap ``[since, until]``: in force at ``until``, or ended after ``since``
    (the analyzer's look-back: events inside a window that just ended are still not judged)."""
    rows = await db.fetch(
        f"""SELECT {_COLUMNS} FROM maintenance_windows WHERE end_at > $1 AND start_at <= $2 ORDER BY id""",
        since,
        until,
    )
    return [_window(r) for r in rows]


async def replace_slurm(pool: Pool, windows: Sequence[Window], now: datetime) -> tuple[int, int]:
    """Make the Slurm windows (source ``slurm:NAME``) exactly ``windows``, Slurm's MAINT
    reservations now: upsert each by its source, and for a reservation that is gone, end its
    window now if it had started (what happened inside it stays not judged for the analyzer's
    look-back) or delete it if it had not. Windows of the API are not touched. One transaction.
    Returns (stored, ended or removed)."""
    assert all(w.source.startswith(SLURM_PREFIX) for w in windows)
    async with pool.acquire() as conn, conn.transaction():
        if windows:
            await conn.execute(
                """INSERT INTO maintenance_windows (switches, servers, rails, start_at, end_at, reason, source)
                   SELECT '{}', string_to_array(w.servers, E'\\x1f'), '{}', w.start_at, w.end_at, w.reason, w.source
                   FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::text[], $5::text[])
                        AS w(servers, start_at, end_at, reason, source)
                   ON CONFLICT (source) WHERE source <> 'api' DO UPDATE
                   SET servers = EXCLUDED.servers, start_at = EXCLUDED.start_at, end_at = EXCLUDED.end_at,
                       reason = EXCLUDED.reason, updated_at = now()
                   WHERE (maintenance_windows.servers, maintenance_windows.start_at, maintenance_windows.end_at,
                          maintenance_windows.reason)
                         IS DISTINCT FROM (EXCLUDED.servers, EXCLUDED.start_at, EXCLUDED.end_at, EXCLUDED.reason)""",
                ["\x1f".join(w.servers) for w in windows],
                [w.start for w in windows],
                [w.end for w in windows],
                [w.reason for w in windows],
                [w.source for w in windows],
            )
        keep = [w.source for w in windows]
        deleted = await conn.fetchval(
            """WITH gone AS (DELETE FROM maintenance_windows
                             WHERE starts_with(source, $1) AND NOT source = ANY($2::text[]) AND start_at >= $3
                             RETURNING 1)
               SELECT count(*) FROM gone""",
            SLURM_PREFIX,
            keep,
            now,
        )
        ended = await conn.fetchval(
            """WITH cut AS (UPDATE maintenance_windows SET end_at = $3, updated_at = now()
                            WHERE starts_with(source, $1) AND NOT source = ANY($2::text[])
                              AND start_at < $3 AND end_at > $3
                            RETURNING 1)
               SELECT count(*) FROM cut""",
            SLURM_PREFIX,
            keep,
            now,
        )
    return len(windows), int(deleted) + int(ended)
