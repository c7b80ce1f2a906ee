"""What the API accepts: path and query parameters and request bodies, as pydantic models that
validate the input (a 422 names the field) and describe it in ``/openapi.json``.

Names and strings that reach SQL are bounded and free of control characters; integers are
written as digits; lists are paged (``limit``/``offset`` with caps); numbers that reach
arithmetic are finite. A parameter given twice, or one a route does not know, is refused by the
route (:mod:`api.routes.base`).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

Role = Literal["leaf", "spine", "superspine", "unknown"]

#: A switch, port or server name: printable, no control characters.
Name = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


#: A job id as a scheduler names it: usable in a URL path segment.
JobId = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]*$")]


#: Unix seconds, or an ISO 8601 date/time (naive: UTC).
_ISO = r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?)?(Z|[+-]\d{2}:?\d{2})?"


TimeParam = Annotated[str, StringConstraints(max_length=40, pattern=rf"^(\d{{1,12}}(\.\d{{1,9}})?|{_ISO})$")]


#: A duration: seconds, or a number with a unit (ms, s, m, h, d).
DurationParam = Annotated[str, StringConstraints(max_length=20, pattern=r"^\d{1,9}(\.\d{1,6})?(ms|s|m|h|d)?$")]


def _whole(value: Any) -> Any:
    """Query integers are written as digits: "10", not "10.0" or "1e1"."""
    if isinstance(value, str) and not re.fullmatch(r"[+-]?\d{1,19}", value):
        raise ValueError("expected an integer")
    return value


#: An integer query parameter.
QInt = Annotated[int, BeforeValidator(_whole)]


Limit = Annotated[QInt, Field(ge=1, le=1000, description="page size")]


Offset = Annotated[QInt, Field(ge=0, le=1_000_000, description="items to skip")]


class Query(BaseModel):
    """Query and path parameters; values arrive as strings (unknown names are refused by the route)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class PageQuery(Query):
    limit: Limit = 100
    offset: Offset = 0


class SwitchesQuery(PageQuery):
    role: Role | None = None
    rail: Annotated[QInt, Field(ge=0, le=1024)] | None = None
    group: Annotated[QInt, Field(ge=0, le=100_000)] | None = None


class OversubscriptionQuery(PageQuery):
    drifting: bool = Field(False, description="only switches above their design ratio")


class AlertsQuery(PageQuery):
    state: Literal["firing", "resolved", "all"] = "firing"


class AlertPath(Query):
    id: Annotated[QInt, Field(ge=1, le=2**63 - 1)]


class AckIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    by: Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")] | None = None


class JobIn(BaseModel):
    """A training job as a scheduler registers it."""

    model_config = ConfigDict(extra="forbid")
    id: JobId
    hosts: list[Name] = Field(min_length=1, max_length=65_536, description="server names from the inventory")
    started_at: datetime | None = None
    expected_days: Annotated[float, Field(gt=0, le=3650, allow_inf_nan=False)] | None = None


class JobPath(Query):
    id: JobId


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


class SwitchPath(Query):
    name: Name
