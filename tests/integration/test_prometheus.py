"""fabricmon under a real Prometheus (Debian's ``prometheus`` and ``promtool``).

- ``deploy/prometheus/fabricmon-rules.yml`` passes ``promtool check rules``, and its unit tests
  (``fabricmon-rules.test.yml``) pass ``promtool test rules`` and show every alert both firing and
  not; the example ``prometheus.yml`` passes ``promtool check config``.
- End to end: ``fabricmon sim``, ``fabricmon run`` (the gNMI leaves) and ``fabricmon collect
  --metrics-listen`` (the SNMP spines, a second collector on the same database) as processes, and
  a real ``prometheus`` scraping both every second with the shipped rules loaded. Both targets are
  up; fabricmon's series are there with the values they should have; each ``/metrics`` body is
  clean under ``promtool check metrics``; every rule evaluates without error and none is active
  while fabricmon is healthy; stopping the collector makes ``FabricmonTargetDown`` pending.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from tests.support.ports import free_port
from tests.support.waiting import until_sync

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "prometheus"
RULES = DEPLOY / "fabricmon-rules.yml"
RULE_TESTS = DEPLOY / "fabricmon-rules.test.yml"
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed: Debian package `prometheus` (make setup installs it)"
)
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="prometheus not installed: Debian package `prometheus` (make setup installs it)",
)
SIM_ARGS = ("--gpus", "16", "--rails", "2", "--radix", "8")  # 10 switches: 4 leaves (gNMI), 6 over SNMP
GNMI_SWITCHES, SNMP_SWITCHES = 4, 6
FAST = {
    "collector": {"gnmi_interval_s": 1.0, "snmp_interval_s": 1.0},
    "analyzer": {"interval_s": 1.0},
}


def _promtool(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], input=stdin, capture_output=True, timeout=60)


# --- the rules, on their own ---------------------------------------------------------------------


@needs_promtool
def test_the_rules_pass_promtool_check_rules() -> None:
    proc = _promtool("check", "rules", str(RULES))
    out = (proc.stdout + proc.stderr).decode()
    assert proc.returncode == 0 and "SUCCESS" in out and "WARNING" not in out, out


@needs_promtool
def test_the_rules_pass_their_promtool_unit_tests() -> None:
    proc = _promtool("test", "rules", str(RULE_TESTS))
    out = (proc.stdout + proc.stderr).decode()
    assert proc.returncode == 0 and "SUCCESS" in out and "FAILED" not in out, out


@needs_promtool
def test_the_example_scrape_config_passes_promtool_check_config() -> None:
    proc = _promtool("check", "config", str(DEPLOY / "prometheus.yml"))
    out = (proc.stdout + proc.stderr).decode()
    assert proc.returncode == 0 and str(RULES.name) in out, out


def test_every_alert_has_a_severity_its_texts_and_unit_tests_both_ways() -> None:
    """A rule added without tests, or tested only one way, fails here before it ships."""
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    tests = yaml.safe_load(RULE_TESTS.read_text())
    cases = [c for group in tests["tests"] for c in group.get("alert_rule_test", [])]
    assert rules and all("alert" in r for r in rules)
    for rule in rules:
        name = rule["alert"]
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        assert {"summary", "description"} <= set(rule["annotations"]), name
        mine = [c for c in cases if c["alertname"] == name]
        assert any(c["exp_alerts"] for c in mine), f"{name}: never tested firing"
        assert any(not c["exp_alerts"] for c in mine), f"{name}: never tested not firing"
    assert {c["alertname"] for c in cases} <= {r["alert"] for r in rules}  # no test of a rule that is gone


# --- a real Prometheus scraping fabricmon --------------------------------------------------------


@dataclass
class Proc:
    """A process of the test, its stderr in a file (read on failure)."""

    name: str
    proc: subprocess.Popen[str]
    log: Path

    def stderr(self) -> str:
        return f"--- {self.name} (exit {self.proc.poll()}):\n{self.log.read_text()[-3000:]}"


class Lab:
    """The processes of one test, stopped (killed if they linger) at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[Proc] = []

    def start(self, name: str, argv: list[str], stdout: int = subprocess.DEVNULL) -> Proc:
        log = self.tmp / f"{name}.err"
        with log.open("w") as err:
            proc = subprocess.Popen(argv, stdout=stdout, stderr=err, text=True, env=os.environ.copy())
        self.procs.append(Proc(name, proc, log))
        return self.procs[-1]

    def fabricmon(self, *args: str, stdout: int = subprocess.DEVNULL) -> Proc:
        """``fabricmon ARGS...``, named after its command."""
        return self.start(args[0], [sys.executable, "-m", "cli.main", *args], stdout)

    def logs(self) -> str:
        return "\n".join(p.stderr() for p in self.procs)

    def close(self) -> None:
        for p in reversed(self.procs):
            if p.proc.poll() is None:
                p.proc.terminate()
        for p in reversed(self.procs):
            try:
                p.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.proc.kill()
                p.proc.wait(timeout=10)
            if p.proc.stdout is not None:
                p.proc.stdout.close()


