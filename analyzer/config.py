"""The ``analyzer`` and ``alerts`` configuration sections (owned by the analyzer)."""

from __future__ import annotations

from typing import Literal

from pydantic import AnyHttpUrl, Field, SecretStr, field_validator, model_validator
from pydantic_core import PydanticCustomError

from config.base import Section


class ThresholdsConfig(Section):
    """When a measurement becomes a finding. Defaults follow vendor and SRE practice (docs/)."""

    #: Live down:up above design by more than this fraction is drift. One of 64 uplinks lost is
    #: +1.6 %, one dropped from 400G to 200G +0.8 %: both must show, so the default is small.
    oversubscription_tolerance: float = Field(0.005, ge=0, le=10)
    #: Drift at or above this ratio (live/design) is critical.
    oversubscription_critical: float = Field(1.25, ge=1)
    #: A rail's bottleneck-leaf uplink capacity below the best rail's by more than this fraction.
    rail_capacity_asymmetry: float = Field(0.005, ge=0, le=1)
    #: Rails are compared for load only while the fabric carries at least this much (Gbit/s per rail).
    rail_load_min_gbps: float = Field(100.0, ge=0)
    #: A rail carrying this fraction less than the median rail is a straggler.
    rail_load_straggler: float = Field(0.25, ge=0, le=1)
    #: Rail loads are mean rates over this many seconds (or 1.5 sampling intervals if longer):
    #: three or more training steps, as each switch samples at its own phase of a step.
    rail_load_window_s: float = Field(12.0, ge=0, le=3600)
    ecmp_imbalance_cv: float = Field(0.2, ge=0)
    flaps_per_window: int = Field(3, ge=1)
    flap_window_s: float = Field(300.0, gt=0)
    fatal_outage_s: float = Field(7.0, gt=0)
    pfc_pause_ratio: float = Field(0.05, ge=0, le=1)
    pfc_storm_min_s: float = Field(10.0, ge=0)
    fcs_errors_per_hour: float = Field(120.0, ge=0)
    discards_ratio: float = Field(1e-4, ge=0, le=1)
    stale_intervals: float = Field(3.0, ge=1)
    #: Correlated flaps (analyzer/stability.py): when ``switch_flap_min_ports`` ports of one switch, or
    #: ``switch_flap_port_share`` of its cabled ports if that is fewer (never under 2), flap within
    #: ``switch_flap_spread_s`` of each other (at least one sampling interval), the fault is the switch.
    switch_flap_min_ports: int = Field(4, ge=2)
    switch_flap_port_share: float = Field(0.25, gt=0, le=1)
    switch_flap_spread_s: float = Field(5.0, gt=0)
    #: An FCS/CRC error rate counts only when the window holds at least this many errors, so one
    #: stray error in a short window is not "120 errors per hour".
    error_min_count: int = Field(2, ge=1)
    #: Link health (analyzer/link_health.py): trends are fitted over this window ...
    link_window_s: float = Field(6 * 3600.0, gt=0)
    #: ... the predicted frame loss is taken from the FEC bins of this last part of it ...
    link_flr_window_s: float = Field(600.0, gt=0)
    #: ... a link predicted to fail within this is ``link_degrading`` ...
    link_horizon_s: float = Field(24 * 3600.0, gt=0)
    #: ... when its trend is at least this sure (a step, such as a dirty connector, never is).
    link_min_confidence: float = Field(0.6, ge=0, le=1)
    #: The limits of a module that reports none of its own (SFF-8636/CMIS alarm levels of a
    #: typical 400G module), and the pre-FEC BER past which RS(544,514) stops correcting.
    rx_low_critical_dbm: float = Field(-10.0, ge=-60, le=20)
    bias_high_critical_ma: float = Field(13.0, gt=0, le=1000)
    pre_fec_ber_critical: float = Field(2.4e-4, gt=0, le=1)


