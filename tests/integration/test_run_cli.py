"""The services as a user runs them: ``fabricmon sim`` and ``fabricmon run`` as processes, the API
over HTTP, ``fabricmon check`` exit codes (fabric and job pre-flight), a clean SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from store.pgserver import EmbeddedStore
from tests.support.ports import free_port
from tests.support.waiting import until_sync

# gNMI every second; SNMP every 2 s. On a busy 2-core machine the spines' polls (12 switches x
# 128 ports from the simulator's Python agent) can still fall three behind, and the collector then
# rightly calls a spine stale: an observe-only incident of its own, which the assertions allow.
FAST = """
collector: {gnmi_interval_s: 1.0, snmp_interval_s: 2.0}
analyzer: {interval_s: 1.0, resolve_hold_down_s: 1.0, thresholds: {stale_intervals: 5.0}}
database: {writer: {flush_interval_s: 0.2}}
"""


def _cli(*args: str, env: dict[str, str], **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


@pytest.fixture
def services(pg_store: EmbeddedStore, tmp_path: Path) -> Iterator[tuple[dict[str, str], Path, str, str]]:
    env = {**os.environ, "FABRICMON_DATABASE__DSN": pg_store.dsn()}
    sim_cfg = tmp_path / "sim.yaml"
    sim = _cli(
        "sim",
        "--gpus",
        "512",
        "--gnmi",
        "127.0.0.1:0",
        "--snmp",
        "127.0.0.1:0",
        "--control",
        "127.0.0.1:0",
        "--write-config",
        str(sim_cfg),
        "--json",
        env=env,
    )
    assert sim.stdout is not None
    text = ""
    while not text.rstrip().endswith("}"):
        text += sim.stdout.readline()
    control = "http://" + json.loads(text)["control"]
    config = tmp_path / "fabricmon.yaml"
    config.write_text(
        sim_cfg.read_text().replace("collector:\n  gnmi_interval_s: 10.0\n  snmp_interval_s: 10.0\n", "") + FAST
    )
    api = f"127.0.0.1:{free_port()}"
    run = _cli("run", "--config", str(config), "--listen", api, env=env)
    try:
        yield env, config, f"http://{api}", control
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=40)
        assert run.returncode == 0, err
        assert "collector drained" in err and "Traceback" not in err
    finally:
        for p in (run, sim):
            if p.poll() is None:
                p.kill()
            p.communicate(timeout=20)


def _check(env: dict[str, str], config: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "check", "--config", str(config), "--json", *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _check_says(env: dict[str, str], config: Path, code: int, *extra: str, within_s: float = 30) -> dict[str, Any]:
    """``check``'s report once its exit code is ``code``. Each check is a verdict of its own, at its
    own instant: on a busy 2-core machine the one right after the service's may still see a sample
    in flight, so it is asked again (a wrong answer that persists fails, with the report)."""
    deadline = time.monotonic() + within_s
    while True:
        got, report = _check(env, config, *extra)
        if got == code or time.monotonic() > deadline:
            assert got == code, f"check exited {got}, not {code}: {json.dumps(report)[:3000]}"
            return report
        time.sleep(1.0)


def test_run_serves_and_check_tells_the_scheduler(
    services: tuple[dict[str, str], Path, str, str], tmp_path: Path
) -> None:
    env, config, api, control = services
    until_sync(
        lambda: _get(f"{api}/v1/health")[1].get("status") == "healthy",
        60,
        "a healthy verdict",
        every_s=0.3,
        ignoring=(OSError,),
    )
    report = _check_says(env, config, 0)
    assert report["status"] == "healthy"

    req = urllib.request.Request(
        f"{control}/faults", data=b'{"kind": "link_down", "switch": "lf-g1-r3"}', method="POST"
    )
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 201
    # one uplink of 64: ECMP carries on at 98 %, so the fabric is degraded, not critical (a warning to observe)
    seen: list[str] = []  # each verdict on the way, with its incidents' places: what held it up

    def degraded() -> bool:
        health = _get(f"{api}/v1/health")[1]
        items = _get(f"{api}/v1/incidents?state=firing")[1].get("items", [])
        found = sorted((a.get("rule"), a.get("severity"), tuple(x["rule"] for x in a["symptoms"])) for a in items)
        step = f"{health.get('status')} {found}"
        if not seen or seen[-1] != step:
            seen.append(step)
        return health.get("status") == "degraded"

    until_sync(
        degraded,
        60,
        lambda: "a degraded verdict; verdicts seen: " + " -> ".join(seen)[-3000:],
        every_s=0.3,
        ignoring=(OSError,),
    )
    report = _check_says(env, config, 1)
    assert report["checks"]["oversubscription"]["status"] == "degraded"
    # the scheduler is told to watch, and the outage is one incident (late spines may add their own)
    incidents = report["incidents"]
    assert {i["recommended_action"] for i in incidents} == {"observe"}, json.dumps(incidents)
    outage = [i for i in incidents if "link_outage|lf-g1-r3:swp65" in i["members"] and i["id"] is not None]
    assert len(outage) == 1, json.dumps(incidents)
    # Pre-flight: every server of this 512-GPU fabric is under leaf lf-g1-r3 (one group), so a job
    # anywhere sees the fault on rail 3.
    job = tmp_path / "job.yaml"
    job.write_text("id: llm-7b\nhosts: [srv-g1-001, srv-g1-002]\nexpected_days: 12\n")
    report = _check_says(env, config, 1, "--job", str(job))
    assert report["job"]["id"] == "llm-7b" and 3 in report["job"]["rails_affected"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts: []\n")
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "check", "--config", str(config), "--job", str(bad)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3 and "hosts" in proc.stderr and "Traceback" not in proc.stderr

    def one_incident() -> bool:  # the outage, its drift and its rail asymmetry: one incident
        items = _get(f"{api}/v1/incidents?state=firing")[1].get("items", [])
        rules = [{a["rule"], *(s["rule"] for s in a["symptoms"])} for a in items]
        outage = [r for r in rules if {"oversubscription_drift", "rail_capacity_asymmetry"} <= r]
        late_spines = [r for r in rules if r == {"stale_switch"}]  # see FAST
        return len(outage) == 1 and len(outage) + len(late_spines) == len(rules)

    assert until_sync(one_incident, 15, "one incident with its symptoms", every_s=0.3, ignoring=(OSError,))
