"""What the job endpoints answer: jobs, and one job's fabric health (see :mod:`api.schemas`)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from api.schemas import Model, Page, Severity, Status


class JobOut(Model):
    id: str
    hosts: list[str]
    started_at: datetime | None
    expected_days: float | None
    created_at: datetime
    gpus: int


class JobList(Page):
    items: list[JobOut]


class JobFaultOut(Model):
    """An open incident touching the job's hosts."""

    id: int | None = Field(description="the incident's alert id; null while it is pending confirmation")
    rule: str
    severity: Severity
    summary: str
    fingerprint: str
    recommended_action: Literal["drain", "checkpoint", "observe"]
    needs_review: bool
    affected_hosts: list[str]
    action_hosts: list[str] = Field(description="the job's hosts the action applies to")
    rails: list[int]


class JobAlertOut(Model):
    id: int
    rule: str
    severity: Severity
    summary: str
    started_at: datetime
    affected_hosts: list[str]


class JobRailOut(Model):
    rail: int
    status: Status
    leaves: list[str] = Field(description="the rail's leaves under the job's hosts")
    spines: int = Field(description="spines of the rail that join those leaves")
    faults: int


class JobHealthOut(Model):
    id: str
    status: Status
    evaluated_at: datetime
    stale: bool
    hosts: int
    gpus: int
    unknown_hosts: list[str]
    groups: list[int]
    rails: list[JobRailOut]
    faults: list[JobFaultOut]
    alerts: list[JobAlertOut] = Field(description="firing alerts whose blast radius touches the job's hosts")
    efficiency_loss: float
    remaining_days: float
    interruption_probability: float