class SloConfig(Section):
    """Stability objectives (see analyzer/objectives.py)."""

    window_days: float = Field(30.0, gt=0)
    link_availability: float = Field(0.9999, gt=0, lt=1)
    #: Per-GPU monthly probability of no training-fatal network outage; FABRIC.md shows 0.9999 on
    #: 8,000 GPUs still interrupts 55 % of month-long jobs, so the network should do better.
    gpu_network_availability: float = Field(0.99999, gt=0, lt=1)
    fast_burn: float = Field(14.4, gt=0)
    slow_burn: float = Field(6.0, gt=0)


class AnalyzerConfig(Section):
    """The analyzer's cadence and thresholds."""

    interval_s: float = Field(10.0, gt=0, le=3600)
    resolve_hold_down_s: float = Field(60.0, ge=0)
    #: The latest window spans this many collector sampling intervals (rates are averaged over it).
    window_intervals: float = Field(3.0, ge=1)
    #: Analyzers of one database elect a leader (a PostgreSQL advisory lock, analyzer/leader.py):
    #: only it evaluates, sends webhooks, pushes to Alertmanagers and drives the schedulers; a
    #: standby leads within two intervals of the leader's death. Off: every analyzer acts (the
    #: database still keeps them from double-sending, at twice the work).
    leader_election: bool = True
    #: Link health (analyzer/link_health.py) fits its trends at most this often, beside the rounds,
    #: and reuses its findings in between (analyzer/cadence.py): DOM is sampled every
    #: ``collector.dom_interval_s`` (60 s); a change shows at most this much later. 0: every round.
    link_health_interval_s: float = Field(60.0, ge=0, le=3600)
    thresholds: ThresholdsConfig = ThresholdsConfig()
    slo: SloConfig = SloConfig()


class WebhookConfig(Section):
    """One alert receiver. The secret signs every delivery (SPEC §5)."""

    url: AnyHttpUrl
    secret: SecretStr | None = None
    format: Literal["fabricmon", "alertmanager"] = "fabricmon"
    timeout_s: float = Field(10.0, gt=0, le=300)
    max_attempts: int = Field(0, ge=0)  # 0: retry until delivered
    #: Retry delay after the first failed attempt; doubles per attempt, ±20 % jitter.
    backoff_initial_s: float = Field(1.0, gt=0, le=3600)
    #: Upper bound of the retry delay.
    backoff_max_s: float = Field(300.0, gt=0, le=86400)


class BasicAuthConfig(Section):
    """HTTP basic authentication in front of an Alertmanager (a reverse proxy's, typically)."""

    username: str = Field(min_length=1)
    password: SecretStr


class AlertmanagerConfig(Section):
    """One Alertmanager that gets every push (``POST <url>/api/v2/alerts``, analyzer/alertmanager.py).

    List each member of an HA pair or cluster: every push goes to all of them, never
    load-balanced; their peers deduplicate the notifications."""

    #: The Alertmanager's base URL (``http://alertmanager:9093``, plus its ``--web.route-prefix``).
    url: AnyHttpUrl
    timeout_s: float = Field(10.0, gt=0, le=300)
    basic_auth: BasicAuthConfig | None = None
    bearer_token: SecretStr | None = None

    @field_validator("url")
    @classmethod
    def _base_url(cls, url: AnyHttpUrl) -> AnyHttpUrl:
        if url.query or url.fragment:
            raise _error("an Alertmanager URL has no query or fragment")
        if (url.path or "").rstrip("/").endswith(("/api/v2/alerts", "/api/v1/alerts", "/api/v2", "/api/v1")):
            raise _error(
                f"give the Alertmanager's base URL (e.g. http://alertmanager:9093), not its API path"
                f" {url.path!r}; fabricmon adds /api/v2/alerts"
            )
        return url

    @model_validator(mode="after")
    def _one_credential(self) -> AlertmanagerConfig:
        if self.basic_auth is not None and self.bearer_token is not None:
            raise _error("give either basic_auth or bearer_token, not both")
        if (self.url.username or self.url.password) and (self.basic_auth is not None or self.bearer_token is not None):
            raise _error("url carries credentials and basic_auth/bearer_token is set too: give them once")
        return self


