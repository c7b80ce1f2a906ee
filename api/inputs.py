"""What the API accepts: path and query parameters and request bodies, as pydantic models that
validate the input (a 422 names the field) and describe it in ``/openapi.json``.

Names and strings that reach SQL are bounded and free of control characters; integers are
written as digits; lists are paged (``limit``/``offset`` with caps); numbers that reach
arithmetic are finite. A parameter given twice, or one a route does not know, is refused by the
route (:mod:`api.routes.base`).

Every rule on a single value is in its schema (``minimum``/``maximum``, ``maxLength``,
``pattern``, ``enum``), so ``/openapi.json`` states exactly what is accepted: a request that
matches it is refused only for a rule about the data (an unknown switch, ``from`` not before
``to``), which each route lists as its refusals. Integer constraints go before the digits-only
validator in ``Annotated``: after it, pydantic writes them as ``ge``/``le``, which JSON Schema
does not know. A job body is :class:`analyzer.job_spec.JobIn`, the one validation of a job.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from analyzer.job_spec import JobId, JobIn

__all__ = ["JobId", "JobIn"]

Role = Literal["leaf", "spine", "superspine", "unknown"]

#: A switch, port or server name: printable, no control characters.
Name = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


#: Unix seconds (at most 10 digits: before 2286), or an ISO 8601 date with an optional time
#: (``T`` or a space, minutes, optional seconds and fraction) and UTC offset (none: UTC), in the
#: years 1970-2999. The pattern holds the calendar (days per month, leap years), so every value
#: that matches is a time the server accepts. Digits are ``[0-9]``: ``\d`` would also match other
#: scripts' digits, in Python's regex engine and in pydantic's.
_YEAR = r"(19[7-9][0-9]|2[0-9]{3})"
_LEAP_YEAR = r"(19(7[26]|8[048]|9[26])|2[0-9](0[48]|[2468][048]|[13579][26])|2[048]00)"
_MONTH_DAY = r"((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)"
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,9})?)?"
_OFFSET = r"(Z|[+-]([01][0-9]|2[0-3]):?[0-5][0-9])"
_ISO = rf"({_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)([T ]{_TIME}{_OFFSET}?)?"
_UNIX = r"[0-9]{1,10}(\.[0-9]{1,9})?"
TimeParam = Annotated[str, StringConstraints(max_length=40, pattern=rf"^({_UNIX}|{_ISO})$")]


#: A bucket width from 1 s to 31 days: a number with a unit (ms, s, m, h, d; none: seconds). Each
#: unit's alternatives hold that range (below the maximum with any fraction, or the maximum
#: itself), so every value that matches is a step the server accepts.
_FRACTION = r"(\.[0-9]{1,6})?"
_UNDER = {  # the whole part below each unit's maximum of 31 days
    "ms": r"[1-9][0-9]{3,8}",  # 1,000 ms up to 10^9 ms (11.6 days): no maximum needed
    "s": r"[1-9][0-9]{0,5}|1[0-9]{6}|2[0-5][0-9]{5}|26[0-6][0-9]{4}|267[0-7][0-9]{3}|2678[0-3][0-9]{2}",
    "m": r"[1-9][0-9]{0,3}|[1-3][0-9]{4}|4[0-3][0-9]{3}|44[0-5][0-9]{2}|446[0-3][0-9]",
    "h": r"[1-9][0-9]?|[1-6][0-9]{2}|7[0-3][0-9]|74[0-3]",
    "d": r"[1-9]|[12][0-9]|30",
}
_MAXIMUM = {"s": "2678400", "m": "44640", "h": "744", "d": "31"}


def _step(unit: str) -> str:
    number = rf"({_UNDER[unit]}){_FRACTION}" + (f"|{_MAXIMUM[unit]}" if unit in _MAXIMUM else "")
    return rf"({number}){unit}?" if unit == "s" else rf"({number}){unit}"  # seconds: the unit is optional


_STEPS = [_step(unit) for unit in _UNDER]
DurationParam = Annotated[str, StringConstraints(max_length=20, pattern=rf"^({'|'.join(_STEPS)})$")]


def _whole(value: Any) -> Any:
    """Query integers are written as digits: "10", not "10.0" or "1e1"."""
    if isinstance(value, str) and not re.fullmatch(r"[+-]?\d{1,19}", value):
        raise ValueError("expected an integer")
    return value


#: Integer query parameters: the bounds first, then the digits-only check (see the module docstring).
Limit = Annotated[int, Field(ge=1, le=1000, description="page size"), BeforeValidator(_whole)]


Offset = Annotated[int, Field(ge=0, le=1_000_000, description="items to skip"), BeforeValidator(_whole)]


class Query(BaseModel):
    """Query and path parameters; values arrive as strings (unknown names are refused by the route)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class PageQuery(Query):
    limit: Limit = 100
    offset: Offset = 0


