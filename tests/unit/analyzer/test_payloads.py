"""Webhook bodies, signatures and helpers: the fabricmon and Alertmanager v4 shapes, HMAC, backoff."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import random
import time
from datetime import UTC, datetime

import pytest

from analyzer.actions import AffectedJob
from analyzer.config import WebhookConfig
from analyzer.outbox import unique_webhooks, webhook_key
from analyzer.payloads import (
    ZERO_TIME,
    AlertRow,
    alertmanager_body,
    delivery_headers,
    dumps,
    fabricmon_body,
    redact_url,
    sign,
    verify_signature,
)
from analyzer.webhooks import backoff_s

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
T1 = datetime(2026, 11, 30, 12, 5, 30, 250000, tzinfo=UTC)
JOBS = [AffectedJob(id="llm-a", affected_hosts=["srv-g1-003"])]


def alert(state: str = "firing", **scope: object) -> AlertRow:
    return AlertRow(
        id=7,
        fingerprint="0123456789abcdef",
        rule="link_outage",
        severity="critical",
        state=state,
        summary="lf-g1-r1:swp3 is down",
        scope={
            "switches": ["lf-g1-r1"],
            "ports": ["lf-g1-r1:swp3"],
            "rails": [1],
            "groups": [1],
            "servers": ["srv-g1-003"],
            "gpus": 1,
            **scope,
        },
        details={"down_s": 12.5},
        started_at=T0,
        ended_at=T1 if state == "resolved" else None,
        last_seen_at=T0,
        acked_at=None,
        acked_by=None,
        recommended_action="drain",
    )


def test_sign_matches_spec_formula() -> None:
    body = b'{"event":"alert.firing"}'
    expected = hmac.new(b"k3y", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert sign("k3y", 1700000000, body) == f"sha256={expected}"
    assert verify_signature("k3y", "1700000000", body, f"sha256={expected}", now=1700000000)


@pytest.mark.parametrize(
    ("secret", "ts", "body", "header"),
    [
        ("wrong", 1700000000, b"{}", None),  # wrong secret
        ("k3y", 1700000001, b"{}", None),  # another timestamp
        ("k3y", 1700000000, b"{} ", None),  # body changed by one byte
        ("k3y", "not-a-number", b"{}", None),
        ("k3y", 1700000000, b"{}", ""),
        ("k3y", 1700000000, b"{}", "sha1=abc"),
    ],
)
def test_verify_rejects(secret: str, ts: object, body: bytes, header: str | None) -> None:
    good = sign("k3y", 1700000000, b"{}")
    header = good if header is None else header
    assert not verify_signature(secret, ts, body, header, now=1700000000)  # type: ignore[arg-type]


def test_verify_max_age() -> None:
    sig = sign("k", 1000, b"x")
    assert verify_signature("k", 1000, b"x", sig, max_age_s=300, now=1200)
    assert not verify_signature("k", 1000, b"x", sig, max_age_s=300, now=1400)
    assert verify_signature("k", 1000, b"x", sig, max_age_s=None, now=10**9)  # an explicit opt-out


@pytest.mark.parametrize(("skew_s", "ok"), [(0, True), (-299, True), (299, True), (-301, False), (301, False)])
def test_verify_refuses_stale_and_future_timestamps_by_default(skew_s: int, ok: bool) -> None:
    """Five minutes either way, without the caller asking: a captured request cannot be replayed later."""
    now = 1_800_000_000
    sig = sign("k", now + skew_s, b"x")
    assert verify_signature("k", now + skew_s, b"x", sig, now=now) is ok


def test_verify_default_uses_the_clock() -> None:
    ts = int(time.time())
    assert verify_signature("k", ts, b"x", sign("k", ts, b"x"))
    assert not verify_signature("k", ts - 3600, b"x", sign("k", ts - 3600, b"x"))


def test_headers_signed_only_with_secret() -> None:
    h = delivery_headers("alert.firing", "d-1", b"{}", "k", timestamp=42)
    assert h["X-Fabricmon-Event"] == "alert.firing" and h["X-Fabricmon-Delivery"] == "d-1"
    assert h["X-Fabricmon-Timestamp"] == "42" and h["Content-Type"] == "application/json"
    assert verify_signature("k", 42, b"{}", h["X-Fabricmon-Signature"], now=42)
    assert "X-Fabricmon-Signature" not in delivery_headers("alert.firing", "d-1", b"{}", None)


def test_fabricmon_body() -> None:
    body = json.loads(fabricmon_body("alert.firing", alert(), JOBS, "drain"))
    assert set(body) == {"event", "alert", "affected", "jobs", "recommended_action", "action_hosts", "needs_review",
                         "maintenance"}  # fmt: skip
    assert body["event"] == "alert.firing" and body["recommended_action"] == "drain"
    a = body["alert"]
    for key in ("id", "fingerprint", "rule", "severity", "state", "summary", "scope", "started_at", "ended_at"):
        assert key in a
    assert a["started_at"] == "2026-11-30T12:00:00.000Z" and a["ended_at"] is None
    assert body["affected"] == {
        "switches": ["lf-g1-r1"],
        "ports": ["lf-g1-r1:swp3"],
        "rails": [1],
        "servers": ["srv-g1-003"],
        "gpus": 1,
    }
    assert body["jobs"] == [{"id": "llm-a", "affected_hosts": ["srv-g1-003"]}]


def test_alertmanager_v4_firing() -> None:
    raw = alertmanager_body("alert.firing", alert(), JOBS, "drain", external_url="https://fm.example/")
    body = json.loads(raw)
    assert set(body) == {
        "version",
        "groupKey",
        "truncatedAlerts",
        "status",
        "receiver",
        "groupLabels",
        "commonLabels",
        "commonAnnotations",
        "externalURL",
        "alerts",
    }
    assert body["version"] == "4" and body["status"] == "firing" and body["truncatedAlerts"] == 0
    assert body["externalURL"] == "https://fm.example"
    assert body["groupKey"] == '{}:{alertname="link_outage", fingerprint="0123456789abcdef"}'
    (item,) = body["alerts"]
    assert set(item) == {"status", "labels", "annotations", "startsAt", "endsAt", "generatorURL", "fingerprint"}
    assert item["endsAt"] == ZERO_TIME and item["startsAt"] == "2026-11-30T12:00:00.000Z"
    assert item["generatorURL"].startswith("https://fm.example/v1/alerts")
    # severity is an annotation: it may rise while the incident is open, and labels must not change
    assert item["annotations"]["severity"] == "critical"
    assert item["labels"] == {
        "alertname": "link_outage",
        "fingerprint": "0123456789abcdef",
        "switch": "lf-g1-r1",
        "port": "swp3",
        "rail": "1",
        "group": "1",
        "server": "srv-g1-003",
    }
    assert item["annotations"]["recommended_action"] == "drain" and item["annotations"]["jobs"] == "llm-a"
    assert all(isinstance(v, str) for v in [*item["labels"].values(), *item["annotations"].values()])
    assert body["commonLabels"] == item["labels"] and body["groupLabels"]["alertname"] == "link_outage"


def test_alertmanager_resolved_and_wide_scope() -> None:
    wide = alert("resolved", switches=["sp-r1-1", "sp-r1-2"], ports=[], servers=["a", "b"], rails=[1, 2])
    body = json.loads(alertmanager_body("alert.resolved", wide, [], "observe"))
    (item,) = body["alerts"]
    assert body["status"] == item["status"] == "resolved"
    assert item["endsAt"] == "2026-11-30T12:05:30.250Z"
    assert {"switch", "server", "port", "rail"}.isdisjoint(item["labels"])
    assert item["generatorURL"] == "" and body["externalURL"] == "" and "jobs" not in item["annotations"]


def test_dumps_is_strict_json() -> None:
    raw = dumps({"a": float("nan"), "b": float("inf"), "c": (1, 2), "d": {3, 1}, "e": T0, 5: "x"})
    assert json.loads(raw) == {
        "a": None,
        "b": None,
        "c": [1, 2],
        "d": [1, 3],
        "e": "2026-11-30T12:00:00.000Z",
        "5": "x",
    }


def test_redact_url() -> None:
    assert redact_url("https://user:pw@hooks.example:8443/x/y?token=abc#f") == "https://hooks.example:8443/x/y"
    assert redact_url("http://[::1]:80/h") == "http://[::1]:80/h"


def test_webhook_key_hides_url_and_secret() -> None:
    a = WebhookConfig(url="https://u:pw@hooks.example/x?token=t", secret="s")
    b = WebhookConfig(url="https://u:pw@hooks.example/x?token=t", secret="other")
    c = WebhookConfig(url="https://u:pw@hooks.example/x?token=t", format="alertmanager")
    assert webhook_key(a) == webhook_key(b) != webhook_key(c)
    assert len(webhook_key(a)) == 16 and "pw" not in webhook_key(a)
    assert unique_webhooks([a, b, c]) == [a, c]


def test_backoff() -> None:
    rng = random.Random(1)
    for attempts, base in [(1, 1.0), (2, 2.0), (5, 16.0)]:
        for _ in range(50):
            assert 0.8 * base <= backoff_s(attempts, 1.0, 300.0, rng) <= 1.2 * base
    assert all(backoff_s(n, 1.0, 300.0, rng) <= 300.0 for n in (9, 10, 100, 10_000))
    assert backoff_s(100, 1.0, 300.0, rng) >= 240.0


def test_an_incident_inside_a_maintenance_window_says_so_in_every_format() -> None:
    """SPEC §10.4: the ``fabricmon`` body (top level and alert) and the Alertmanager annotations."""
    inside = dataclasses.replace(alert(), maintenance=True, recommended_action="observe")
    body = json.loads(fabricmon_body("alert.firing", inside, [], "observe"))
    assert body["maintenance"] is True and body["alert"]["maintenance"] is True
    (item,) = json.loads(alertmanager_body("alert.firing", inside, [], "observe"))["alerts"]
    assert item["annotations"]["maintenance"] == "true"
    (item,) = json.loads(alertmanager_body("alert.firing", alert(), [], "drain"))["alerts"]
    assert item["annotations"]["maintenance"] == "false"
    assert json.loads(fabricmon_body("alert.firing", alert(), [], "drain"))["maintenance"] is False