def _error(message: str) -> PydanticCustomError:
    """A validation error whose text is exactly ``message`` (no "Value error, " prefix)."""
    return PydanticCustomError("invalid", message)


class AlertsConfig(Section):
    """Where alert transitions are sent."""

    webhooks: list[WebhookConfig] = []
    #: ``recommended_action`` is ``checkpoint`` when a finding's estimated training-efficiency loss
    #: (``details.efficiency_loss``) reaches this fraction (analyzer/actions.py) ...
    checkpoint_efficiency_loss: float = Field(0.05, ge=0, le=1)
    #: ... or its job interruption probability (``details.interruption_probability``) reaches this.
    checkpoint_interruption_probability: float = Field(0.5, ge=0, le=1)
    #: A link predicted to fail (analyzer/link_health.py) sooner than this checkpoints the jobs
    #: it carries (issue 26); a drain follows only if it actually fails.
    checkpoint_lead_s: float = Field(7200.0, gt=0, le=7 * 86400)
    #: Circuit breaker (analyzer/actions.py): one incident never recommends draining more hosts
    #: than this; above it the action is ``observe`` with ``needs_review`` and a person decides.
    max_drain_hosts: int = Field(8, ge=0)
    #: ... nor more than this share of the fabric's servers (never fewer than one host).
    max_drain_fraction: float = Field(0.01, ge=0, le=1)
    #: Fabric-wide drain budget (analyzer/budget.py): the hosts drained by all open incidents
    #: together (and by resolved ones not resumed yet) never exceed this; an incident whose drain
    #: would is ``observe`` with ``needs_review``.
    drain_budget_hosts: int = Field(16, ge=0)
    #: ... nor this share of the fabric's servers (never fewer than one host); the smaller wins.
    drain_budget_fraction: float = Field(0.05, ge=0, le=1)
    #: Checkpoint circuit breaker: the hosts whose jobs all open incidents checkpoint at once never
    #: exceed this; an incident whose checkpoint would is ``observe`` with ``needs_review``.
    max_checkpoint_hosts: int = Field(256, ge=0)
    #: ... nor this share of the fabric's servers (never fewer than one host); the smaller wins.
    max_checkpoint_fraction: float = Field(1.0, ge=0, le=1)
    #: A host drained for an incident is resumed only once the incident has stayed resolved this
    #: long without re-opening (a re-open carries the resume to its own resolution).
    resume_after_s: float = Field(600.0, ge=0, le=86400)
    #: A receiver answering 4xx (other than 408 and 429) this many times has the delivery marked
    #: failed: a client error does not heal by retrying.
    max_attempts_4xx: int = Field(5, ge=1)
    #: Where people reach fabricmon (the API/dashboard base URL): the Alertmanager format's
    #: ``externalURL`` and ``generatorURL``. Absent: those fields are empty strings.
    external_url: AnyHttpUrl | None = None
    #: Alertmanagers that get every firing and recently resolved incident after each evaluation,
    #: as Prometheus sends its alerts (analyzer/alertmanager.py). An HA pair: list both.
    alertmanagers: list[AlertmanagerConfig] = []

    @field_validator("alertmanagers")
    @classmethod
    def _distinct_alertmanagers(cls, value: list[AlertmanagerConfig]) -> list[AlertmanagerConfig]:
        seen: set[str] = set()
        for am in value:
            url = am.url  # compared without credentials: one Alertmanager is one place
            where = f"{url.scheme}://{url.host}:{url.port}{(url.path or '').rstrip('/')}"
            if where in seen:
                raise _error(f"{where} is listed twice (every listed Alertmanager gets every push)")
            seen.add(where)
        return value
