"""Webhook bodies (the ``fabricmon`` and ``alertmanager`` formats) and their HMAC signature (SPEC §5).

Bodies are built once, when a delivery is enqueued, and stored as the exact bytes that are
signed and sent on every attempt: compact UTF-8 JSON. Times are RFC 3339 in UTC with
milliseconds (``2026-11-30T12:00:00.000Z``).

``format: fabricmon`` (the default)::

    {"event": "alert.firing"|"alert.resolved",
     "alert": {id, fingerprint, rule, severity, state, summary, scope, details, started_at,
               ended_at, last_seen_at, acked_at, acked_by, root_cause, symptoms,
               recommended_action, action_hosts, needs_review, reason, maintenance},
     "affected": {switches, ports, rails, servers, gpus},
     "jobs": [{id, affected_hosts}],
     "recommended_action": "drain"|"checkpoint"|"observe",
     "action_hosts": [...], "needs_review": bool, "maintenance": bool}

An alert is an incident (SPEC §9.1): ``rule`` is its root cause's rule, ``symptoms`` the other
findings it explains. ``recommended_action`` is the incident's action (rules in
:mod:`analyzer.actions`) and ``action_hosts`` the hosts it applies to (the hosts to drain, or
whose jobs to checkpoint); ``affected`` is the union blast radius. An ``alert.resolved`` carries
the action the incident held, which is what to undo (resume the drained hosts). A second
``alert.firing`` for an ``alert.id`` already sent is an escalation (higher severity, stronger
action, review needed, more hosts to drain); its delivery id is new. ``maintenance`` is true while
the incident's root cause is inside a maintenance window (SPEC §10.4): its action is then
``observe``, whatever the fault.

``format: alertmanager``: the Prometheus Alertmanager webhook body, version "4"
(``notify/webhook`` ``Message``: ``template.Data`` plus ``version``, ``groupKey``,
``truncatedAlerts``), one alert per body. Labels, fixed when the incident opens and the same on
every firing and on the resolve: ``alertname`` (the root rule), ``fingerprint``, and
``switch``, ``port``, ``rail``, ``group``, ``server`` when the scope holds exactly one of them.
Annotations: ``summary``, ``description``, ``severity``, ``recommended_action``,
``needs_review``, ``maintenance`` (``"true"`` inside a window), ``action_hosts``, ``root_cause``,
``symptoms``, ``alert_id``, ``gpus``, ``jobs`` (comma-separated job ids, when any). ``endsAt``
is ``0001-01-01T00:00:00Z`` while firing. The group is the alert itself (``alertname`` and
``fingerprint``), so receivers that open one incident per ``groupKey`` open one per fabricmon
incident.

Signing: ``X-Fabricmon-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>``
where ``timestamp`` is ``X-Fabricmon-Timestamp`` (unix seconds of that attempt). A webhook
without a secret gets no signature header. Receivers check with :func:`verify_signature`, which
also refuses a timestamp more than five minutes old or ahead (:data:`MAX_SIGNATURE_AGE_S`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from analyzer.actions import Action, AffectedJob

Event = Literal["alert.firing", "alert.resolved"]
EVENTS: tuple[Event, ...] = ("alert.firing", "alert.resolved")
SIGNATURE_PREFIX = "sha256="
#: How far a signed timestamp may be from the receiver's clock, either way, by default.
MAX_SIGNATURE_AGE_S = 300.0
#: Alertmanager's "zero time" for an alert that has not ended.
ZERO_TIME = "0001-01-01T00:00:00Z"


@dataclass(frozen=True, slots=True)
class AlertRow:
    """One row of ``alerts``, as the API and the webhook bodies show it."""

    id: int
    fingerprint: str
    rule: str
    severity: str
    state: str
    summary: str
    scope: dict[str, Any]
    details: dict[str, Any]
    started_at: datetime
    ended_at: datetime | None
    last_seen_at: datetime
    acked_at: datetime | None
    acked_by: str | None
    recommended_action: str | None
    root_cause: dict[str, Any] = field(default_factory=dict)
    symptoms: list[dict[str, Any]] = field(default_factory=list)
    needs_review: bool = False
    action_hosts: tuple[str, ...] = ()
    reason: str | None = None
    #: The Alertmanager labels fixed when the incident opened (None: not yet fixed).
    labels: dict[str, str] | None = None
    #: Its root cause is inside a maintenance window in force (action observe: SPEC §10.4).
    maintenance: bool = False

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> AlertRow:
        """From a database row (jsonb columns as text or already decoded)."""
        return cls(
            id=rec["id"],
            fingerprint=rec["fingerprint"],
            rule=rec["rule"],
            severity=rec["severity"],
            state=rec["state"],
            summary=rec["summary"],
            scope=json_object(rec["scope"]),
            details=json_object(rec["details"]),
            started_at=rec["started_at"],
            ended_at=rec["ended_at"],
            last_seen_at=rec["last_seen_at"],
            acked_at=rec["acked_at"],
            acked_by=rec["acked_by"],
            recommended_action=rec["recommended_action"],
            root_cause=json_object(_get(rec, "root_cause", {})),
            symptoms=_json_list(_get(rec, "symptoms", [])),
            needs_review=bool(_get(rec, "needs_review", False)),
            action_hosts=tuple(_get(rec, "action_hosts", None) or ()),
            reason=_get(rec, "reason", None),
            labels={str(k): str(v) for k, v in json_object(labels).items()}
            if (labels := _get(rec, "labels", None)) is not None
            else None,
            maintenance=bool(_get(rec, "maintenance", False)),
        )

    def as_json(self) -> dict[str, Any]:
        """The API's and the ``fabricmon`` body's ``alert`` object (JSON-ready)."""
        return {
            "id": self.id,
            "fingerprint": self.fingerprint,
            "rule": self.rule,
            "severity": self.severity,
            "state": self.state,
            "summary": self.summary,
            "scope": self.scope,
            "details": self.details,
            "started_at": iso(self.started_at),
            "ended_at": iso(self.ended_at),
            "last_seen_at": iso(self.last_seen_at),
            "acked_at": iso(self.acked_at),
            "acked_by": self.acked_by,
            "root_cause": self.root_cause,
            "symptoms": self.symptoms,
            "recommended_action": self.recommended_action or "observe",
            "action_hosts": list(self.action_hosts),
            "needs_review": self.needs_review,
            "reason": self.reason,
            "maintenance": self.maintenance,
        }


def iso(value: datetime | None) -> str | None:
    """RFC 3339 in UTC with milliseconds, or None."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def jsonable(value: Any) -> Any:
    """``value`` made safe for strict JSON and jsonb: no NaN/inf, str keys, lists for tuples and sets."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return [jsonable(v) for v in sorted(value, key=str)]
    if isinstance(value, datetime | date):
        return iso(value) if isinstance(value, datetime) else value.isoformat()
    return str(value)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON of :func:`jsonable` ``value``."""
    return json.dumps(jsonable(value), separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def affected(scope: Mapping[str, Any]) -> dict[str, Any]:
    """The body's ``affected`` object from an alert scope."""
    return {
        "switches": list(scope.get("switches", [])),
        "ports": list(scope.get("ports", [])),
        "rails": list(scope.get("rails", [])),
        "servers": list(scope.get("servers", [])),
        "gpus": int(scope.get("gpus", 0)),
    }


def fabricmon_body(event: Event, alert: AlertRow, jobs: Sequence[AffectedJob], action: Action) -> bytes:
    """The ``fabricmon`` format."""
    return dumps(
        {
            "event": event,
            "alert": alert.as_json(),
            "affected": affected(alert.scope),
            "jobs": [{"id": j["id"], "affected_hosts": list(j["affected_hosts"])} for j in jobs],
            "recommended_action": action,
            "action_hosts": list(alert.action_hosts),
            "needs_review": alert.needs_review,
            "maintenance": alert.maintenance,
        }
    )


def alertmanager_body(
    event: Event,
    alert: AlertRow,
    jobs: Sequence[AffectedJob],
    action: Action,
    *,
    external_url: str | None = None,
    receiver: str = "fabricmon",
) -> bytes:
    """The ``alertmanager`` format: an Alertmanager v4 webhook message holding this one alert."""
    status = "firing" if event == "alert.firing" else "resolved"
    labels = alertmanager_labels(alert)
    annotations = _annotations(alert, jobs, action)
    base = (external_url or "").rstrip("/")
    group_labels = {"alertname": labels.get("alertname", alert.rule), "fingerprint": alert.fingerprint}
    item = {
        "status": status,
        "labels": labels,
        "annotations": annotations,
        "startsAt": iso(alert.started_at),
        "endsAt": iso(alert.ended_at) if status == "resolved" and alert.ended_at is not None else ZERO_TIME,
        "generatorURL": f"{base}/v1/alerts?state=all#alert-{alert.id}" if base else "",
        "fingerprint": alert.fingerprint,
    }
    return dumps(
        {
            "receiver": receiver,
            "status": status,
            "alerts": [item],
            "groupLabels": group_labels,
            "commonLabels": labels,
            "commonAnnotations": annotations,
            "externalURL": base,
            "version": "4",
            "groupKey": f"{{}}:{_label_set(group_labels)}",
            "truncatedAlerts": 0,
        }
    )


def alertmanager_labels(alert: AlertRow) -> dict[str, str]:
    """Identifying labels: the incident's labels fixed when it opened, else the rule, fingerprint,
    and the scope's single switch/port/rail/group/server. Severity is an annotation: it may rise
    while the incident is open, and a label that changes would make Alertmanager see a new alert."""
    if alert.labels is not None:
        return dict(alert.labels)
    labels = {"alertname": alert.rule, "fingerprint": alert.fingerprint}
    scope = alert.scope
    singles = {
        "switch": scope.get("switches", []),
        "rail": scope.get("rails", []),
        "group": scope.get("groups", []),
        "server": scope.get("servers", []),
    }
    for name, values in singles.items():
        if isinstance(values, list) and len(values) == 1:
            labels[name] = str(values[0])
    ports = scope.get("ports", [])
    if isinstance(ports, list) and len(ports) == 1:
        switch, _, port = str(ports[0]).partition(":")
        labels["port"] = port or switch
        labels.setdefault("switch", switch)
    return labels


def _annotations(alert: AlertRow, jobs: Sequence[AffectedJob], action: Action) -> dict[str, str]:
    scope = alert.scope
    servers = scope.get("servers", [])
    out = {
        "summary": alert.summary,
        "description": (
            f"{alert.summary}: {scope.get('gpus', 0)} GPUs on {len(servers)} servers, "
            f"rails {_join(scope.get('rails', []))}, switches {_join(scope.get('switches', []))}"
        ),
        "recommended_action": action,
        "severity": alert.severity,
        "needs_review": "true" if alert.needs_review else "false",
        "maintenance": "true" if alert.maintenance else "false",
        "alert_id": str(alert.id),
        "gpus": str(scope.get("gpus", 0)),
    }
    if alert.action_hosts:
        out["action_hosts"] = ",".join(alert.action_hosts)
    if alert.root_cause:
        out["root_cause"] = str(alert.root_cause.get("rule", alert.rule))
    if alert.symptoms:
        out["symptoms"] = ",".join(sorted({str(x.get("rule")) for x in alert.symptoms}))
    if jobs:
        out["jobs"] = ",".join(j["id"] for j in jobs)
    return out


def _join(values: Any, limit: int = 8) -> str:
    items = [str(v) for v in values] if isinstance(values, list) else []
    if not items:
        return "-"
    more = f" (+{len(items) - limit})" if len(items) > limit else ""
    return ",".join(items[:limit]) + more


def _label_set(labels: Mapping[str, str]) -> str:
    """Prometheus' text form of a label set, as in Alertmanager's group keys."""
    return "{" + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in sorted(labels.items())) + "}"


