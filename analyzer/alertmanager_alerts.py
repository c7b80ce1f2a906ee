"""Incidents as Alertmanager v2 alerts (``postableAlert``): what :mod:`analyzer.alertmanager` pushes.

:func:`build_alerts` turns each firing incident, and each resolved in the last
:data:`RESOLVED_FOR_S` (five minutes), into an alert:

* ``labels``: the incident's Alertmanager labels, fixed when it opened
  (:func:`analyzer.payloads.alertmanager_labels`: ``alertname``, ``fingerprint``, and ``switch``,
  ``port``, ``rail``, ``group``, ``server`` when the scope holds exactly one), plus ``fabric``.
  They are the same on every push, firing or resolved, so Alertmanager sees one alert. When a
  label set is both firing (a re-opened incident) and resolved, only the firing one is sent.
* ``annotations``: the webhook format's (:func:`analyzer.payloads._annotations`: ``summary``,
  ``description``, ``severity``, ``recommended_action``, ``action_hosts``, ``jobs``, …) plus
  ``hosts`` (the servers in scope) and ``incident_url`` (``alerts.external_url`` +
  ``/v1/incidents/<id>``, also the ``generatorURL``), when an external URL is configured.
* ``startsAt``: the incident's start. ``endsAt``: while firing, now + 4 * ``analyzer.interval_s``
  (if fabricmon stops pushing, Alertmanager resolves the alert by itself, as with Prometheus);
  once resolved, the incident's end, re-sent every evaluation for five minutes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, cast
from urllib.parse import urlsplit

from analyzer.actions import ACTION_ORDER, Action, AffectedJob
from analyzer.payloads import AlertRow, _annotations, alertmanager_labels, dumps, iso
from config.model import Config
from fabric.model import Fabric

#: How long a resolved incident is re-sent as resolved.
RESOLVED_FOR_S = 300.0
#: A firing alert's ``endsAt`` is this many evaluation intervals ahead (Prometheus uses 4 too).
ENDS_AFTER_INTERVALS = 4
#: Alerts per POST; a longer list is sent in several.
MAX_BATCH = 256
#: Servers listed in the ``hosts`` annotation before it says how many more.
MAX_HOSTS = 64


def alertmanager_key(url: str) -> str:
    """``host:port`` of an Alertmanager URL: its ``alertmanager`` metric label and log name."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def fabric_label(config: Config, fabric: Fabric) -> str:
    """The ``fabric`` label: the inventory file's name without its extension, or ``aipod-<gpus>``."""
    if config.fabric.inventory is not None:
        return config.fabric.inventory.stem
    return fabric.label


def incident_url(external_url: str | None, alert_id: int) -> str | None:
    """The incident in fabricmon's API, or None without an external URL."""
    return f"{external_url.rstrip('/')}/v1/incidents/{alert_id}" if external_url else None


def ends_at(alert: AlertRow, now: datetime, interval_s: float) -> datetime:
    """``endsAt``: the incident's end once resolved, else ``ENDS_AFTER_INTERVALS`` evaluations ahead."""
    if alert.state == "resolved" and alert.ended_at is not None:
        return alert.ended_at
    return now + timedelta(seconds=ENDS_AFTER_INTERVALS * interval_s)


def labels_of(alert: AlertRow, fabric: str) -> dict[str, str]:
    """The alert's identifying labels (empty values dropped: Alertmanager treats them as absent)."""
    labels = alertmanager_labels(alert)
    labels.setdefault("fabric", fabric)
    return {k: v for k, v in labels.items() if v != ""}


def prometheus_alert(
    alert: AlertRow,
    jobs: Sequence[AffectedJob],
    *,
    now: datetime,
    interval_s: float,
    fabric: str,
    external_url: str | None = None,
) -> dict[str, Any]:
    """One incident as an Alertmanager v2 ``postableAlert``."""
    action = cast(Action, alert.recommended_action if alert.recommended_action in ACTION_ORDER else "observe")
    annotations = _annotations(alert, jobs, action)
    servers = [str(s) for s in alert.scope.get("servers", [])]
    if servers:
        more = f" (+{len(servers) - MAX_HOSTS} more)" if len(servers) > MAX_HOSTS else ""
        annotations["hosts"] = ",".join(servers[:MAX_HOSTS]) + more
    url = incident_url(external_url, alert.id)
    out: dict[str, Any] = {
        "labels": labels_of(alert, fabric),
        "annotations": annotations,
        "startsAt": iso(alert.started_at),
        "endsAt": iso(ends_at(alert, now, interval_s)),
    }
    if url is not None:
        annotations["incident_url"] = url
        out["generatorURL"] = url
    return out


def build_alerts(
    rows: Sequence[AlertRow],
    jobs: Mapping[int, Sequence[AffectedJob]],
    *,
    now: datetime,
    interval_s: float,
    fabric: str,
    external_url: str | None = None,
    resolved_for_s: float = RESOLVED_FOR_S,
) -> list[dict[str, Any]]:
    """The list to POST: firing incidents and those resolved within ``resolved_for_s`` of ``now``,
    one alert per label set (firing before resolved, then the latest), ordered by incident id."""
    cutoff = now - timedelta(seconds=resolved_for_s)
    best: dict[frozenset[tuple[str, str]], tuple[tuple[bool, datetime, int], AlertRow]] = {}
    for row in rows:
        if row.state == "resolved" and (row.ended_at is None or row.ended_at < cutoff):
            continue
        rank = (row.state == "firing", row.ended_at or row.started_at, row.id)
        key = frozenset(labels_of(row, fabric).items())
        if key not in best or rank > best[key][0]:
            best[key] = (rank, row)
    chosen = sorted((row for _, row in best.values()), key=lambda r: r.id)
    return [
        prometheus_alert(
            r, jobs.get(r.id, ()), now=now, interval_s=interval_s, fabric=fabric, external_url=external_url
        )
        for r in chosen
    ]


def jobs_by_incident(rows: Sequence[AlertRow], jobs: Sequence[AffectedJob]) -> dict[int, list[AffectedJob]]:
    """Each incident's jobs, from the jobs affected by the union of all their servers."""
    out: dict[int, list[AffectedJob]] = {}
    for row in rows:
        servers = {str(s) for s in row.scope.get("servers", [])}
        hit = [AffectedJob(id=j["id"], affected_hosts=[h for h in j["affected_hosts"] if h in servers]) for j in jobs]
        if any(j["affected_hosts"] for j in hit):
            out[row.id] = [j for j in hit if j["affected_hosts"]]
    return out


def batches(alerts: Sequence[Mapping[str, Any]], size: int = MAX_BATCH) -> list[bytes]:
    """The JSON bodies to POST, at most ``size`` alerts each (one empty list when there are none:
    an empty push still says "this Alertmanager is reachable")."""
    size = max(1, size)
    return [dumps(list(alerts[i : i + size])) for i in range(0, max(len(alerts), 1), size)]