@contextlib.contextmanager
def webhook_receiver() -> Iterator[str]:
    """A receiver that takes every delivery (so the outbox empties whatever the analyzer sends)."""

    class Accept(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Accept)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _sim(lab: Lab) -> dict[str, Any]:
    """``fabricmon sim`` on free ports; the config it writes (the fabric and its targets)."""
    written = lab.tmp / "sim.yaml"
    sim = lab.fabricmon(
        "sim",
        *SIM_ARGS,
        *("--gnmi", "127.0.0.1:0", "--snmp", "127.0.0.1:0", "--control", ""),
        *("--write-config", str(written), "--json"),
        stdout=subprocess.PIPE,
    )
    assert sim.proc.stdout is not None
    text = ""
    while not text.rstrip().endswith("}"):
        line = sim.proc.stdout.readline()
        assert line, f"the simulator exited:\n{sim.stderr()}"
        text += line
    assert json.loads(text)["switches"] == GNMI_SWITCHES + SNMP_SWITCHES
    config: dict[str, Any] = yaml.safe_load(written.read_text())
    return config


def _config(lab: Lab, name: str, base: dict[str, Any], protocol: str, dsn: str, **extra: Any) -> Path:
    config = {
        "fabric": base["fabric"],
        "targets": [t for t in base["targets"] if t["protocol"] == protocol],
        **FAST,
        "database": {"dsn": dsn, "writer": {"flush_interval_s": 0.2, "spool_dir": str(lab.tmp / f"spool-{name}")}},
        **extra,
    }
    path = lab.tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class Prometheus:
    """The HTTP API of the test's Prometheus."""

    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=5) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.get("/api/v1/query", query=expr)["result"]
        return result

    def values(self, expr: str) -> dict[str, float]:
        """``expr``'s samples by job (the test's instances are one per job)."""
        return {r["metric"].get("job", ""): float(r["value"][1]) for r in self.query(expr)}

    def targets(self) -> dict[str, dict[str, Any]]:
        return {t["labels"]["job"]: t for t in self.get("/api/v1/targets", state="active")["activeTargets"]}

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self.get("/api/v1/alerts")["alerts"]
        return alerts