def body_for(
    fmt: str, event: Event, alert: AlertRow, jobs: Sequence[AffectedJob], action: Action, external_url: str | None
) -> bytes:
    """The body of one delivery in the receiver's ``format``."""
    if fmt == "alertmanager":
        return alertmanager_body(event, alert, jobs, action, external_url=external_url)
    return fabricmon_body(event, alert, jobs, action)


def sign(secret: str | bytes, timestamp: int | str, body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>``."""
    key = secret.encode() if isinstance(secret, str) else secret
    mac = hmac.new(key, str(timestamp).encode() + b"." + body, hashlib.sha256)
    return SIGNATURE_PREFIX + mac.hexdigest()


def verify_signature(
    secret: str | bytes,
    timestamp: int | str,
    body: bytes,
    header: str | None,
    *,
    max_age_s: float | None = MAX_SIGNATURE_AGE_S,
    now: float | None = None,
) -> bool:
    """Whether ``header`` is this body's signature at ``timestamp`` (constant-time).

    A timestamp more than ``max_age_s`` (five minutes by default) before or after ``now``
    (default: the clock) is refused too, which stops the replay of an old, captured request;
    the window either way allows for clock skew between sender and receiver. ``max_age_s=None``
    turns the check off (for verifying stored requests, never for live ones).
    """
    if not header or not header.startswith(SIGNATURE_PREFIX):
        return False
    try:
        ts = int(str(timestamp))
    except ValueError:
        return False
    if max_age_s is not None and abs((time.time() if now is None else now) - ts) > max_age_s:
        return False
    return hmac.compare_digest(sign(secret, ts, body).encode(), header.encode())


def delivery_headers(
    event: str, delivery_id: str, body: bytes, secret: str | None, *, timestamp: int | None = None
) -> dict[str, str]:
    """The headers of one attempt; signed when the webhook has a secret."""
    ts = int(time.time()) if timestamp is None else timestamp
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "fabricmon-webhook/1",
        "X-Fabricmon-Event": event,
        "X-Fabricmon-Delivery": delivery_id,
        "X-Fabricmon-Timestamp": str(ts),
    }
    if secret:
        headers["X-Fabricmon-Signature"] = sign(secret, ts, body)
    return headers


def redact_url(url: str) -> str:
    """``url`` without credentials, query or fragment, for logs and metrics."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _get(rec: Mapping[str, Any], key: str, default: Any) -> Any:
    """A column that older rows (or hand-built mappings) may lack."""
    try:
        return rec[key]
    except KeyError:
        return default


def _json_list(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str | bytes):
        value = json.loads(value)
    return [dict(v) for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def json_object(value: Any) -> dict[str, Any]:
    """A JSON object column as a dict (asyncpg hands jsonb over as text; anything else: {})."""
    if isinstance(value, str | bytes):
        value = json.loads(value)
    return dict(value) if isinstance(value, Mapping) else {}