class SwitchesQuery(PageQuery):
    role: Role | None = None
    rail: Annotated[int, Field(ge=0, le=1024), BeforeValidator(_whole)] | None = None
    group: Annotated[int, Field(ge=0, le=100_000), BeforeValidator(_whole)] | None = None


class OversubscriptionQuery(PageQuery):
    drifting: bool = Field(False, description="only switches above their design ratio")


class AlertsQuery(PageQuery):
    state: Literal["firing", "resolved", "all"] = "firing"


class ActionsQuery(PageQuery):
    incident: Annotated[int, Field(ge=1, le=2**63 - 1), BeforeValidator(_whole)] | None = Field(
        None, description="only this incident's actions"
    )
    status: Literal["pending", "done", "failed", "withheld", "dry_run"] | None = None


class AlertPath(Query):
    id: Annotated[int, Field(ge=1, le=2**63 - 1), BeforeValidator(_whole)]


class AckIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    by: Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")] | None = None


class JobPath(Query):
    id: JobId


class MaintenanceQuery(PageQuery):
    active: bool | None = Field(None, description="true: only windows in force now; false: only the others")


class WindowPath(Query):
    id: Annotated[int, Field(ge=1, le=2**63 - 1), BeforeValidator(_whole)]


Metric = Literal[
    "in_bps", "out_bps", "in_pps", "out_pps", "in_errors_ps", "out_errors_ps", "in_discards_ps",
    "out_discards_ps", "in_fcs_errors_ps", "speed_bps", "oper_up", "pfc_rx_pause_pps", "pfc_tx_pause_pps",
]  # fmt: skip


class SeriesQuery(Query):
    switch: Name
    port: Name | None = Field(None, description="omitted: the sum over the switch's ports")
    metric: Metric = "in_bps"
    from_: TimeParam | None = Field(None, alias="from", description="default: `to` minus one hour")
    to: TimeParam | None = Field(None, description="default: now")
    step: DurationParam | None = Field(None, description="bucket width; default: about 300 points")
    agg: Literal["avg", "max", "min"] = "avg"
    priority: Annotated[int, Field(ge=0, le=7), BeforeValidator(_whole)] | None = Field(
        None, description="PFC metrics only: one priority's pause rate (ports that report per-priority PFC)"
    )


class OpticsQuery(Query):
    switch: Name
    port: Name
    from_: TimeParam | None = Field(
        None, alias="from", description="default: `to` minus the link-health trend window (6 h)"
    )
    to: TimeParam | None = Field(None, description="default: now")
    step: DurationParam | None = Field(None, description="bucket width; default: about 300 points")


class HistoryQuery(Query):
    from_: TimeParam | None = Field(
        None, alias="from", description="default: `to` minus six hours (or the first evaluation, if later)"
    )
    to: TimeParam | None = Field(None, description="default: now")
    step: DurationParam | None = Field(None, description="bucket width; default: about 300 points")
    rail: Annotated[int, Field(ge=0, le=1024), BeforeValidator(_whole)] | None = Field(
        None, description="one rail: its roll-up ratios instead of the fabric's, and only its figures"
    )


class SparklineQuery(Query):
    metric: Metric = "in_bps"
    minutes: Annotated[int, Field(ge=1, le=1440), BeforeValidator(_whole)] = 60


class SwitchPath(Query):
    name: Name
