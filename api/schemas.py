"""What the API answers: pydantic models of the response bodies, which shape what goes out and,
with the inputs of :mod:`api.inputs`, are the single source of ``/openapi.json`` (see
:mod:`api.routes.openapi`). Responses are closed objects (``additionalProperties: false``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.inputs import Metric, Role

Status = Literal["healthy", "degraded", "critical"]
Severity = Literal["info", "warning", "critical"]
OperStatus = Literal["up", "down", "testing", "unknown", "dormant", "notPresent", "lowerLayerDown"]


class Model(BaseModel):
    """Response bodies: closed objects."""

    model_config = ConfigDict(extra="forbid")


class Page(Model):
    total: int = Field(ge=0)
    limit: int
    offset: int


class ProblemOut(BaseModel):
    """An error (RFC 9457)."""

    model_config = ConfigDict(extra="allow")
    type: str
    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]] | None = None


# --- health ---------------------------------------------------------------------------------


class ScopeOut(Model):
    """A finding's or an alert's blast radius."""

    switches: list[str] = []
    ports: list[str] = []
    rails: list[int] = []
    groups: list[int] = []
    servers: list[str] = []
    gpus: int = 0


class FindingOut(Model):
    rule: str
    key: str
    fingerprint: str
    severity: Severity
    summary: str
    scope: ScopeOut
    details: dict[str, Any] = {}


class CheckOut(Model):
    status: Status
    findings: list[FindingOut] = Field(description="the most severe first, at most 100")
    findings_total: int


class Checks(Model):
    rail_symmetry: CheckOut
    oversubscription: CheckOut
    stability: CheckOut
    collection: CheckOut


class HealthOut(Model):
    status: Status
    updated_at: datetime = Field(description="when the analyzer evaluated the fabric")
    age_s: float = Field(description="seconds since updated_at")
    stale: bool = Field(description="the verdict is older than three analyzer intervals: treat it as unknown")
    checks: Checks
    errors: list[str] = Field(description="checks that failed to run in that evaluation")


class Liveness(Model):
    status: Literal["ok", "ready"]


# --- switches and ports ---------------------------------------------------------------------


class Reachability(Model):
    reachable: bool
    state: str
    since: datetime
    detail: str | None = None


class SwitchOut(Model):
    name: str
    role: Role
    group: int | None
    rail: int | None
    plane: int | None
    known: bool = Field(description="false: discovered by the collector, not in the inventory")
    status: Status | None = Field(
        description="worst finding touching the switch in the latest evaluation (null: none yet)"
    )
    findings: int
    reachability: Reachability | None
    last_sample_at: datetime | None = Field(description="newest sample in the latest window")
    ports_up: int
    ports_reporting: int
    ports_total: int
    clock_skew_s: float | None = Field(
        description="the switch's clock minus the collector's receive time, seconds (positive: ahead), as its "
        "collector last reported it; null: not reported",
    )
    clock_corrected: bool | None = Field(
        description="true while its timestamps are replaced by receive time (off by more than "
        "collector.max_clock_skew_s); null: not reported",
    )
    clock_replaced: int | None = Field(
        description="readings whose timestamp its collector replaced, since that collector started"
    )


class Window(Model):
    start: datetime | None
    end: datetime | None


class SwitchList(Page):
    items: list[SwitchOut]
    window: Window


class PeerOut(Model):
    node: str
    port: str | None
    kind: str | None


class PortOut(Model):
    name: str
    number: int | None
    direction: Literal["down", "up"] | None
    known: bool
    design_speed_gbps: float | None
    oper_status: OperStatus | None = Field(description="latest in the window; null: no sample")
    speed_bps: int | None
    in_bps: float | None
    out_bps: float | None
    in_pps: float | None
    out_pps: float | None
    in_errors_ps: float | None
    out_errors_ps: float | None
    in_fcs_errors_ps: float | None
    in_discards_ps: float | None
    out_discards_ps: float | None
    pfc_rx_pause_pps: float | None
    pfc_tx_pause_pps: float | None
    flaps_24h: int
    last_sample_at: datetime | None
    peer: PeerOut | None


class PortList(Page):
    switch: str
    items: list[PortOut]
    window: Window


# --- rails, oversubscription, SLOs ------------------------------------------------------------


class RailGroupOut(Model):
    group: int
    status: Status
    findings: int
    summaries: list[str] = Field(description="the findings touching this rail in this group (at most 5)")


class RailOut(Model):
    rail: int
    status: Status
    design_gbps: float
    live_gbps: float | None = Field(description="null: the capacity check had no data for this rail")
    capacity_fraction: float | None = Field(description="live/design uplink capacity of the whole rail")
    bottleneck: str | None
    bottleneck_fraction: float | None = Field(description="live/design uplinks of the rail's weakest switch")
    asymmetry: float | None = Field(description="best rail's bottleneck fraction minus this rail's")
    load_gbps: float | None
    pfc_pause_ratio: float | None = Field(description="mean share of time the rail's switch ports are paused")
    findings: int
    groups: list[RailGroupOut]


class AsymmetryOut(Model):
    best_rail: int
    worst_rail: int
    best_fraction: float
    worst_fraction: float
    spread: float = Field(description="best minus worst bottleneck fraction")
    load_spread: float | None = Field(description="(max - min) / max rail load; null while idle")


class RailsOut(Model):
    updated_at: datetime
    groups: list[int]
    rails: list[RailOut]
    asymmetry: AsymmetryOut | None


class RatioOut(Model):
    scope: Literal["switch", "rail", "group", "fabric"]
    name: str
    down_gbps: float
    up_gbps: float
    ratio: float | None = Field(description="live down:up; null when nothing is up")
    design_ratio: float
    drift: float | None = Field(description="ratio / design_ratio - 1")


class OversubscriptionOut(Page):
    updated_at: datetime
    design_ratio: float
    worst: list[RatioOut]
    rollups: list[RatioOut]
    items: list[RatioOut] = Field(description="every leaf and spine, highest ratio first")


class LinkHealthOut(Model):
    link: str = Field(description="the link's naming end (its lower-tier switch end), switch:port")
    switch: str = Field(description="the end whose optics give the estimate (the worst end)")
    port: str
    peer: str | None = Field(description="node:port at the other end of that port; null when uncabled")
    time_to_failure_s: float | None = Field(description="seconds until a threshold is crossed; null when no trend")
    confidence: float = Field(ge=0, le=1, description="how sure the trend is (0 when no trend)")
    basis: Literal["rx_power", "laser_bias", "pre_fec_ber"] | None = Field(
        description="the series whose trend gives the estimate"
    )
    evidence: dict[str, Any] = Field(
        description="rx power, laser bias, pre-FEC BER, predicted FLR, their thresholds (module or configured) "
        "and slopes per hour"
    )
    optics: str = Field(description="the measured end's DOM and FEC series with thresholds: a GET /v1/optics URL")


class LinksHealthOut(Page):
    updated_at: datetime
    items: list[LinkHealthOut] = Field(description="ranked by predicted time to failure, soonest first")


class ObjectiveOut(Model):
    name: str
    description: str
    target: float
    window_days: float
    measured_days: float | None = Field(
        None, description="history actually measured: window_days, or less for a younger deployment"
    )
    current: float
    error_budget_remaining: float
    burn_rates: dict[str, float] = Field(description="burn rate per window (5m, 30m, 1h, 6h)")
    burn_alert: Literal["page", "ticket"] | None = Field(
        None, description="page: 1h and 5m burn above fast_burn; ticket: 6h and 30m above slow_burn"
    )
    status: Literal["ok", "warning", "critical"]


class JobEstimateOut(Model):
    id: str
    status: Status
    gpus: int
    remaining_days: float
    efficiency_loss: float
    interruption_probability: float


class SizeEstimateOut(Model):
    gpus: int
    days: float
    interruption_probability: float


class SloOut(Model):
    updated_at: datetime
    objectives: list[ObjectiveOut]
    gpu_network_availability: float
    jobs: list[JobEstimateOut]
    estimates: list[SizeEstimateOut] = Field(description="a job of this size running this long on today's fabric")


# --- history ---------------------------------------------------------------------------------


class RailHistoryOut(Model):
    rail: int
    capacity_fraction: list[float | None] = Field(description="live/design uplink capacity of the whole rail")
    bottleneck_fraction: list[float | None] = Field(description="live/design uplinks of its weakest switch")
    load_gbps: list[float | None]


class HistoryOut(Model):
    start: datetime
    end: datetime
    step_s: float
    rail: int | None
    times: list[float] = Field(description="bucket starts, unix seconds; every series below is aligned with it")
    status: list[Status | None] = Field(description="the worst verdict in each bucket; null: no evaluation")
    ratio: dict[str, list[float | None]] = Field(
        description="down:up ratio, highest in the bucket: `all` (the roll-up's worst tier), per tier (leaf, "
        "spine, ...) and, fabric-wide, `worst switch` (the worst leaf or spine with an uplink left)"
    )
    ratio_infinite: dict[str, list[int]] = Field(
        description="per ratio series, the buckets (indexes into `times`) where it was infinite: every uplink down"
    )
    rails: list[RailHistoryOut]
    error_budget_remaining: dict[str, list[float | None]] = Field(
        description="per objective, the lowest budget left in the bucket (fabric-wide history only)"
    )


class SparklinesOut(Model):
    switch: str
    metric: str
    step_s: float
    times: list[float]
    ports: dict[str, list[float | None]]


# --- series ---------------------------------------------------------------------------------


class SeriesPoint(Model):
    time: datetime
    value: float | None


class SeriesOut(Model):
    switch: str
    port: str | None
    metric: Metric
    agg: Literal["avg", "max", "min"]
    start: datetime
    end: datetime
    step_s: float
    points: list[SeriesPoint]
