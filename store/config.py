"""The ``database`` configuration section (owned by the storage layer)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr

from config.base import Section


class RetentionConfig(Section):
    """How long raw telemetry is kept, and when chunks are compressed (where the license allows)."""

    port_counters_days: float = Field(7.0, gt=0)
    pfc_counters_days: float = Field(7.0, gt=0)
    link_events_days: float = Field(90.0, gt=0)
    reachability_days: float = Field(30.0, gt=0)
    oversubscription_days: float = Field(90.0, gt=0)
    analyzer_runs_days: float = Field(30.0, gt=0)
    #: FEC counters and transceiver DOM (issue 26): trends are fitted over hours, kept a month.
    link_health_days: float = Field(30.0, gt=0)
    compress_after_hours: float = Field(6.0, gt=0)
    #: How often the service runs drop_chunks itself when the server has no retention policies.
    drop_chunks_every_s: float = Field(3600.0, gt=0)


class WriterConfig(Section):
    """The batched COPY writer: flush on batch size or on a timer, whichever comes first."""

    batch_rows: int = Field(5000, ge=1, le=1_000_000)
    flush_interval_s: float = Field(1.0, gt=0, le=3600)
    #: Rows buffered per writer before ``put`` waits (back-pressure, never a silent drop).
    max_pending_rows: int = Field(200_000, ge=1)
    spool_dir: Path | None = None
    spool_max_mb: float = Field(1024.0, gt=0)
    #: Longest wait between attempts while the database cannot take writes (read-only, disk full,
    #: unreachable): attempts back off from ``flush_interval_s`` (at most 1 s) up to this.
    retry_max_s: float = Field(5.0, gt=0, le=300)
    #: A write (one batch) that takes longer is abandoned and retried: a database that stopped
    #: answering (a failover without a TCP reset) must not hold the table's writes for minutes.
    write_timeout_s: float = Field(20.0, gt=0, le=3600)


class DatabaseConfig(Section):
    """Where telemetry goes. No ``dsn``: the embedded store (``fabricmon db``)."""

    dsn: SecretStr | None = None
    pool_min: int = Field(1, ge=1)
    pool_max: int = Field(8, ge=1)
    connect_timeout_s: float = Field(10.0, gt=0)
    retention: RetentionConfig = RetentionConfig()
    writer: WriterConfig = WriterConfig()
