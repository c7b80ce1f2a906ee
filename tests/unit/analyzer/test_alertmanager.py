"""The Alertmanager push bodies (analyzer/alertmanager.py): labels, annotations, times, batches, keys,
and the ``alerts.alertmanagers`` configuration."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.actions import AffectedJob
from analyzer.alertmanager import AlertmanagerPusher
from analyzer.alertmanager_alerts import (
    ENDS_AFTER_INTERVALS,
    MAX_HOSTS,
    alertmanager_key,
    batches,
    build_alerts,
    ends_at,
    fabric_label,
    jobs_by_incident,
    prometheus_alert,
)
from analyzer.config import AlertmanagerConfig
from analyzer.payloads import AlertRow, alertmanager_labels
from config.errors import ConfigError
from config.loader import load_config
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=3)
EXT = "https://fm.example/"


def row(
    id: int = 7,
    state: str = "firing",
    ended: datetime | None = None,
    fingerprint: str = "0123456789abcdef",
    **scope: Any,
) -> AlertRow:
    return AlertRow(
        id=id,
        fingerprint=fingerprint,
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
        details={},
        started_at=T0,
        ended_at=ended if ended is not None else (NOW if state == "resolved" else None),
        last_seen_at=T0,
        acked_at=None,
        acked_by=None,
        recommended_action="drain",
        action_hosts=("srv-g1-003",),
    )


def resolve(alert: AlertRow, at: datetime) -> AlertRow:
    """What sync_alerts makes of a firing incident when it resolves: same row, new state and end."""
    return replace(alert, state="resolved", ended_at=at)


def test_one_firing_incident_as_prometheus_sends_it() -> None:
    jobs = [AffectedJob(id="llm-a", affected_hosts=["srv-g1-003"])]
    a = prometheus_alert(row(), jobs, now=NOW, interval_s=10, fabric="pod-a", external_url=EXT)
    assert a["labels"] == {
        "alertname": "link_outage",
        "fingerprint": "0123456789abcdef",
        "switch": "lf-g1-r1",
        "port": "swp3",
        "rail": "1",
        "group": "1",
        "server": "srv-g1-003",
        "fabric": "pod-a",
    }
    ann = a["annotations"]
    assert ann["summary"] == "lf-g1-r1:swp3 is down" and ann["recommended_action"] == "drain"
    assert ann["hosts"] == "srv-g1-003" and ann["jobs"] == "llm-a" and ann["action_hosts"] == "srv-g1-003"
    assert ann["incident_url"] == "https://fm.example/v1/incidents/7" == a["generatorURL"]
    assert a["startsAt"] == "2026-11-30T12:00:00.000Z"
    assert a["endsAt"] == "2026-11-30T12:03:40.000Z"  # now + 4 x 10 s
    assert all(isinstance(v, str) for v in (*a["labels"].values(), *ann.values()))


def test_without_external_url_there_is_no_link() -> None:
    a = prometheus_alert(row(), [], now=NOW, interval_s=10, fabric="f")
    assert "generatorURL" not in a and "incident_url" not in a["annotations"] and "jobs" not in a["annotations"]


def test_stored_labels_win_and_fabric_is_added_unless_stored() -> None:
    stored = replace(row(), labels={"alertname": "link_outage", "fingerprint": "x", "switch": "lf-g9-r9", "port": ""})
    labels = prometheus_alert(stored, [], now=NOW, interval_s=10, fabric="pod-a")["labels"]
    assert labels == {"alertname": "link_outage", "fingerprint": "x", "switch": "lf-g9-r9", "fabric": "pod-a"}
    own = replace(stored, labels={"alertname": "a", "fabric": "mine"})
    assert prometheus_alert(own, [], now=NOW, interval_s=10, fabric="pod-a")["labels"]["fabric"] == "mine"


def test_hosts_annotation_is_capped() -> None:
    servers = [f"srv-g1-{i:03d}" for i in range(1, MAX_HOSTS + 11)]
    ann = prometheus_alert(row(servers=servers), [], now=NOW, interval_s=10, fabric="f")["annotations"]
    assert ann["hosts"].endswith(" (+10 more)") and ann["hosts"].count(",") == MAX_HOSTS - 1


scopes = st.fixed_dictionaries(
    {
        "switches": st.lists(st.sampled_from(["lf-g1-r1", "lf-g1-r2", "sp-p1-1"]), max_size=3, unique=True),
        "ports": st.lists(st.sampled_from(["lf-g1-r1:swp3", "lf-g1-r2:swp70", "sp-p1-1:swp1"]), max_size=2),
        "rails": st.lists(st.integers(1, 8), max_size=3, unique=True),
        "groups": st.lists(st.integers(1, 4), max_size=2, unique=True),
        "servers": st.lists(st.sampled_from([f"srv-g1-{i:03d}" for i in range(1, 9)]), max_size=5, unique=True),
    }
)
intervals = st.floats(min_value=0.5, max_value=3600, allow_nan=False)
offsets = st.floats(min_value=0, max_value=3600, allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(scopes, scopes, intervals, offsets, offsets)
def test_labels_are_stable_from_firing_to_resolved(
    opened: dict[str, Any], later: dict[str, Any], interval: float, firing_after: float, resolved_after: float
) -> None:
    """The labels are fixed when the incident opens: a scope that changes afterwards (the row's
    scope follows each evaluation) and the resolve change no label, so Alertmanager sees one alert."""
    first = row(**opened)
    first = replace(first, labels=alertmanager_labels(first))  # what sync_alerts stores on opening
    firing = replace(first, scope={**first.scope, **later})
    resolved = resolve(firing, T0 + timedelta(seconds=resolved_after))
    seen = [
        prometheus_alert(a, [], now=T0 + timedelta(seconds=t), interval_s=interval, fabric="pod-a")
        for a, t in ((first, 0.0), (firing, firing_after), (resolved, resolved_after))
    ]
    assert seen[0]["labels"] == seen[1]["labels"] == seen[2]["labels"]
    assert len({s["startsAt"] for s in seen}) == 1


@settings(max_examples=150, deadline=None)
@given(intervals, offsets, offsets)
def test_ends_at_rule(interval: float, after: float, resolved_after: float) -> None:
    now = T0 + timedelta(seconds=after)
    firing = row()
    assert ends_at(firing, now, interval) == now + timedelta(seconds=ENDS_AFTER_INTERVALS * interval)
    resolved = resolve(firing, T0 + timedelta(seconds=resolved_after))
    assert ends_at(resolved, now, interval) == resolved.ended_at  # whenever it is sent
    assert ends_at(firing, now, interval) > firing.started_at


def test_resolved_incidents_are_sent_for_five_minutes() -> None:
    ended = NOW - timedelta(seconds=299)
    old = row(id=1, state="resolved", ended=NOW - timedelta(seconds=301), fingerprint="a")
    recent = row(id=2, state="resolved", ended=ended, fingerprint="b")
    out = build_alerts([old, recent], {}, now=NOW, interval_s=10, fabric="f")
    assert [a["labels"]["fingerprint"] for a in out] == ["b"]
    assert out[0]["endsAt"] == "2026-11-30T11:58:01.000Z"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["firing", "resolved"]), st.integers(0, 290)),
        max_size=12,
    )
)
def test_one_alert_per_label_set_firing_first(specs: list[tuple[str, str, int]]) -> None:
    """A re-opened incident shares its labels with the resolved one before it: Alertmanager keeps
    one alert per label set, and the one that arrives last would win, so only one is sent."""
    rows = [
        row(id=i, state=state, ended=NOW - timedelta(seconds=ago) if state == "resolved" else None, fingerprint=fp)
        for i, (fp, state, ago) in enumerate(specs, start=1)
    ]
    out = build_alerts(rows, {}, now=NOW, interval_s=10, fabric="f")
    sent = {a["labels"]["fingerprint"]: a for a in out}
    assert len(sent) == len(out) == len({r.fingerprint for r in rows})
    for fp, a in sent.items():
        mine = [r for r in rows if r.fingerprint == fp]
        firing = [r for r in mine if r.state == "firing"]
        if firing:
            assert a["endsAt"] == "2026-11-30T12:03:40.000Z"
        else:
            latest = max(r.ended_at for r in mine if r.ended_at is not None)
            assert a["endsAt"] == latest.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    ids = [int(a["annotations"]["alert_id"]) for a in out]
    assert ids == sorted(ids)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from([f"s{i}" for i in range(8)]), max_size=4, unique=True), max_size=5),
    st.lists(st.lists(st.sampled_from([f"s{i}" for i in range(8)]), min_size=1, max_size=4, unique=True), max_size=4),
)
def test_jobs_per_incident_match_a_direct_intersection(scopes: list[list[str]], jobs: list[list[str]]) -> None:
    rows = [row(id=i, servers=s) for i, s in enumerate(scopes, start=1)]
    union = {s for sc in scopes for s in sc}
    # what analyzer.actions.affected_jobs returns for the union of all servers
    found = [
        AffectedJob(id=f"j{k}", affected_hosts=sorted(set(h) & union)) for k, h in enumerate(jobs) if set(h) & union
    ]
    got = jobs_by_incident(rows, found)
    for r, sc in zip(rows, scopes, strict=True):
        want = [(f"j{k}", sorted(set(h) & set(sc))) for k, h in enumerate(jobs) if set(h) & set(sc)]
        assert [(j["id"], j["affected_hosts"]) for j in got.get(r.id, [])] == want


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 700), st.integers(1, 300))
def test_batches_split_and_keep_everything(n: int, size: int) -> None:
    alerts = [{"labels": {"alertname": f"a{i}"}} for i in range(n)]
    bodies = batches(alerts, size)
    parts = [json.loads(b) for b in bodies]
    assert all(len(p) <= size for p in parts) and [a for p in parts for a in p] == alerts
    assert len(bodies) == max(1, -(-n // size))


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["http", "https"]),
    st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z]{2,5})?", fullmatch=True),
    st.one_of(st.none(), st.integers(1, 65535)),
    st.text("abcXYZ019-_.~", min_size=1, max_size=12),
    st.from_regex(r"(/[a-z]{1,8}){0,2}", fullmatch=True),
)
def test_key_is_host_and_port_and_never_credentials(
    scheme: str, host: str, port: int | None, secret: str, path: str
) -> None:
    netloc = f"{host}:{port}" if port is not None else host
    url = f"{scheme}://user:{secret}pw@{netloc}{path}"
    key = alertmanager_key(url)
    assert key == f"{host}:{port or (443 if scheme == 'https' else 80)}"
    assert "@" not in key and "/" not in key  # host and port only: no credentials, path or query


def test_keys_of_two_alertmanagers_behind_one_host_differ() -> None:
    ams = [
        AlertmanagerConfig(url="http://proxy:8080/am-a"),
        AlertmanagerConfig(url="http://proxy:8080/am-b"),
        AlertmanagerConfig(url="http://am-2:9093"),
    ]
    pusher = AlertmanagerPusher(None, ams, interval_s=10, fabric="f")
    keys = [s.alertmanager for s in pusher.stats]
    assert len(set(keys)) == 3 and keys[2] == "am-2:9093"
    assert all(k.startswith("proxy:8080-") and len(k) == len("proxy:8080-") + 6 for k in keys[:2])


def test_fabric_label() -> None:
    fabric = build_aipod(FabricParams(gpus=64, rails=8, radix=16))
    assert fabric_label(Config(), fabric) == "aipod-64"
    cfg = Config.model_validate({"fabric": {"inventory": "/etc/fabricmon/pod-b.yaml"}})
    assert fabric_label(cfg, fabric) == "pod-b"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fabricmon.yaml"
    path.write_text(text)
    return path


def test_config_loads_with_auth_and_hides_secrets(tmp_path: Path) -> None:
    text = """alerts:
  alertmanagers:
    - url: http://am-1:9093
    - url: https://am.example/prefix
      timeout_s: 3
      basic_auth: {username: fm, password: hunter2}
    - url: http://am-3:9093
      bearer_token: t0ken
