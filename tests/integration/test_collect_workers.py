"""``fabricmon collect --workers 2`` on the 512-GPU simulator, every part a real process.

``fabricmon sim --gpus 512`` (20 switches: 8 leaves over gNMI, 12 spines and superspines over
SNMP) in a process of its own, the supervisor and its two shard workers on a fresh TimescaleDB:

- every switch is collected by exactly one worker, the one its CRC32 names (the heartbeat rows
  ``/shard-0-of-2`` and ``/shard-1-of-2`` hold disjoint switch sets covering the fabric, and the one
  /metrics shows each switch connected under one ``shard`` label), and every switch's
  ``port_counters`` rows are fresh;
- the one /metrics endpoint shows both shards and passes ``promtool check metrics``;
- a worker killed with SIGKILL is started again (a new pid, its restart counted) and its switches
  are fresh again, while the other worker runs on untouched;
- SIGTERM to the supervisor drains both workers: all exit, the supervisor exits 0, and both live
  heartbeat rows say they stopped cleanly.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from collector.targets import shard_of
from fabric.topology import FabricParams, build_aipod
from store.heartbeats import Heartbeat
from tests.support.ports import free_port
from tests.support.sim_process import sim_512
from tests.support.sync_db import SyncDb
from tests.support.waiting import until_sync

SWITCHES = frozenset(build_aipod(FabricParams(gpus=512)).switches)
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed: Debian package `prometheus` (make setup installs it)"
)


@pytest.fixture(scope="module")
def sim_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    yield from sim_512(tmp_path_factory, "workers-sim", len(SWITCHES))


class Db(SyncDb):
    """The test's own connection (tests/support/sync_db.py), with what this test asks of it."""

    def live(self) -> dict[str, Heartbeat]:
        """The heartbeat rows of collectors not stopped, by shard."""
        rows = self.fetch("SELECT * FROM collector_heartbeats WHERE stopped_at IS NULL")
        return {hb.shard or "": hb for hb in map(Heartbeat.from_record, rows)}

    def fresh(self, since: datetime) -> set[str]:
        """Switches with a port_counters row newer than ``since``."""
        rows = self.fetch("SELECT DISTINCT switch FROM port_counters WHERE time > $1", since)
        return {r["switch"] for r in rows}


@dataclass
class Supervisor:
    proc: subprocess.Popen[str]
    log: Path
    metrics: str

    def stderr(self) -> str:
        return self.log.read_text()[-4000:]


def pid_of(hb: Heartbeat) -> int:
    """The worker's pid, from its collector id ``<hostname>:<pid>/shard-I-of-N``."""
    return int(hb.collector.rpartition(":")[2].partition("/")[0])


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.fixture
def db(fresh_db: str) -> Iterator[Db]:
    with Db(fresh_db) as d:
        yield d


@pytest.fixture
def supervisor(sim_config: dict[str, Any], fresh_db: str, tmp_path: Path, db: Db) -> Iterator[Supervisor]:
    """``fabricmon collect --workers 2 --metrics-listen``; whatever still runs at the end is killed."""
    config = {
        "fabric": sim_config["fabric"],
        "targets": sim_config["targets"],
        "collector": {"gnmi_interval_s": 1.0, "snmp_interval_s": 1.0},
        "database": {"dsn": fresh_db, "writer": {"flush_interval_s": 0.2, "spool_dir": str(tmp_path / "spool")}},
    }
    path = tmp_path / "fabricmon.yaml"
    path.write_text(yaml.safe_dump(config))
    listen = f"127.0.0.1:{free_port()}"
    log = tmp_path / "collect.err"
    argv = [sys.executable, "-m", "cli.main", "collect", "--config", str(path), "--workers", "2"]
    with log.open("w") as err:
        proc = subprocess.Popen([*argv, "--metrics-listen", listen], stdout=subprocess.DEVNULL, stderr=err, text=True)
    sup = Supervisor(proc, log, f"http://{listen}/metrics")
    try:
        yield sup
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()  # its workers follow (PR_SET_PDEATHSIG)
                proc.wait(timeout=10)
        for hb in db.live().values():
            if alive(pid := pid_of(hb)):
                os.kill(pid, signal.SIGKILL)


def scrape(sup: Supervisor) -> tuple[bytes, dict[str, dict[tuple[tuple[str, str], ...], float]]]:
    """The supervisor's /metrics: the body, and every sample by name and labels."""
    with urllib.request.urlopen(sup.metrics, timeout=10) as r:
        body: bytes = r.read()
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return body, samples


