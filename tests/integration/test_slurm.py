"""fabricmon and a real Slurm cluster (munged, slurmctld, four slurmd on loopback; tests/support/slurm.py).

Incidents are made the way the analyzer makes them (findings → correlate → decide → sync_alerts on
a real TimescaleDB); the executor and the job discovery then talk to the real slurmctld through
Slurm's own commands. What happened is read back from Slurm itself (``scontrol -o show node``,
``squeue``, slurmctld's log), never from what fabricmon says it did.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient, TestServer

from analyzer.actions import ActionPolicy, affected_jobs, decide_all
from analyzer.alerts import SyncResult, require_review, sync_alerts
from analyzer.config import WebhookConfig
from analyzer.correlation import correlate
from analyzer.findings import Finding, blast_radius
from analyzer.links import links_scope
from analyzer.withheld import review_withheld
from api.app import create_app
from cli.compose import analyzer_metrics, analyzer_service
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from schedulers.config import SlurmConfig
from schedulers.discovery import SlurmDiscovery
from schedulers.executor import SCHEDULER, SlurmExecutor
from schedulers.service import Schedulers
from schedulers.slurm import Operation, SlurmCommands, SlurmUnavailable
from store.jobs import Job, list_jobs, save_job
from store.scheduler_actions import Policy, claim, list_actions, note_commands, record, renew
from tests.integration.test_analyze_e2e import lab
from tests.support.slurm import SlurmCluster, missing_programs, slurm_cluster
from tests.support.waiting import until

pytestmark = [
    pytest.mark.db,
    pytest.mark.skipif(
        bool(missing_programs()),
        reason=f"Slurm is not installed ({', '.join(missing_programs())}): make setup installs "
        "Debian's slurmctld, slurmd, slurm-client and munge",
    ),
]

#: 128 servers (one incident may drain 1 host), ports named as seven NOSes name them: lf-g1-r1's are
#: SR OS-style ``1/1/c1/1``, so reasons and commands carry '/' to a real slurmctld
FABRIC = build_aipod(FabricParams(gpus=1024), "mixed")


def port(switch: str, place: int) -> str:
    """The ``place``-th port (design order) of ``switch``, by its name."""
    return FABRIC.ports(switch)[place - 1].name


NODES = ("srv-g1-001", "srv-g1-002", "srv-g1-003", "srv-g1-004")
HOLD = 5.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    with slurm_cluster(tmp_path_factory.mktemp("slurm"), NODES) as c:
        yield c


@pytest.fixture
def slurm(cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    cluster.reset()
    if "slurmctld" not in cluster.procs:
        cluster.start_ctld()
    yield cluster
    if "slurmctld" not in cluster.procs:
        cluster.start_ctld()


def config(c: SlurmCluster, **kw: Any) -> SlurmConfig:
    return SlurmConfig.model_validate({"slurm_conf": c.conf, "command_timeout_s": 20, **kw})


def server_link(port: int, rule: str = "link_flapping", severity: str = "critical", leaf: str = "lf-g1-r1") -> Finding:
    """A finding on a NIC cable of srv-g1-00<port> (<leaf>'s port <port>; rail r's leaf for its GPU r)."""
    name = FABRIC.ports(leaf)[port - 1].name
    key = f"{leaf}:{name}"
    details: dict[str, Any] = {"down_now": True, "down_for_s": 30.0} if rule == "link_outage" else {"flaps": 5}
    return Finding(rule, key, severity, f"{key} {rule}", links_scope(FABRIC, [(leaf, name)]), details)  # type: ignore[arg-type]


def leaf_gone(leaf: str = "lf-g1-r1") -> Finding:
    return Finding(
        "stale_switch", leaf, "critical", f"{leaf} silent", blast_radius(FABRIC, switches=[leaf]),
        {"peer_links_up": 0, "peer_links_down": 64},
    )  # fmt: skip


async def sync(pool: asyncpg.Pool, findings: list[Finding], at: datetime, policy: Policy) -> SyncResult:
    incidents = decide_all(correlate(findings, FABRIC), FABRIC, ActionPolicy())
    return await sync_alerts(
        pool, incidents, now=at, hold_down_s=HOLD, webhooks=[], schedulers=(policy,), drain_limit=1
    )


async def run_all(executor: SlurmExecutor) -> None:
    """Run the executor until nothing is due."""
    for _ in range(20):
        if not await executor.step():
            return
    raise AssertionError("the executor never ran out of actions")


async def actions(pool: asyncpg.Pool) -> list[dict[str, Any]]:
    rows, _ = await list_actions(pool, limit=100)
    return [r.as_json() for r in reversed(rows)]


POLICY = Policy(SCHEDULER, drain=True)


async def test_a_flapping_nic_drains_its_node_only_the_job_keeps_running_and_resolution_resumes_it(
    pool: asyncpg.Pool, slurm: SlurmCluster
) -> None:
    job = slurm.sbatch(NODES)
    executor = SlurmExecutor(pool, config(slurm))
    t0 = datetime.now(UTC)
    r = await sync(pool, [server_link(3)], t0, POLICY)
    assert (r.fired, r.actions) == (1, 1)
    await run_all(executor)

    node = slurm.node("srv-g1-003")
    (alert_id,) = [a["incident"] for a in await actions(pool)]
    assert node.drained and node.reason.startswith(f"fabricmon: {alert_id} "), node
    assert slurm.job_state(job) == "RUNNING"  # a drain lets running jobs run
    assert [n for n in NODES if slurm.node(n).drained] == ["srv-g1-003"]
    (drain,) = await actions(pool)
    assert (drain["action"], drain["status"], drain["nodes"]) == ("drain", "done", ["srv-g1-003"])
    assert drain["commands"] and drain["commands"][0].startswith("scontrol update NodeName=srv-g1-003 State=DRAIN")

    # the incident goes on: later rounds store nothing more and drain nothing again
    r = await sync(pool, [server_link(3)], t0 + timedelta(seconds=10), POLICY)
    assert r.actions == 0
    await run_all(executor)
    assert slurm.drains_logged("srv-g1-003") == 1

    # it resolves after the hold-down: RESUME, once
    await sync(pool, [], t0 + timedelta(seconds=10 + HOLD + 1), POLICY)
    await run_all(executor)
    assert not slurm.node("srv-g1-003").drained
    assert slurm.job_state(job) == "RUNNING"
    assert [(a["action"], a["status"]) for a in await actions(pool)] == [("drain", "done"), ("resume", "done")]
    assert slurm.drains_logged("srv-g1-003") == 1 and slurm.resumes_logged("srv-g1-003") == 1


async def test_an_admin_drained_node_is_never_touched(pool: asyncpg.Pool, slurm: SlurmCluster) -> None:
    slurm.drain("srv-g1-003", "admin: bad DIMM")
    slurm.drain("srv-g1-004", "admin: firmware")
    executor = SlurmExecutor(pool, config(slurm))
    t0 = datetime.now(UTC)
    await sync(pool, [server_link(3)], t0, POLICY)
    await run_all(executor)
    assert slurm.node("srv-g1-003").reason == "admin: bad DIMM"  # not overwritten
    (drain,) = await actions(pool)
    assert drain["status"] == "done" and "drained by someone else" in drain["result"]["srv-g1-003"]
    assert drain["commands"] == []  # nothing to run

    # another incident: fabricmon drains srv-g1-002, then an admin takes the node over
    await sync(pool, [server_link(3), server_link(2)], t0 + timedelta(seconds=1), POLICY)
    await run_all(executor)
    assert slurm.node("srv-g1-002").reason.startswith("fabricmon: ")
    slurm.drain("srv-g1-002", "admin: keep it out, ticket 4711")

    await sync(pool, [], t0 + timedelta(seconds=HOLD + 5), POLICY)  # both resolve
    await run_all(executor)
    for n, why in (("srv-g1-002", "admin: keep it out, ticket 4711"), ("srv-g1-003", "admin: bad DIMM")):
        node = slurm.node(n)
        assert node.drained and node.reason == why, node
    assert slurm.node("srv-g1-004").reason == "admin: firmware"
    resumes = [a for a in await actions(pool) if a["action"] == "resume"]
    assert len(resumes) == 2 and all(a["commands"] == [] for a in resumes), resumes


async def test_a_leaf_loss_above_the_circuit_breaker_drains_nothing(pool: asyncpg.Pool, slurm: SlurmCluster) -> None:
    executor = SlurmExecutor(pool, config(slurm))
    r = await sync(pool, [leaf_gone()], datetime.now(UTC), POLICY)
    assert (r.fired, r.actions) == (1, 1)
    await run_all(executor)
    assert not [n for n in NODES if slurm.node(n).drained]
    assert slurm.drains_logged("srv-g1-001") == 0
    (row,) = await actions(pool)
    assert (row["action"], row["status"]) == ("drain", "withheld")
    assert len(row["hosts"]) == 64 and "circuit breaker" in row["reason"]
    assert await claim(pool, SCHEDULER, 5) is None  # a withheld row is never executed


async def test_the_fleet_breaker_withholds_what_incidents_add_up_to(pool: asyncpg.Pool, slurm: SlurmCluster) -> None:
    """Each incident drains one host (within its own limit), but never more than max_drained_nodes
    at once; the incident whose drain is withheld is told it needs review (webhooks hear it) by the
    analyzer's next round, which reads what the executor recorded: the executor never calls back."""
    hook = WebhookConfig(url="http://127.0.0.1:9/hook")
    executor = SlurmExecutor(pool, config(slurm, max_drained_nodes=2))
    t0 = datetime.now(UTC)
    for i in range(3):
        await sync(pool, [server_link(p) for p in (1, 2, 3)[: i + 1]], t0 + timedelta(seconds=i), POLICY)
        await run_all(executor)
    assert [n for n in NODES if slurm.node(n).drained] == ["srv-g1-001", "srv-g1-002"]
    third = (await actions(pool))[-1]
    assert third["status"] == "withheld" and "fleet circuit breaker" in third["result"]["srv-g1-003"]
    assert third["commands"] == []  # nothing was run
    alert = await pool.fetchrow("SELECT * FROM alerts WHERE id = $1", third["incident"])
    assert not alert["needs_review"]  # recorded, not yet read: the executor does not call the analyzer
    # the next round reads it, once
    reviewed = await review_withheld(pool, webhooks=[hook], schedulers=(POLICY,))
    assert (reviewed.escalated, reviewed.deliveries) == (1, 1)
    again = await review_withheld(pool, webhooks=[hook], schedulers=(POLICY,))
    assert (again.escalated, again.deliveries) == (0, 0)
    alert = await pool.fetchrow("SELECT * FROM alerts WHERE id = $1", third["incident"])
    assert (alert["recommended_action"], alert["needs_review"], alert["severity"]) == ("observe", True, "critical")
    assert "fleet circuit breaker" in alert["reason"]
    sent = await pool.fetch("SELECT event FROM webhook_deliveries WHERE alert_id = $1", third["incident"])
    assert [r["event"] for r in sent] == ["alert.firing"]  # the escalation to review (the sync here sends none)
    # later rounds keep it so: the breaker always wins
    await sync(pool, [server_link(p) for p in (1, 2, 3)], t0 + timedelta(seconds=5), POLICY)
    await run_all(executor)
    assert not slurm.node("srv-g1-003").drained


