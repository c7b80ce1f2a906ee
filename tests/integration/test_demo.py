"""``fabricmon demo`` as a user runs it: every fault of the tour found and announced; a clean run
raises nothing. (The demo uses the test run's embedded store, through FABRICMON_DATA_DIR.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from store.pgserver import EmbeddedStore
from tests.support.ports import free_port


def _demo(tmp_path: Path, *args: str, timeout: float) -> tuple[int, dict[str, object], str]:
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "demo", "--listen", f"127.0.0.1:{free_port()}", "--report", str(report),
         *args],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.returncode, json.loads(report.read_text()), proc.stderr


@pytest.mark.slow  # the whole demo, ~2.5 min (make test-slow)
def test_the_tour_finds_every_fault_and_announces_it(pg_store: EmbeddedStore, tmp_path: Path) -> None:
    code, report, err = _demo(tmp_path, "--duration", "1", timeout=480)
    steps = report["steps"]
    assert isinstance(steps, list) and len(steps) == 6
    missed = [s["title"] for s in steps if not s["found"] or s["webhook_s"] is None]
    assert not missed, err[-3000:]
    assert code == 0 and report["ok"]
    for s in steps:
        assert s["found_s"] < 30 and s["gpus"] > 0, s
        assert s["jobs"] == ["llm-70b-pretrain"], s  # every tour fault is under the example job
    # one incident per fault: one firing (plus at most one escalation) and one resolved delivery,
    # every delivery about it with the same action, and nothing else sent
    assert all(s["clean"] and s["resolved"] == 1 and 1 <= s["firing"] <= 2 for s in steps), steps
    assert report["unexpected_alerts"] == []
    deliveries = report["deliveries"]
    assert isinstance(deliveries, int) and 12 <= deliveries <= 18
    actions = {s["title"]: s["actions"][0] for s in steps}
    assert actions["a flapping cable under the job"] == actions["a miswired cable"] == "drain"
    assert actions["a leaf uplink goes down"] == actions["an uplink falls back to 200G"] == "observe"
    assert actions["a PFC pause storm"] == "checkpoint"


@pytest.mark.slow  # ~1 min of watching a healthy fabric (make test-slow)
def test_a_clean_run_raises_nothing(pg_store: EmbeddedStore, tmp_path: Path) -> None:
    code, report, err = _demo(tmp_path, "--scenario", "clean", "--duration", "40", timeout=240)
    assert report["unexpected_alerts"] == [], err[-3000:]
    assert report["deliveries"] == 0
    assert code == 0
