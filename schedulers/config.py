"""The ``schedulers`` configuration section (SPEC §9.3): Slurm, through its own commands or slurmrestd."""

from __future__ import annotations

import signal
from pathlib import Path

from pydantic import AnyHttpUrl, Field, SecretStr, field_validator

from config.base import Section
from schedulers.node_map import NodeMapError, node_map


class SlurmRestConfig(Section):
    """slurmrestd (its ``rest_auth/jwt`` over TCP) instead of ``squeue``/``sinfo``/``scontrol``/``scancel``.

    What each API version can do (:mod:`schedulers.slurm_rest`): jobs and nodes are read from
    v0.0.38 (Slurm 22.05) on; drain and resume need v0.0.39 (Slurm 23.02) or later; a checkpoint
    signal to the batch step only needs v0.0.40 (Slurm 23.11) or later.
    """

    #: slurmrestd's base URL (``http://slurmctl:6820``; a path prefix behind a proxy is kept).
    url: AnyHttpUrl
    #: ``X-SLURM-USER-NAME``: the user the token was made for.
    user: str = Field("root", min_length=1)
    #: ``X-SLURM-USER-TOKEN``: a JWT from ``scontrol token username=<user> lifespan=<s>``
    #: (``token: ${SLURM_JWT}`` reads it from the environment). Never logged.
    token: SecretStr
    #: The OpenAPI plugin version in the paths (``/slurm/v0.0.38/...``): Slurm 22.05 serves up to
    #: v0.0.38, 23.02 v0.0.39, 23.11 v0.0.40, 24.05 v0.0.41, 24.11 v0.0.42; ``GET /openapi/v3`` lists them.
    api_version: str = Field("v0.0.38", pattern=r"^v\d+\.\d+\.\d+$")

    @field_validator("token")
    @classmethod
    def _token(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().strip():
            raise ValueError("empty token (make one with: scontrol token username=<user> lifespan=<seconds>)")
        return value

    @field_validator("api_version")
    @classmethod
    def _api_version(cls, value: str) -> str:
        if tuple(int(p) for p in value[1:].split(".")) < (0, 0, 38):
            raise ValueError(f"{value} is not supported: v0.0.38 (Slurm 22.05) or later")
        return value


class SlurmConfig(Section):
    """Slurm both ways: running jobs in, drains and resumes out."""

    #: Running jobs become fabricmon jobs, id ``slurm:<jobid>``; finished ones leave.
    discover_jobs: bool = True
    #: Reservations with the MAINT flag are maintenance windows for their nodes (SPEC §10.4).
    maintenance_windows: bool = True
    poll_s: float = Field(30.0, ge=1, le=3600)
    #: An incident whose action is drain drains its hosts; RESUME when it resolves.
    drain: bool = True
    #: Sent to the jobs' batch steps when an incident recommends checkpoint (e.g. USR1); off when null.
    checkpoint_signal: str | None = None
    #: Log and record what would be done; change nothing in Slurm.
    dry_run: bool = False
    #: Slurm node name <-> fabric server name: a table {node: server}, or {slurm: "gpu{n}",
    #: fabric: "srv-{n}"}; identity when null.
    node_map: dict[str, str] | None = None
    rest: SlurmRestConfig | None = None
    #: Where ``squeue``, ``sinfo``, ``scontrol`` and ``scancel`` are (null: the PATH). ``SLURM_CONF``
    #: from the environment is honoured, or set here.
    bin_dir: Path | None = None
    slurm_conf: Path | None = None
    #: Each Slurm command's deadline (a controller that is away makes clients wait ~10 s).
    command_timeout_s: float = Field(30.0, gt=0, le=600)
    #: Retry delay while slurmctld is away: from 1 s, doubling, at most this.
    retry_max_s: float = Field(60.0, ge=1, le=3600)
    #: An action Slurm refuses (not an outage: an unknown node, a permission) this many times in a
    #: row is given up (``failed``), like a webhook's 4xx.
    max_attempts_refused: int = Field(5, ge=1)
    #: Fleet-wide circuit breaker: never more nodes drained with a fabricmon reason at once than
    #: this, whatever the incidents add up to (each incident's own limit is ``alerts.max_drain_*``).
    max_drained_nodes: int = Field(16, ge=0)

    @field_validator("checkpoint_signal")
    @classmethod
    def _signal(cls, value: str | None) -> str | None:
        if value is None:
            return None
        name = value.upper().removeprefix("SIG")
        if f"SIG{name}" not in signal.Signals.__members__ and not name.isdigit():
            raise ValueError(f"unknown signal {value!r} (e.g. USR1, USR2, TERM)")
        return name

    @field_validator("node_map")
    @classmethod
    def _node_map(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        try:
            node_map(value)
        except NodeMapError as exc:
            raise ValueError(str(exc)) from None
        return value


class SchedulersConfig(Section):
    """The schedulers fabricmon drives (none by default)."""

    slurm: SlurmConfig | None = None