async def test_a_drain_pending_when_the_incident_turns_to_review_is_not_run(
    pool: asyncpg.Pool, slurm: SlurmCluster
) -> None:
    await sync(pool, [server_link(3)], datetime.now(UTC), POLICY)
    (row,) = await actions(pool)
    await require_review(pool, row["incident"], "circuit breaker: a person decides", webhooks=[])
    await run_all(SlurmExecutor(pool, config(slurm)))
    (row,) = await actions(pool)
    assert row["status"] == "withheld" and "needs review" in row["result"]["srv-g1-003"]
    assert not slurm.node("srv-g1-003").drained and slurm.drains_logged("srv-g1-003") == 0


async def test_a_down_node_is_left_to_slurm_and_its_admins(pool: asyncpg.Pool, slurm: SlurmCluster) -> None:
    slurm.run("scontrol", "update", "NodeName=srv-g1-003", "State=DOWN", "Reason=admin: PSU swap")
    executor = SlurmExecutor(pool, config(slurm))
    t0 = datetime.now(UTC)
    await sync(pool, [server_link(3)], t0, POLICY)
    await run_all(executor)
    await sync(pool, [], t0 + timedelta(seconds=HOLD + 1), POLICY)
    await run_all(executor)
    node = slurm.node("srv-g1-003")
    assert "DOWN" in node.state and node.reason == "admin: PSU swap", node
    drain, resume = await actions(pool)
    assert drain["commands"] == [] and "left to Slurm and its admins" in drain["result"]["srv-g1-003"]
    assert resume["commands"] == []
    slurm.run("scontrol", "update", "NodeName=srv-g1-003", "State=RESUME")