"""
    config = load_config(write(tmp_path, text), env={})
    ams = config.alerts.alertmanagers
    assert [a.timeout_s for a in ams] == [10.0, 3.0, 10.0]
    assert "hunter2" not in repr(config) and "t0ken" not in repr(config)
    assert Config().alerts.alertmanagers == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  - url: am:9093\n", "alerts.alertmanagers[0].url:"),
        ("  - {}\n", "alerts.alertmanagers[0].url: missing required key"),
        ("  - {url: 'http://am:9093', timeout_s: 0}\n", "alerts.alertmanagers[0].timeout_s:"),
        ("  - {url: 'http://am:9093', tls: true}\n", "alerts.alertmanagers[0].tls: unknown key"),
        (
            "  - url: http://am:9093/api/v2/alerts\n",
            "not its API path '/api/v2/alerts'; fabricmon adds /api/v2/alerts",
        ),
        ("  - url: http://am:9093/?x=1\n", "an Alertmanager URL has no query or fragment"),
        (
            "  - {url: 'http://am:9093', bearer_token: t, basic_auth: {username: u, password: p}}\n",
            "give either basic_auth or bearer_token, not both",
        ),
        (
            "  - {url: 'http://u:p@am:9093', bearer_token: t}\n",
            "url carries credentials and basic_auth/bearer_token is set too",
        ),
        (
            "  - url: http://am:9093\n  - url: http://fm:secret@am:9093/\n",
            "http://am:9093 is listed twice",
        ),
    ],
)
def test_config_errors_are_one_clear_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, "alerts:\n  alertmanagers:\n" + text), env={})
    message = str(info.value)
    assert "\n" not in message and expected in message, message
    assert "secret" not in message
