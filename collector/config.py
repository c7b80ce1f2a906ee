"""The ``targets`` and ``collector`` configuration sections (owned by the collectors)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from collector.clock import DEFAULT_MAX_CLOCK_SKEW_S
from config.base import Section, check_hostport

#: Default for ``collector.pfc_heartbeat_s``: the longest a quiet port goes without PFC rows
#: (collector/counters.py). Declared here so that loading the config never imports the hot path.
PFC_HEARTBEAT_S = 300.0


class TlsConfig(Section):
    """gNMI transport security (SPEC §10.6): TLS with certificate verification unless switched off.

    ``ca_file`` None trusts the system's CAs. ``server_name`` is the name the switch's certificate
    must carry (and the SNI sent) when it is not the address's host: many switches present a
    certificate for their host name, or an IP-only one, while the collector dials another name.
    ``enabled: false`` is plaintext and needs the target's ``insecure: true`` as well.
    """

    enabled: bool = True
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name: str | None = None

    @model_validator(mode="after")
    def _pair(self) -> TlsConfig:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("mTLS needs both 'cert_file' and 'key_file'")
        return self


#: Plaintext gRPC, for targets that say ``insecure: true`` (and tests against a plaintext server).
PLAINTEXT = TlsConfig(enabled=False)


class SnmpV3Config(Section):
    """SNMPv3 USM credentials (authPriv)."""

    user: str
    auth_protocol: Literal["sha", "sha224", "sha256", "sha384", "sha512", "md5"] = "sha"
    auth_key: SecretStr
    priv_protocol: Literal["aes", "aes192", "aes256", "des"] = "aes"
    priv_key: SecretStr
    #: Context name; ``{switch}`` selects one switch of a multi-switch agent such as the simulator.
    context: str = ""


class TargetConfig(Section):
    """Which switches to reach, over which protocol, where. The first entry matching a switch wins.

    String fields may use ``{switch}`` and inventory fields such as ``{mgmt_address}``;
    ``${ENV_VAR}`` anywhere in the file is replaced from the environment (for secrets).
    """

    switches: list[str] = Field(min_length=1)
    protocol: Literal["gnmi", "snmp"]
    address: str
    # gNMI
    target: str | None = "{switch}"
    profile: str = "openconfig"
    tls: TlsConfig = TlsConfig()
    #: Plaintext on purpose: required beside ``tls: {enabled: false}`` (SPEC §10.6).
    insecure: bool = False
    #: ``username``/``password`` may travel in plaintext gRPC metadata (refused otherwise).
    allow_plaintext_credentials: bool = False
    username: str | None = None
    password: SecretStr | None = None
    # SNMP
    version: Literal["2c", "3"] = "2c"
    community: SecretStr | None = None
    v3: SnmpV3Config | None = None
    timeout_s: float = Field(5.0, gt=0, le=120)
    retries: int = Field(2, ge=0, le=10)

    _check_address = field_validator("address")(staticmethod(check_hostport))

    @model_validator(mode="after")
    def _credentials(self) -> TargetConfig:
        if self.protocol == "snmp" and self.version == "3" and self.v3 is None:
            raise ValueError("SNMP version 3 needs a 'v3' block (user, auth_key, priv_key)")
        if self.protocol == "snmp" and self.version == "2c" and self.community is None:
            raise ValueError("SNMP v2c needs 'community' (e.g. '{switch}' for the simulator)")
        if self.protocol == "gnmi":
            self._transport_security()
        return self

    def _transport_security(self) -> None:
        """SPEC §10.6: plaintext only when asked for twice, credentials never in it unless allowed."""
        who = f"gNMI target {', '.join(self.switches)}"
        if self.tls.enabled and self.insecure:
            raise ValueError(
                f"{who}: 'insecure: true' means plaintext and needs 'tls: {{enabled: false}}'; to keep TLS, "
                "drop 'insecure' (certificates are always verified: set tls.ca_file or tls.server_name)"
            )
        if not self.tls.enabled and not self.insecure:
            raise ValueError(
                f"{who}: 'tls: {{enabled: false}}' is plaintext gRPC; say 'insecure: true' as well to mean it"
            )
        has_credentials = self.username is not None or self.password is not None
        if not self.tls.enabled and has_credentials and not self.allow_plaintext_credentials:
            raise ValueError(
                f"{who}: username/password would travel in plaintext; enable TLS, "
                "or set 'allow_plaintext_credentials: true' to send them anyway"
            )


_SHARD = re.compile(r"^(\d+)/(\d+)$")
#: The most shard workers one ``fabricmon collect --workers`` runs.
MAX_WORKERS = 64


class CollectorConfig(Section):
    """How often and how hard the collectors work."""

    removed_keys: ClassVar[Mapping[str, str]] = {
        "queue_rows": "it was never read; the writer's buffer is database.writer.max_pending_rows",
        "stale_intervals": "it was never read; the stale_switch alarm uses analyzer.thresholds.stale_intervals",
    }

    gnmi_interval_s: float = Field(10.0, gt=0, le=3600)
    snmp_interval_s: float = Field(60.0, gt=0, le=86400)
    #: Transceiver DOM sampling (gNMI and SNMP): DOM moves slowly (SONiC refreshes it every 60 s).
    #: SNMP reads it in a loop of its own, apart from the counters' polls.
    dom_interval_s: float = Field(60.0, gt=0, le=86400)
    #: FEC counters and BER over gNMI (link health, judged over hours): sampled this often, not at
    #: the counters' interval; set it to gnmi_interval_s to see bursts of seconds (at ~5x the cost).
    fec_interval_s: float = Field(60.0, gt=0, le=86400)
    #: The transceivers' own alarm and warning thresholds over gNMI: they change only when a module
    #: is swapped, so they are read this often (every DOM sample carries the last ones read).
    thresholds_interval_s: float = Field(600.0, gt=0, le=86400)
    gnmi_mode: Literal["stream", "poll"] = "stream"
    snmp_concurrency: int = Field(64, ge=1, le=10_000)
    gnmi_concurrency: int = Field(1024, ge=1, le=100_000)
    #: How gNMI streams reach their switches: ``h2``, fabricmon's own HTTP/2 gRPC client (one
    #: wake-up per socket read, ~3x less CPU per message), or ``grpc``, grpc.aio (a fallback for a
    #: device our client cannot talk to). See collector/gnmi_transport.py.
    gnmi_transport: Literal["h2", "grpc"] = "h2"
    #: ``"I/N"``: this process collects the I-th of N deterministic shards of the targets.
    #: ``"auto"``: it claims shard leases of ``shards`` in the database (collector/auto_shards.py).
    shard: str | None = None
    #: With ``shard: auto``: how many shards the fabric is cut into (each a lease; run this many
    #: collectors, plus standbys). Required there, unused otherwise.
    shards: int | None = Field(None, ge=1, le=MAX_WORKERS)
    #: With ``shard: auto``: a lease not renewed for this long (a dead or frozen collector) is
    #: taken over. Renewals run every ``lease_ttl_s / 5``, at most every second.
    lease_ttl_s: float = Field(15.0, ge=1, le=600)
    #: ``fabricmon collect`` runs this many shard workers (child processes, one per shard) under one
    #: supervisor with one /metrics; ``auto``: the usable cores minus one, at least 1. None: one
    #: process collects everything (or the ``shard`` above). ``--workers`` overrides it; ``--shard``
    #: (how each worker is started) ignores it. See collector/workers.py.
    workers: int | Literal["auto"] | None = None
    #: ``host:port`` for a Prometheus /metrics endpoint of ``fabricmon collect`` (off by default;
    #: ``fabricmon run`` serves the collector's metrics on the API's /metrics instead).
    metrics_listen: str | None = None
    #: PFC rows are stored when a pause counter moved, for the sample after, and at least this
    #: often per port (seconds); 0 stores every sample (eight rows per port per interval).
    pfc_heartbeat_s: float = Field(PFC_HEARTBEAT_S, ge=0, le=86400)
    #: A device timestamp further than this from receive time is not trusted: the switch's readings
    #: are placed at receive time (by a learned offset, so their intervals stay exact) and counted
    #: (``fabricmon_collector_clock_skew_seconds``, ``/v1/switches/{name}``); see collector/clock.py.
    #: At least 5 s: readings reach the check up to ~2 s after they arrived, so a tighter bound
    #: would take good clocks for bad ones.
    max_clock_skew_s: float = Field(DEFAULT_MAX_CLOCK_SKEW_S, ge=5, le=86400)

    @field_validator("shard")
    @classmethod
    def _shard(cls, value: str | None) -> str | None:
        if value is None or value == "auto":
            return value
        match = _SHARD.match(value)
        if not match or not 0 <= int(match.group(1)) < int(match.group(2)):
            raise ValueError(f"shard must be 'I/N' with 0 <= I < N, or 'auto', got {value!r}")
        return value

    @model_validator(mode="after")
    def _auto_needs_shards(self) -> CollectorConfig:
        if self.shard == "auto" and self.shards is None:
            raise ValueError("shard: auto needs 'shards' (how many shards to cut the fabric into)")
        return self

    @field_validator("workers", mode="before")
    @classmethod
    def _workers(cls, value: object) -> object:
        if value is None or value == "auto":
            return value
        try:
            count = int(str(value))
        except ValueError:
            count = 0
        if isinstance(value, bool) or not 1 <= count <= MAX_WORKERS:
            raise ValueError(f"workers must be 1 to {MAX_WORKERS} or 'auto', got {value!r}")
        return count