async def test_two_incidents_on_one_host_the_node_stays_drained_until_both_resolve(
    pool: asyncpg.Pool, slurm: SlurmCluster
) -> None:
    """srv-g1-003's rail-1 and rail-2 cables both flap: two incidents, one node. The first to resolve
    must not resume it while the other still drains it."""
    executor = SlurmExecutor(pool, config(slurm))
    t0 = datetime.now(UTC)
    rail1, rail2 = server_link(3), server_link(3, leaf="lf-g1-r2")
    await sync(pool, [rail1, rail2], t0, POLICY)
    await run_all(executor)
    assert slurm.node("srv-g1-003").drained
    await sync(pool, [rail2], t0 + timedelta(seconds=HOLD + 1), POLICY)  # rail 1 is fine again
    await run_all(executor)
    assert slurm.node("srv-g1-003").drained
    resume = (await actions(pool))[-1]
    assert resume["action"] == "resume" and "still drained for incident" in resume["result"]["srv-g1-003"]
    await sync(pool, [], t0 + timedelta(seconds=2 * HOLD + 2), POLICY)
    await run_all(executor)
    assert not slurm.node("srv-g1-003").drained and slurm.resumes_logged("srv-g1-003") == 1


async def test_a_refused_action_is_given_up_after_its_attempts(
    pool: asyncpg.Pool, slurm: SlurmCluster, tmp_path: Path
) -> None:
    """Slurm's commands missing (a wrong bin_dir): a refusal, retried, then failed with the reason."""
    executor = SlurmExecutor(pool, config(slurm, bin_dir=str(tmp_path), max_attempts_refused=2, retry_max_s=1))
    await sync(pool, [server_link(3)], datetime.now(UTC), POLICY)
    assert await executor.step()
    (row,) = await actions(pool)
    assert row["status"] == "pending" and "not found" in row["last_error"]
    await asyncio.sleep(1.2)
    assert await executor.step()
    (row,) = await actions(pool)
    assert row["status"] == "failed" and "sinfo: not found" in row["last_error"] and row["attempts"] == 2
    assert executor.stats.failed == 1


async def test_a_late_executor_cannot_overwrite_what_the_next_one_recorded(
    pool: asyncpg.Pool, slurm: SlurmCluster
) -> None:
    await sync(pool, [server_link(3)], datetime.now(UTC), POLICY)
    stale = await claim(pool, SCHEDULER, lease_s=0.3)
    assert stale is not None
    await asyncio.sleep(0.4)  # its lease runs out; another executor takes the row and finishes it
    await run_all(SlurmExecutor(pool, config(slurm)))
    assert not await record(pool, stale, "pending", error="late", retry_in_s=1)
    assert not await renew(pool, stale, 30)
    (row,) = await actions(pool)
    assert row["status"] == "done" and row["last_error"] is None