def both_shards(db: Db, since: datetime | None = None) -> dict[str, Heartbeat] | None:
    rows = db.live()
    ok = set(rows) == {"0/2", "1/2"} and all(
        hb.watermark is not None and (since is None or hb.watermark > since) for hb in rows.values()
    )
    return rows if ok else None


def test_workers_collect_each_switch_once_restart_a_killed_one_and_drain(db: Db, supervisor: Supervisor) -> None:
    sup = supervisor
    t0 = datetime.now(UTC)
    rows = until_sync(lambda: both_shards(db), 40, lambda: f"{db.live()}\n{sup.stderr()}")

    # Each switch in exactly one worker, the one CRC32 names; each worker a child of the supervisor.
    assert {hb.collector.rpartition("/")[2] for hb in rows.values()} == {"shard-0-of-2", "shard-1-of-2"}
    sets = {shard: set(hb.switches) for shard, hb in rows.items()}
    assert not sets["0/2"] & sets["1/2"] and sets["0/2"] | sets["1/2"] == SWITCHES
    assert all(shard_of(s, 2) == int(shard[0]) for shard, names in sets.items() for s in names)
    for hb in rows.values():
        assert int(Path(f"/proc/{pid_of(hb)}/stat").read_text().rpartition(")")[2].split()[1]) == sup.proc.pid
    until_sync(lambda: db.fresh(t0) == SWITCHES, 20, lambda: f"{SWITCHES - db.fresh(t0)} not fresh\n{sup.stderr()}")

    # One endpoint for both: each switch connected under exactly one shard label; promtool-clean.
    def both_up() -> tuple[bytes, dict[str, dict[tuple[tuple[str, str], ...], float]]] | None:
        body, samples = scrape(sup)
        up = samples.get("fabricmon_collector_worker_up", {})
        return (body, samples) if up == {(("shard", "0"),): 1.0, (("shard", "1"),): 1.0} else None

    body, samples = until_sync(both_up, 20, lambda: f"{scrape(sup)[1].get('fabricmon_collector_worker_up')}")
    connected: dict[str, list[str]] = {}
    for labels, value in samples["fabricmon_target_state"].items():
        d = dict(labels)
        if d["state"] == "connected" and value == 1:
            connected.setdefault(d["switch"], []).append(d["shard"])
    assert connected == {s: [str(shard_of(s, 2))] for s in SWITCHES}
    assert samples["fabricmon_collector_workers"] == {(("state", "running"),): 2.0, (("state", "restarting"),): 0.0}
    readings = samples["fabricmon_collector_readings_total"]
    assert set(readings) == {(("shard", "0"),), (("shard", "1"),)} and min(readings.values()) > 0
    assert PROMTOOL is not None
    lint = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, timeout=60)
    assert lint.returncode == 0 and lint.stdout == lint.stderr == b"", (lint.stdout, lint.stderr)

    # kill -9 one worker: started again, counted, its switches fresh again; the other untouched.
    killed, other = pid_of(rows["1/2"]), pid_of(rows["0/2"])
    os.kill(killed, signal.SIGKILL)
    t_kill = datetime.now(UTC)

    def restarted() -> dict[str, Heartbeat] | None:
        r = both_shards(db, t_kill)
        return r if r is not None and pid_of(r["1/2"]) != killed else None

    after = until_sync(restarted, 30, lambda: f"{db.live()}\n{sup.stderr()}")
    assert pid_of(after["0/2"]) == other and alive(other) and not alive(killed)
    assert set(after["1/2"].switches) == sets["1/2"]
    until_sync(lambda: sets["1/2"] <= db.fresh(t_kill), 20, lambda: f"{sets['1/2'] - db.fresh(t_kill)} not fresh")
    restarts = scrape(sup)[1]["fabricmon_collector_worker_restarts_total"]
    assert restarts == {(("shard", "0"),): 0.0, (("shard", "1"),): 1.0}
    assert "shard 1/2: worker (pid" in sup.stderr() and "was killed by SIGKILL; restarting" in sup.stderr()

    # SIGTERM to the supervisor: every worker drains and exits; exit 0; both rows stopped cleanly.
    sup.proc.send_signal(signal.SIGTERM)
    assert sup.proc.wait(timeout=70) == 0, sup.stderr()
    workers = [pid_of(hb) for hb in after.values()]
    assert not any(alive(pid) for pid in workers)
    final = {hb.collector: hb for hb in map(Heartbeat.from_record, db.fetch("SELECT * FROM collector_heartbeats"))}
    assert all(final[hb.collector].stopped_at is not None for hb in after.values()), final
    assert final[rows["1/2"].collector].stopped_at is None  # the killed one never said goodbye
    err = sup.stderr()
    assert "[shard 0] collector stopped" in err and "[shard 1] collector stopped" in err
    assert "Traceback" not in err
