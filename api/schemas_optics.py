"""What ``GET /v1/optics`` answers (issue 26): one port's transceiver DOM and FEC over a range,
the module's thresholds (or the configured ones it falls back on), and its FEC histogram."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from api.schemas import Model

Source = Literal["module", "configured"]


class DomPoint(Model):
    time: datetime = Field(description="the bucket's start")
    rx_power_dbm: float | None = Field(description="received power, the worst lane's, averaged over the bucket")
    tx_power_dbm: float | None
    laser_bias_ma: float | None
    temperature_c: float | None


class FecPoint(Model):
    time: datetime = Field(description="the bucket's start")
    pre_fec_ber: float | None
    post_fec_ber: float | None
    corrected_per_s: float | None = Field(description="codewords corrected per second")
    uncorrectable_per_s: float | None = Field(description="codewords FEC could not correct per second")


class OpticsThresholds(Model):
    """The limits the link-health check judges this port against (analyzer/link_health.py)."""

    rx_low_warning_dbm: float | None = Field(description="the module's low rx WARNING; null: it reports none")
    rx_low_critical_dbm: float = Field(description="the module's low rx CRITICAL, else the configured one")
    rx_from: Source
    bias_high_warning_ma: float | None = Field(description="the module's high bias WARNING; null: it reports none")
    bias_high_critical_ma: float = Field(description="the module's high bias CRITICAL, else the configured one")
    bias_from: Source
    pre_fec_ber_critical: float = Field(description="configured (modules have no BER threshold)")


class FecHistogram(Model):
    """Codewords by symbol errors over the range: the bins' growth from ``start`` (the range's first
    sample with bins, or the first after the counters were cleared) to ``end``."""

    start: datetime = Field(description="the first sample with bins in the range (after the last clear in it)")
    end: datetime = Field(description="the last sample with bins in the range")
    bins: list[int] = Field(
        min_length=16, max_length=16, description="S0..S15: codewords with k symbol errors (k = index)"
    )
    predicted_flr: float | None = Field(
        description="post-FEC frame loss ratio extrapolated from the bins (null: too little evidence)"
    )


class OpticsOut(Model):
    switch: str
    port: str
    component: str | None = Field(description="the transceiver the device maps to this port (latest); null: no DOM")
    start: datetime
    end: datetime
    step_s: float
    thresholds: OpticsThresholds
    dom: list[DomPoint] = Field(description="buckets with DOM samples, oldest first")
    fec: list[FecPoint] = Field(description="buckets with FEC samples, oldest first")
    histogram: FecHistogram | None = Field(
        description="null where the device has no bins in the range (only SONiC and Cumulus count them)"
    )