async def test_slurmctld_away_through_its_retries_the_drain_lands_when_it_returns_once(
    pool: asyncpg.Pool, slurm: SlurmCluster
) -> None:
    job = slurm.sbatch(NODES)
    slurm.stop_ctld()
    executor = SlurmExecutor(pool, config(slurm, command_timeout_s=15, retry_max_s=4))
    task = asyncio.create_task(executor.run())

    async def retried_at_the_cap() -> bool:
        # Away until the backoff (1 s, 2 s, then retry_max_s) has reached its cap: a fourth attempt,
        # each failing after sinfo's own ~4 s of retries (about 20 s; a fixed 30 s sleep before).
        return any(a["attempts"] >= 4 for a in await actions(pool))

    try:
        await sync(pool, [server_link(3)], datetime.now(UTC), POLICY)
        executor.notify()
        await until(retried_at_the_cap, 60, lambda: f"four attempts while slurmctld is away: {executor.stats}")
        (row,) = await actions(pool)
        assert row["status"] == "pending" and row["attempts"] >= 2, row
        assert "slurmctld is unreachable" in (row["last_error"] or "") or "no answer" in (row["last_error"] or ""), row
        assert executor.stats.unavailable

        await asyncio.to_thread(slurm.start_ctld)
        deadline = time.monotonic() + 60
        while (await actions(pool))[0]["status"] == "pending":
            assert time.monotonic() < deadline, await actions(pool)
            await asyncio.sleep(0.5)
        await asyncio.sleep(3)  # room for a second, wrong execution
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    (row,) = await actions(pool)
    assert row["status"] == "done", row
    assert slurm.node("srv-g1-003").drained and slurm.drains_logged("srv-g1-003") == 1
    assert slurm.job_state(job) == "RUNNING"  # slurmctld kept its jobs across the restart


async def test_an_executor_that_dies_mid_action_does_not_drain_twice(pool: asyncpg.Pool, slurm: SlurmCluster) -> None:
    """At-least-once execution, effectively once: the drain ran, the executor died before recording it;
    the row's lease runs out and the next executor finds the node already drained by fabricmon."""
    await sync(pool, [server_link(3)], datetime.now(UTC), POLICY)
    first = SlurmExecutor(pool, config(slurm))
    row = await claim(pool, SCHEDULER, lease_s=0.5)
    assert row is not None
    plan = await first.plan(row)
    for op in plan.ops:
        await first.slurm.execute(op)  # ... and dies here
    await asyncio.sleep(0.6)
    await run_all(SlurmExecutor(pool, config(slurm)))
    (done,) = await actions(pool)
    assert done["status"] == "done" and done["attempts"] == 2
    assert "already drained by fabricmon" in done["result"]["srv-g1-003"]
    assert slurm.drains_logged("srv-g1-003") == 1


class _Watched(SlurmCommands):
    """Slurm's own commands, telling the test when one has run (and taking a moment after it)."""

    def __init__(self, config: SlurmConfig) -> None:
        super().__init__(config)
        self.ran = asyncio.Event()

    async def execute(self, op: Operation) -> None:
        await super().execute(op)
        self.ran.set()
        await asyncio.sleep(0.5)  # the window between the command and its record


async def test_a_clean_stop_records_the_action_in_flight(pool: asyncpg.Pool, slurm: SlurmCluster) -> None:
    """Stopped between scontrol and the audit row, the executor first records what it ran: the
    resume of a clean shutdown is in GET /v1/actions with its node, not left pending for the next
    executor to find done and record as nothing."""
    client = _Watched(config(slurm))
    executor = SlurmExecutor(pool, config(slurm), client=client)
    await sync(pool, [server_link(3)], datetime.now(UTC), POLICY)
    task = asyncio.create_task(executor.run())
    try:
        await asyncio.wait_for(client.ran.wait(), 30)
        await executor.close()
        await asyncio.wait_for(task, 5)  # closed: it returns by itself
    finally:
        task.cancel()
    (drain,) = await actions(pool)
    assert (drain["action"], drain["status"], drain["nodes"]) == ("drain", "done", ["srv-g1-003"]), drain
    assert slurm.node("srv-g1-003").drained and slurm.drains_logged("srv-g1-003") == 1
    assert executor.stats.executed == 1


async def test_dry_run_changes_nothing_in_slurm(pool: asyncpg.Pool, slurm: SlurmCluster) -> None:
    executor = SlurmExecutor(pool, config(slurm, dry_run=True))
    t0 = datetime.now(UTC)
    await sync(pool, [server_link(3)], t0, POLICY)
    await run_all(executor)
    await sync(pool, [], t0 + timedelta(seconds=HOLD + 1), POLICY)
    await run_all(executor)
    assert not [n for n in NODES if slurm.node(n).drained] and slurm.drains_logged("srv-g1-003") == 0
    drain, resume = await actions(pool)
    assert drain["status"] == "dry_run" and "State=DRAIN" in drain["commands"][0]
    assert drain["result"]["srv-g1-003"].startswith("dry run: ")
    assert resume["status"] == "done" and "not drained" in resume["result"]["srv-g1-003"]
    assert executor.stats.dry_runs == 1 and executor.stats.executed == 0


