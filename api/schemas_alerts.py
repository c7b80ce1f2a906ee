"""What the alert, incident, action and maintenance-window endpoints answer (see :mod:`api.schemas`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from api.schemas import Model, Page, ScopeOut, Severity


class RootCauseOut(Model):
    """Where an incident's root cause is (fields it has no value for are null)."""

    rule: str | None = None
    key: str | None = None
    switch: str | None = None
    port: str | None = None
    server: str | None = None
    rail: int | None = None


class SymptomOut(Model):
    rule: str
    key: str
    severity: Severity
    summary: str
    scope: ScopeOut


class AlertOut(Model):
    id: int
    fingerprint: str
    rule: str
    severity: Severity
    state: Literal["firing", "resolved"]
    summary: str
    scope: ScopeOut
    details: dict[str, Any]
    started_at: datetime
    ended_at: datetime | None
    last_seen_at: datetime
    acked_at: datetime | None
    acked_by: str | None
    root_cause: RootCauseOut = Field(description="the root cause: rule, key and where it is")
    symptoms: list[SymptomOut] = Field(description="the other findings this incident explains")
    recommended_action: Literal["drain", "checkpoint", "observe"]
    action_hosts: list[str] = Field(description="the hosts the action applies to (drain them, checkpoint their jobs)")
    needs_review: bool = Field(description="the circuit breaker withheld a drain: a person decides")
    reason: str | None = Field(description="why this action")
    maintenance: bool = Field(
        description="its root cause is inside a maintenance window in force: action observe (SPEC §10.4)"
    )


class AlertList(Page):
    state: Literal["firing", "resolved", "all"]
    items: list[AlertOut]


class ActionOut(Model):
    """A scheduler action taken, pending or withheld (store/scheduler_actions.py)."""

    id: str
    time: datetime = Field(description="when the incident transition stored it")
    incident: int | None
    scheduler: str
    action: Literal["drain", "resume", "checkpoint"]
    status: Literal["pending", "done", "failed", "withheld", "dry_run"]
    hosts: list[str] = Field(description="fabric servers the incident named")
    nodes: list[str] = Field(description="scheduler nodes acted on (or that would be, in a dry run)")
    reason: str
    commands: list[str] = Field(description="what was run, or would be in a dry run")
    result: dict[str, Any] | None = Field(description="per host: what happened and why")
    attempts: int = Field(ge=0)
    last_error: str | None
    done_at: datetime | None


class ActionList(Page):
    items: list[ActionOut]


class IncidentEventOut(Model):
    time: datetime
    event: Literal["opened", "escalated", "changed", "resolved"]
    severity: Severity
    action: Literal["drain", "checkpoint", "observe"]
    rule: str
    summary: str
    symptoms: int = Field(ge=0)


class DeliveryOut(Model):
    time: datetime = Field(description="when the transition stored it")
    webhook: str = Field(description="the receiver's key (a hash of its URL)")
    event: Literal["alert.firing", "alert.resolved"]
    status: Literal["pending", "delivered", "failed", "superseded"]
    attempts: int
    delivered_at: datetime | None
    last_error: str | None


class IncidentOut(AlertOut):
    """One incident with its timeline and its webhook deliveries."""

    timeline: list[IncidentEventOut]
    deliveries: list[DeliveryOut] = []


# --- maintenance ------------------------------------------------------------------------------


class WindowOut(Model):
    """A maintenance window (SPEC §10.4)."""

    id: int
    switches: list[str]
    servers: list[str]
    rails: list[int]
    start: datetime
    end: datetime
    reason: str
    source: str = Field(description="`api`, or `slurm:<reservation>` for a Slurm MAINT reservation")
    created_at: datetime
    active: bool = Field(description="in force now")


class WindowList(Page):
    items: list[WindowOut]