def _scrape(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as r:
        body: bytes = r.read()
        return body


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    the_lab = Lab(tmp_path)
    try:
        yield the_lab
    finally:
        the_lab.close()


def _prometheus(lab: Lab, api: str, metrics: str) -> Prometheus:
    """A real Prometheus scraping both every second, with the shipped rules, its TSDB in the test's tmp."""
    assert PROMETHEUS is not None
    config = lab.tmp / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(RULES)],
                "scrape_configs": [
                    {"job_name": "fabricmon-api", "static_configs": [{"targets": [api]}]},
                    {"job_name": "fabricmon-collector", "static_configs": [{"targets": [metrics]}]},
                ],
            }
        )
    )
    web = f"127.0.0.1:{free_port()}"
    argv = [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={lab.tmp / 'tsdb'}"]
    lab.start("prometheus", [*argv, f"--web.listen-address={web}", "--log.level=warn"])
    return Prometheus(f"http://{web}")


def _check_series(prom: Prometheus, lab: Lab, hook: str) -> None:
    """fabricmon's series as Prometheus stored them, from both jobs."""
    connected = 'fabricmon_targets{state="connected"}'  # each collector has its own switches
    want = {"fabricmon-api": GNMI_SWITCHES, "fabricmon-collector": SNMP_SWITCHES}
    until_sync(
        lambda: prom.values(connected) == want,
        30,
        lambda: f"{prom.values(connected)}\n{lab.logs()}",
        ignoring=(OSError,),
    )
    until_sync(
        lambda: prom.query("fabricmon_fabric_status"), 30, lab.logs, ignoring=(OSError,)
    )  # the analyzer's first verdict
    assert set(prom.values("fabricmon_fabric_status")) == {"fabricmon-api"}
    assert prom.values("fabricmon_fabric_evaluation_age_seconds")["fabricmon-api"] < 30
    scrapes = 'fabricmon_api_requests_total{route="/metrics", status="200"}'  # Prometheus's own scrapes
    until_sync(
        lambda: prom.values(scrapes).get("fabricmon-api", 0) >= 1,
        10,
        lambda: str(prom.query(scrapes)),
        ignoring=(OSError,),
    )
    for job in want:  # both expose the collector's own metrics
        assert prom.values(f'fabricmon_collector_reset_readings_total{{job="{job}"}}') == {job: 0.0}
        assert min(prom.values(f'fabricmon_task_healthy{{job="{job}"}}').values()) == 1
        assert prom.values(f'fabricmon_writer_deferring{{job="{job}", table="port_counters"}}') == {job: 0}
    assert prom.query("fabricmon_collector_counter_resets_total") == []  # the old name is gone
    webhooks = prom.query("fabricmon_webhook_deliveries_pending")
    assert [(w["metric"]["job"], w["metric"]["webhook"] != "", w["metric"]["url"]) for w in webhooks] == [
        ("fabricmon-api", True, hook)
    ]
    # Rows flow, and the watermark is Unix time: what FabricmonIngestBehind relies on.
    flowing = 'rate(fabricmon_writer_rows_total{table="port_counters", outcome="written"}[5s]) > 0'
    until_sync(
        lambda: set(prom.values(flowing)) == set(want), 20, lambda: str(prom.query(flowing)), ignoring=(OSError,)
    )
    lag = prom.values('time() - fabricmon_writer_watermark_seconds{table="port_counters"}')
    assert set(lag) == set(want) and all(0 <= s < 30 for s in lag.values()), lag


def _check_rules(prom: Prometheus, lab: Lab) -> None:
    """The shipped rules on real series: every one evaluates, and none is active while fabricmon is healthy."""

    def evaluated() -> list[dict[str, Any]] | None:
        rules = [r for g in prom.get("/api/v1/rules")["groups"] for r in g["rules"]]
        done = rules and all(not r["lastEvaluation"].startswith("0001") for r in rules)  # Go's zero time
        return rules if done else None

    rules = until_sync(evaluated, 20, lambda: str(prom.get("/api/v1/rules")), ignoring=(OSError,))
    assert len(rules) == len(yaml.safe_load(RULES.read_text())["groups"][0]["rules"])
    assert [(r["name"], r["lastError"]) for r in rules if r["health"] != "ok"] == []
    until_sync(lambda: prom.alerts() == [], 20, lambda: f"{prom.alerts()}\n{lab.logs()}", ignoring=(OSError,))


@needs_prometheus
def test_prometheus_scrapes_fabricmon_run_and_collect(fresh_db: str, lab: Lab) -> None:
    base = _sim(lab)
    # One migration and inventory load before the two services start on the same database.
    migrate = lab.fabricmon(
        "migrate", "--load-fabric", "--config", str(_config(lab, "migrate", base, "gnmi", fresh_db))
    )
    assert migrate.proc.wait(timeout=60) == 0, migrate.stderr()
    api, metrics = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    with webhook_receiver() as hook:
        run_cfg = _config(lab, "run", base, "gnmi", fresh_db, alerts={"webhooks": [{"url": hook, "secret": "s3cret"}]})
        run = lab.fabricmon("run", "--config", str(run_cfg), "--listen", api)
        collect = lab.fabricmon(
            "collect", "--config", str(_config(lab, "collect", base, "snmp", fresh_db)), "--metrics-listen", metrics
        )
        prom = _prometheus(lab, api, metrics)

        def all_up() -> dict[str, dict[str, Any]] | None:
            targets = prom.targets()
            ok = set(targets) == {"fabricmon-api", "fabricmon-collector"}
            return targets if ok and all(t["health"] == "up" for t in targets.values()) else None

        targets = until_sync(all_up, 40, lambda: f"{prom.targets()}\n{lab.logs()}", ignoring=(OSError,))
        assert all(t["lastError"] == "" for t in targets.values())
        _check_series(prom, lab, hook)
        for url in (f"http://{api}/metrics", f"http://{metrics}/metrics"):  # promtool's lint on what is scraped
            body = _scrape(url)
            assert b"fabricmon_collector_readings_total" in body
            lint = _promtool("check", "metrics", stdin=body)
            assert lint.returncode == 0 and lint.stdout == lint.stderr == b"", (url, lint.stdout, lint.stderr)
        _check_rules(prom, lab)

        # The collector goes away: Prometheus sees it down, and FabricmonTargetDown starts its 2 minutes.
        collect.proc.send_signal(signal.SIGTERM)
        assert collect.proc.wait(timeout=40) == 0, collect.stderr()

        def target_down() -> list[dict[str, Any]]:
            return [a for a in prom.alerts() if a["labels"]["alertname"] == "FabricmonTargetDown"]

        (down,) = until_sync(target_down, 20, lambda: f"{prom.alerts()}\n{prom.targets()}", ignoring=(OSError,))
        assert down["state"] == "pending" and down["labels"]["job"] == "fabricmon-collector"
        assert down["labels"]["severity"] == "critical" and down["labels"]["instance"] == metrics
        assert prom.targets()["fabricmon-api"]["health"] == "up"

        run.proc.send_signal(signal.SIGTERM)
        assert run.proc.wait(timeout=40) == 0, run.stderr()
    assert "Traceback" not in lab.logs()