async def test_checkpoint_signals_the_batch_steps_of_the_jobs_on_its_hosts(
    pool: asyncpg.Pool, slurm: SlurmCluster, tmp_path: Path
) -> None:
    got = tmp_path / "signals"
    script = tmp_path / "train.sh"
    script.write_text(f"#!/bin/bash\ntrap 'echo USR1 >> {got}' USR1\nwhile true; do sleep 0.2; done\n")
    script.chmod(0o755)
    out = slurm.run(
        "sbatch", "--parsable", f"--output={tmp_path}/job.out", "-N", "2", "-w", "srv-g1-001,srv-g1-002", "-t", "30",
        str(script),
    )  # fmt: skip
    job = out.strip()
    other = slurm.sbatch(["srv-g1-004"])
    slurm.wait(lambda: slurm.job_state(job) == "RUNNING", 30, "the training job")
    executor = SlurmExecutor(pool, config(slurm, checkpoint_signal="USR1"))
    errors = Finding(
        "error_rate", f"lf-g1-r1:{port('lf-g1-r1', 2)}", "critical", f"lf-g1-r1:{port('lf-g1-r1', 2)} FCS errors",
        links_scope(FABRIC, [("lf-g1-r1", port("lf-g1-r1", 2))]), {"fcs_per_hour": 9000.0},
    )  # fmt: skip
    r = await sync(pool, [errors], datetime.now(UTC), Policy(SCHEDULER, drain=True, checkpoint=True))
    assert r.actions == 1
    await run_all(executor)
    (row,) = await actions(pool)
    assert (row["action"], row["status"]) == ("checkpoint", "done"), row
    assert row["commands"] == [f"scancel --signal=USR1 --batch {job}"]
    slurm.wait(lambda: got.exists() and "USR1" in got.read_text(), 15, "the batch step to get SIGUSR1")
    assert slurm.job_state(job) == "RUNNING" and slurm.job_state(other) == "RUNNING"
    assert not [n for n in NODES if slurm.node(n).drained]


async def test_running_jobs_are_discovered_and_finished_ones_leave(pool: asyncpg.Pool, slurm: SlurmCluster) -> None:
    await save_job(pool, Job("by-hand", ("srv-g1-010",)))
    job = slurm.sbatch(NODES[:3], time_limit_min=90)
    discovery = SlurmDiscovery(pool, config(slurm), FABRIC.servers)
    assert await discovery.poll_once(datetime.now(UTC)) == (1, 0)
    jobs = {j.id: j for j in (await list_jobs(pool, 100, 0))[0]}
    assert set(jobs) == {"by-hand", f"slurm:{job}"}
    found = jobs[f"slurm:{job}"]
    assert found.hosts == NODES[:3] and found.expected_days == pytest.approx(90 / 1440)
    assert found.started_at is not None and abs((datetime.now(UTC) - found.started_at).total_seconds()) < 120
    # the blast-radius join finds it under a fault of one of its hosts
    async with pool.acquire() as conn:
        assert await affected_jobs(conn, ["srv-g1-002"]) == [{"id": f"slurm:{job}", "affected_hosts": ["srv-g1-002"]}]

    # slurmctld away: squeue answers an empty list with an error; the known jobs stay
    slurm.stop_ctld()
    with pytest.raises(SlurmUnavailable):
        await discovery.poll_once(datetime.now(UTC))
    assert {j.id for j in (await list_jobs(pool, 100, 0))[0]} == {"by-hand", f"slurm:{job}"}
    await asyncio.to_thread(slurm.start_ctld)

    slurm.run("scancel", job)
    slurm.wait(lambda: not slurm.job_state(job), 30, "the job gone")
    assert await discovery.poll_once(datetime.now(UTC)) == (0, 1)
    assert {j.id for j in (await list_jobs(pool, 100, 0))[0]} == {"by-hand"}


# Slow (the longest default test, 30-80 s, its lab's start-up the flakiest wait on 2 busy cores). The
# default run covers each link of it: test_analyze_e2e (simulator → collector → database → analyzer,
# alerts with the jobs they touch), test_running_jobs_are_discovered_and_finished_ones_leave and
# test_a_flapping_nic_drains_its_node_only_the_job_keeps_running_and_resolution_resumes_it (slurmctld).
@pytest.mark.slow
async def test_end_to_end_a_flapping_cable_under_a_discovered_job_drains_its_node_and_resumes_it(
    fresh_db: str, tmp_path: Path, slurm: SlurmCluster
) -> None:
    """Simulator → collector → TimescaleDB → analyzer → slurmctld, nothing registered by hand: the
    running job is discovered, its health shows the fault, the flapping NIC cable's node is drained
    while the job runs on, and resumed once the incident resolves."""
    job = slurm.sbatch(NODES)
    async with lab(fresh_db, tmp_path, naming="mixed") as lb:
        assert lb.sim.state is not None and lb.sim.fabric is not None
        analyzer = lb.config.analyzer.model_copy(update={"resolve_hold_down_s": 6.0})
        schedulers = {"slurm": {"slurm_conf": str(slurm.conf), "poll_s": 1, "command_timeout_s": 20}}
        cfg = lb.config.model_validate({**lb.config.model_dump(mode="json"), "schedulers": schedulers})
        alerts = cfg.alerts.model_copy(update={"resume_after_s": 3.0})  # resumed 3 s after it stays clean
        service = analyzer_service(
            cfg.model_copy(update={"analyzer": analyzer, "alerts": alerts}), lb.sim.fabric, lb.pool
        )
        stop = asyncio.Event()
        task = asyncio.create_task(service.run(stop))

        def health() -> dict[str, Any] | None:
            jobs = (service.last_report or {}).get("jobs", [])
            return next((j for j in jobs if j["id"] == f"slurm:{job}"), None)

        async def till(cond: Any, within_s: float, what: str) -> None:
            """``until``, failing at once if the analyzer's task ended."""
            await until(lambda: task.done() or cond(), within_s, what, every_s=0.25)
            assert not task.done(), task

        try:
            await till(lambda: (h := health()) is not None and h["status"] == "healthy", 40, "the job discovered")
            assert health()["hosts"] == 4  # type: ignore[index]
            cable = lb.sim.fabric.ports("lf-g1-r1")[1].name  # srv-g1-002's NIC cable: "1/1/c2/1"
            fault = lb.sim.state.apply({"kind": "link_flap", "switch": "lf-g1-r1", "port": cable, "period_s": 1.0})
            await till(lambda: slurm.node("srv-g1-002").drained, 60, "srv-g1-002 drained")
            node = slurm.node("srv-g1-002")
            # the reason names the port as the switch does, through a real slurmctld
            assert node.reason.startswith("fabricmon: ") and f"lf-g1-r1:{cable}" in node.reason, node
            assert [n for n in NODES if slurm.node(n).drained] == ["srv-g1-002"]
            assert slurm.job_state(job) == "RUNNING"
            await till(lambda: (h := health()) is not None and h["status"] != "healthy", 20, "the job's health")
            hit = health()
            assert hit is not None and any("srv-g1-002" in f["action_hosts"] for f in hit["faults"]), hit

            lb.sim.state.clear(fault.id)
            await till(lambda: not slurm.node("srv-g1-002").drained, 90, "srv-g1-002 resumed")
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
    assert slurm.job_state(job) == "RUNNING"
    assert slurm.drains_logged("srv-g1-002") == 1 and slurm.resumes_logged("srv-g1-002") == 1
    rows = [(a["action"], a["status"], a["nodes"]) for a in await _actions_of(fresh_db)]
    assert rows == [("drain", "done", ["srv-g1-002"]), ("resume", "done", ["srv-g1-002"])], rows


