"""The ``analyzer`` and ``alerts`` configuration sections (owned by the analyzer)."""

from __future__ import annotations

from typing import Literal

from pydantic import AnyHttpUrl, Field, SecretStr

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
    rail_load_straggler: float = Field(0.25, ge=0, le=1)
    ecmp_imbalance_cv: float = Field(0.2, ge=0)
    flaps_per_window: int = Field(3, ge=1)
    flap_window_s: float = Field(300.0, gt=0)
    fatal_outage_s: float = Field(7.0, gt=0)
    pfc_pause_ratio: float = Field(0.05, ge=0, le=1)
    pfc_storm_min_s: float = Field(10.0, ge=0)
    fcs_errors_per_hour: float = Field(120.0, ge=0)
    discards_ratio: float = Field(1e-4, ge=0, le=1)
    stale_intervals: float = Field(3.0, ge=1)


class AnalyzerConfig(Section):
    """The analyzer's cadence and thresholds."""

    interval_s: float = Field(10.0, gt=0, le=3600)
    resolve_hold_down_s: float = Field(60.0, ge=0)
    thresholds: ThresholdsConfig = ThresholdsConfig()


class WebhookConfig(Section):
    """One alert receiver. The secret signs every delivery (SPEC §5)."""

    url: AnyHttpUrl
    secret: SecretStr | None = None
    format: Literal["fabricmon", "alertmanager"] = "fabricmon"
    timeout_s: float = Field(10.0, gt=0, le=300)
    max_attempts: int = Field(0, ge=0)  # 0: retry until delivered


class AlertsConfig(Section):
    """Where alert transitions are sent."""

    webhooks: list[WebhookConfig] = []
