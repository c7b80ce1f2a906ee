"""A degrading optic reaches a real slurmctld as a checkpoint (issue 26 item 4), end to end on a real
TimescaleDB and a real Slurm cluster (munged, slurmctld, slurmd on loopback; tests/support/slurm.py).

Six hours of a server link's transceiver DOM, rx power falling toward the module's critical level,
are written through store/dom.py as the collectors lay them out. The analyzer, composed as
``fabricmon analyze`` composes it (cli/compose.py, ``schedulers.slurm.checkpoint_signal: USR1``),
evaluates one round: its link-health check predicts the link fails within
``alerts.checkpoint_lead_s``, the incident's action is ``checkpoint`` on the link's host, and the
round stores the scheduler action. The Slurm executor runs it through Slurm's own commands:
``scancel --signal=USR1 --batch`` for the job on that host, whose batch script traps the signal.
What happened is read from the job itself (its trap's file) and from Slurm (``squeue``, ``scontrol``).
A job on another host is not signalled, and nothing is drained: the link has not failed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from cli.compose import analyzer_service
from config.model import Config
from fabric.model import Endpoint, FabricParams
from fabric.topology import build_aipod
from schedulers.executor import SlurmExecutor
from store.dom import DomSample, write_dom
from store.inventory import ensure_fabric
from store.scheduler_actions import list_actions
from tests.support.slurm import SlurmCluster, missing_programs, slurm_cluster

pytestmark = [
    pytest.mark.db,
    pytest.mark.skipif(
        bool(missing_programs()),
        reason=f"Slurm is not installed ({', '.join(missing_programs())}): make setup installs "
        "Debian's slurmctld, slurmd, slurm-client and munge",
    ),
]

FABRIC = build_aipod(FabricParams(gpus=1024), "mixed")
LEAF = "lf-g1-r1"
PORT = FABRIC.ports(LEAF)[0].name  # srv-g1-001's NIC cable on rail 0 (SR OS-style "1/1/c1/1")
HOST = FABRIC.peer(Endpoint(LEAF, PORT)).node  # type: ignore[union-attr]
NODES = ("srv-g1-001", "srv-g1-002")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    with slurm_cluster(tmp_path_factory.mktemp("slurm"), NODES) as c:
        yield c


async def _degrading_optic(pool: asyncpg.Pool, now: datetime) -> None:
    """6 h of DOM every minute: rx from -2 dBm falling 1 dB/h, so -8 dBm now and an hour left to
    the module's -9 dBm (inside the default 2 h checkpoint lead)."""
    rows = [
        DomSample(
            now - timedelta(minutes=360 - i), LEAF, PORT, "xcvr-1", -2.0 - i / 60, 1.0, 7.0, 41.0,
            rx_low_warning_dbm=-7.0, rx_low_critical_dbm=-9.0, bias_high_critical_ma=13.0,
        )
        for i in range(361)
    ]  # fmt: skip
    async with pool.acquire() as conn:
        await ensure_fabric(conn, FABRIC)
        await write_dom(conn, rows)


async def test_a_degrading_optic_checkpoints_the_batch_step_of_the_job_on_its_host(
    pool: asyncpg.Pool, slurm: SlurmCluster, tmp_path: Path
) -> None:
    assert HOST == "srv-g1-001"
    got = tmp_path / "signals"
    script = tmp_path / "train.sh"
    script.write_text(f"#!/bin/bash\ntrap 'echo USR1 >> {got}' USR1\nwhile true; do sleep 0.2; done\n")
    script.chmod(0o755)
    out = slurm.run("sbatch", "--parsable", f"--output={tmp_path}/job.out", "-w", HOST, "-t", "30", str(script))
    job = out.strip().split(";")[0]
    other = slurm.sbatch(["srv-g1-002"])
    slurm.wait(lambda: slurm.job_state(job) == "RUNNING", 30, "the training job")

    now = datetime.now(UTC)
    await _degrading_optic(pool, now)
    slurm_section = {"slurm_conf": str(slurm.conf), "checkpoint_signal": "USR1", "command_timeout_s": 20}
    config = Config.model_validate({"schedulers": {"slurm": slurm_section}})
    service = analyzer_service(config, FABRIC, pool)
    await service.evaluate_once(now, confirm=False)

    (alert,) = await pool.fetch(
        "SELECT id, summary, details FROM alerts WHERE state = 'firing' AND rule = 'link_degrading'"
    )
    details = json.loads(alert["details"])
    assert f"{LEAF}:{PORT}" in alert["summary"] and details["basis"] == "rx_power"
    assert 0.8 * 3600 < details["time_to_failure_s"] < 1.2 * 3600 and details["confidence"] >= 0.9
    assert f"checkpoint {HOST}'s jobs" in details["reason"], details["reason"]  # when, why, how sure

    assert config.schedulers.slurm is not None
    executor = SlurmExecutor(pool, config.schedulers.slurm)
    for _ in range(20):
        if not await executor.step():
            break
    rows, _ = await list_actions(pool, limit=100)
    done = [r.as_json() for r in rows]
    checkpoints = [r for r in done if r["action"] == "checkpoint"]
    assert len(checkpoints) == 1, done
    (cp,) = checkpoints
    assert cp["status"] == "done" and cp["nodes"] == [HOST] and cp["incident"] == alert["id"], cp
    assert cp["commands"] == [f"scancel --signal=USR1 --batch {job}"], cp
    # the job's batch step got the signal, and the job runs on (a checkpoint, not a kill)
    slurm.wait(lambda: got.exists() and "USR1" in got.read_text(), 15, "the batch step to get SIGUSR1")
    assert slurm.job_state(job) == "RUNNING" and slurm.job_state(other) == "RUNNING"
    assert not [r for r in done if r["action"] == "drain"], done
    assert not [n for n in NODES if slurm.node(n).drained]