async def _actions_of(dsn: str) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT action, status, nodes FROM scheduler_actions ORDER BY seq")
        return [{"action": r["action"], "status": r["status"], "nodes": list(r["nodes"])} for r in rows]
    finally:
        await conn.close()


async def test_get_v1_actions_lists_what_was_done_and_withheld(pool: asyncpg.Pool, slurm: SlurmCluster) -> None:
    executor = SlurmExecutor(pool, config(slurm))
    t0 = datetime.now(UTC)
    await sync(pool, [server_link(3), leaf_gone("lf-g2-r1")], t0, POLICY)
    await run_all(executor)
    async with TestClient(TestServer(create_app(Config(), FABRIC, pool=pool))) as client:
        resp = await client.get("/v1/actions")
        body = await resp.json()
        assert resp.status == 200 and body["total"] == 2
        by_status = {a["status"]: a for a in body["items"]}
        assert set(by_status) == {"done", "withheld"}
        done = by_status["done"]
        assert done["nodes"] == ["srv-g1-003"] and done["scheduler"] == "slurm" and done["action"] == "drain"
        assert done["commands"][0].startswith("scontrol update NodeName=srv-g1-003 State=DRAIN Reason=")
        assert done["result"] == {"srv-g1-003": "srv-g1-003: drained"} and done["done_at"]

        resp = await client.get("/v1/actions", params={"status": "withheld"})
        (withheld,) = (await resp.json())["items"]
        assert withheld["incident"] != done["incident"] and withheld["commands"] == []
        resp = await client.get("/v1/actions", params={"incident": str(done["incident"])})
        assert [a["id"] for a in (await resp.json())["items"]] == [done["id"]]
        resp = await client.get("/v1/actions", params={"incident": "999999", "offset": "5"})
        assert (await resp.json())["total"] == 0
        for bad in ({"status": "exploded"}, {"incident": "0"}, {"limit": "5000"}):
            resp = await client.get("/v1/actions", params=bad)
            assert resp.status == 422 and resp.content_type == "application/problem+json", bad


async def test_an_incident_over_before_slurmctld_returns_drains_nothing(
    pool: asyncpg.Pool, slurm: SlurmCluster
) -> None:
    slurm.stop_ctld()
    executor = SlurmExecutor(pool, config(slurm, retry_max_s=1))
    t0 = datetime.now(UTC)
    await sync(pool, [server_link(3)], t0, POLICY)
    assert not await executor.step()  # slurmctld away: the drain waits
    await sync(pool, [], t0 + timedelta(seconds=HOLD + 1), POLICY)  # ... and the incident resolves meanwhile
    await asyncio.to_thread(slurm.start_ctld)
    await asyncio.sleep(1.5)  # past the retry delay
    await run_all(executor)
    drain, resume = await actions(pool)
    assert drain["status"] == "done" and drain["commands"] == [] and "resolved before" in drain["result"]["srv-g1-003"]
    assert resume["status"] == "done" and resume["commands"] == []
    assert not slurm.node("srv-g1-003").drained and slurm.drains_logged("srv-g1-003") == 0


async def test_two_executors_never_hold_one_action(pool: asyncpg.Pool, slurm: SlurmCluster) -> None:
    """Two analyzers (two executors) claim at once: one gets the head action, the other waits its turn."""
    t0 = datetime.now(UTC)
    await sync(pool, [server_link(3)], t0, POLICY)
    await sync(pool, [server_link(3), server_link(2)], t0 + timedelta(seconds=1), POLICY)
    got = await asyncio.gather(*(claim(pool, SCHEDULER, 30) for _ in range(4)))
    claimed = [r for r in got if r is not None]
    assert len(claimed) == 1 and claimed[0].hosts == ("srv-g1-003",)  # the oldest, and no one skips ahead of it


async def test_metrics_count_actions_and_pass_promtool(pool: asyncpg.Pool, slurm: SlurmCluster) -> None:
    cfg = Config.model_validate(
        {
            "schedulers": {"slurm": {"slurm_conf": str(slurm.conf)}},
            "alerts": {"alertmanagers": [{"url": "http://127.0.0.1:9"}]},
        }
    )
    service = analyzer_service(cfg, FABRIC, pool)
    assert isinstance(service.schedulers, Schedulers) and service.schedulers.executor is not None
    t0 = datetime.now(UTC)
    await sync(pool, [server_link(3)], t0, POLICY)
    await run_all(service.schedulers.executor)
    extra = analyzer_metrics(service)
    async with TestClient(TestServer(create_app(cfg, FABRIC, pool=pool, extra_collectors=extra))) as client:
        resp = await client.get("/metrics")
        text = await resp.text()
    assert 'fabricmon_scheduler_actions{scheduler="slurm",status="done"} 1.0' in text
    assert 'fabricmon_scheduler_actions{scheduler="slurm",status="failed"} 0.0' in text
    assert 'fabricmon_scheduler_executions_total{action="drain",scheduler="slurm"} 1.0' in text
    assert 'fabricmon_alertmanager_pushes_total{alertmanager="127.0.0.1:9"} 0.0' in text
    assert "fabricmon_analyzer_leader 0.0" in text  # not running: neither leading nor standing by yet
    promtool = shutil.which("promtool")
    if promtool is not None:  # make setup installs it; test_prometheus.py requires it
        argv = [promtool, "check", "metrics"]
        out = await asyncio.to_thread(subprocess.run, argv, input=text, capture_output=True, text=True, check=False)
        assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), out


def _trapping_job(slurm: SlurmCluster, tmp_path: Path, node: str) -> tuple[str, Path]:
    """A batch job on ``node`` whose script counts the SIGUSR1s it gets, one line each."""
    script = tmp_path / f"train-{node}.sh"
    got = tmp_path / f"signals-{node}"
    script.write_text(f"#!/bin/bash\ntrap 'echo USR1 >> {got}' USR1\nwhile true; do sleep 0.2; done\n")
    script.chmod(0o755)
    out = slurm.run("sbatch", "--parsable", f"--output={tmp_path}/{node}.out", "-w", node, "-t", "30", str(script))
    job = out.strip()
    slurm.wait(lambda: slurm.job_state(job) == "RUNNING", 30, f"job {job} running")
    return job, got


def _storm() -> Finding:
    """A PFC storm behind srv-g1-001's and srv-g1-002's ports: checkpoint both hosts' jobs."""
    first, second = port("lf-g1-r1", 1), port("lf-g1-r1", 2)
    scope = links_scope(FABRIC, [("lf-g1-r1", first), ("lf-g1-r1", second)])
    return Finding(
        "pfc_storm", f"lf-g1-r1:{first}:3", "critical", f"PFC storm at lf-g1-r1:{first}", scope, {"ratio": 0.4}
    )


async def test_a_checkpoint_retried_after_a_crash_never_signals_a_job_twice(
    pool: asyncpg.Pool, slurm: SlurmCluster, tmp_path: Path
) -> None:
    (job_a, got_a), (job_b, got_b) = (_trapping_job(slurm, tmp_path, n) for n in ("srv-g1-001", "srv-g1-002"))
    r = await sync(pool, [_storm()], datetime.now(UTC), Policy(SCHEDULER, drain=True, checkpoint=True))
    assert r.actions == 1
    first = SlurmExecutor(pool, config(slurm, checkpoint_signal="USR1"))
    row = await claim(pool, SCHEDULER, lease_s=0.5)
    assert row is not None and row.action == "checkpoint"
    plan = await first.plan(row)
    assert len(plan.ops) == 2
    await first.slurm.execute(plan.ops[0])  # the first job is signalled and noted ...
    await note_commands(pool, row, [first.slurm.describe(plan.ops[0])])
    await asyncio.sleep(0.6)  # ... then the executor dies; its lease runs out
    await run_all(SlurmExecutor(pool, config(slurm, checkpoint_signal="USR1")))
    for got in (got_a, got_b):
        slurm.wait(lambda got=got: got.exists(), 15, got.name)
    await asyncio.sleep(1.0)  # room for a second signal to arrive
    assert got_a.read_text().count("USR1") == 1 and got_b.read_text().count("USR1") == 1
    (done,) = await actions(pool)
    assert done["status"] == "done" and len(done["commands"]) == 2
    assert "earlier attempt" in " ".join(done["result"].values())
    assert slurm.job_state(job_a) == slurm.job_state(job_b) == "RUNNING"


async def test_a_job_that_ends_before_its_signal_does_not_fail_the_checkpoint(
    pool: asyncpg.Pool, slurm: SlurmCluster, tmp_path: Path
) -> None:
    (job_a, got_a), (job_b, _) = (_trapping_job(slurm, tmp_path, n) for n in ("srv-g1-001", "srv-g1-002"))
    await sync(pool, [_storm()], datetime.now(UTC), Policy(SCHEDULER, drain=True, checkpoint=True))
    executor = SlurmExecutor(pool, config(slurm, checkpoint_signal="USR1"))
    row = await claim(pool, SCHEDULER, lease_s=30)
    assert row is not None
    plan = await executor.plan(row)  # both jobs listed ...
    slurm.run("scancel", job_b)  # ... and one ends before it is signalled
    slurm.wait(lambda: not slurm.job_state(job_b), 30, "job b gone")
    await executor._execute(row, plan)  # the step() of a claimed row, with the job gone in between
    (done,) = await actions(pool)
    assert done["status"] == "done", done
    assert "not signalled" in done["result"]["srv-g1-002"]
    slurm.wait(lambda: got_a.exists() and "USR1" in got_a.read_text(), 15, "job a's signal")
    assert slurm.job_state(job_a) == "RUNNING"


async def test_slurm_ids_are_discoverys_while_it_is_on(pool: asyncpg.Pool, slurm: SlurmCluster) -> None:
    on = Config.model_validate({"schedulers": {"slurm": {"slurm_conf": str(slurm.conf)}}})
    for cfg, expected in ((on, 422), (Config(), 201)):
        async with TestClient(TestServer(create_app(cfg, FABRIC, pool=pool))) as client:
            resp = await client.post("/v1/jobs", json={"id": "slurm:42", "hosts": ["srv-g1-001"]})
            body = await resp.json(content_type=None)
            assert resp.status == expected, body
            if expected == 422:
                assert body["type"].endswith("reserved-job-id") and "slurm:" in body["detail"]
            resp = await client.post("/v1/jobs", json={"id": "mine-42", "hosts": ["srv-g1-001"]})
            assert resp.status in (200, 201)


async def sync_clean(pool: asyncpg.Pool, findings: list[Finding], at: datetime, resume_after_s: float) -> SyncResult:
    """As :func:`sync`, with resumes released only after ``resume_after_s`` of clean resolution."""
    incidents = decide_all(correlate(findings, FABRIC), FABRIC, ActionPolicy())
    return await sync_alerts(
        pool, incidents, now=at, hold_down_s=HOLD, webhooks=[], schedulers=(POLICY,), drain_limit=1,
        resume_after_s=resume_after_s,
    )  # fmt: skip


async def drained_then_resolved(
    pool: asyncpg.Pool, slurm: SlurmCluster, clean: float
) -> tuple[SlurmExecutor, datetime]:
    """srv-g1-003's link fails and the node is drained; then the incident resolves, with no resume
    yet. Returns the executor and the time it resolved."""
    executor = SlurmExecutor(pool, config(slurm))
    t0 = datetime.now(UTC)
    await sync_clean(pool, [server_link(3)], t0, clean)
    await run_all(executor)
    assert slurm.node("srv-g1-003").drained
    end = t0 + timedelta(seconds=HOLD + 1)
    r = await sync_clean(pool, [], end, clean)
    assert (r.resolved, r.actions) == (1, 0)
    return executor, end


async def test_a_drained_node_is_resumed_only_once_its_incident_has_stayed_clean(
    pool: asyncpg.Pool, slurm: SlurmCluster
) -> None:
    clean = 30.0
    executor, end = await drained_then_resolved(pool, slurm, clean)
    r = await sync_clean(pool, [], end + timedelta(seconds=clean - 1), clean)
    assert r.actions == 0
    await run_all(executor)
    assert slurm.node("srv-g1-003").drained and slurm.resumes_logged("srv-g1-003") == 0
    r = await sync_clean(pool, [], end + timedelta(seconds=clean), clean)  # clean for the whole window
    assert r.actions == 1
    await run_all(executor)
    assert not slurm.node("srv-g1-003").drained and slurm.resumes_logged("srv-g1-003") == 1
    assert [(a["action"], a["status"]) for a in await actions(pool)] == [("drain", "done"), ("resume", "done")]
    assert "stayed clean for 30 s" in (await actions(pool))[-1]["reason"]


async def test_a_reopen_within_the_clean_window_cancels_the_resume_until_it_is_clean_again(
    pool: asyncpg.Pool, slurm: SlurmCluster
) -> None:
    clean = 30.0
    executor, end = await drained_then_resolved(pool, slurm, clean)
    r = await sync_clean(pool, [server_link(3)], end + timedelta(seconds=10), clean)  # it flaps again
    assert r.fired == 1
    await run_all(executor)  # its drain finds the node still drained by fabricmon: nothing to run
    end2 = end + timedelta(seconds=10 + HOLD)
    r = await sync_clean(pool, [], end2, clean)  # the re-opened incident resolves in turn
    assert r.resolved == 1
    # the first incident has been resolved for longer than the window, but its place re-opened since
    r = await sync_clean(pool, [], end2 + timedelta(seconds=clean - 1), clean)
    assert r.actions == 0
    await run_all(executor)
    assert slurm.node("srv-g1-003").drained and slurm.resumes_logged("srv-g1-003") == 0
    r = await sync_clean(pool, [], end2 + timedelta(seconds=clean), clean)
    assert r.actions == 2  # both incidents' resumes: one node resumed, once
    await run_all(executor)
    assert not slurm.node("srv-g1-003").drained and slurm.resumes_logged("srv-g1-003") == 1
    assert slurm.drains_logged("srv-g1-003") == 1
