"""fabricmon and a real slurmrestd (tests/support/slurmrestd.py) in front of a real Slurm cluster on
loopback: munged, slurmctld with ``auth/jwt``, three slurmd, slurmrestd with ``rest_auth/jwt``.

The API version is the newest this slurmrestd serves (read from its ``GET /openapi/v3``): v0.0.38
with Debian's 22.05. What happened is read back from Slurm itself (``scontrol -o show node``,
``squeue``, slurmctld's log), never from what fabricmon says it did.

The last tests stand a small aiohttp server in for slurmrestd 23.02 and later (v0.0.39+), whose
node updates and batch-step signals 22.05 cannot show: the requests they expect are the ones in
Slurm's source (``src/slurmrestd/plugins/openapi/slurmctld/``, ``data_parser/v0.0.4x/parsers.c``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import web

from analyzer.actions import ActionPolicy, decide_all
from analyzer.alerts import sync_alerts
from analyzer.correlation import correlate
from analyzer.findings import Finding
from analyzer.links import links_scope
from fabric.model import FabricParams
from fabric.topology import build_aipod
from schedulers.config import SlurmConfig
from schedulers.discovery import SlurmDiscovery
from schedulers.executor import SCHEDULER, SlurmExecutor
from schedulers.slurm import Operation, SlurmError, SlurmRefused, SlurmUnavailable
from schedulers.slurm_rest import SlurmRest, check_answer, unsupported
from store.jobs import list_jobs
from store.scheduler_actions import Policy, list_actions
from tests.support.slurm import SlurmCluster
from tests.support.slurmrestd import SlurmRestd, forged_token, missing, slurm_rest_cluster

MISSING = missing()
needs_slurmrestd = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")

FABRIC = build_aipod(FabricParams(gpus=1024))  # 128 servers: one incident may drain 1 host
NODES = ("srv-g1-001", "srv-g1-002", "srv-g1-003")
POLICY = Policy(SCHEDULER, drain=True)
HOLD = 5.0


class Lab:
    """The module's cluster and slurmrestd, a token, and the API version used."""

    def __init__(self, cluster: SlurmCluster, restd: SlurmRestd) -> None:
        self.cluster, self.restd = cluster, restd
        self.token = restd.token(lifespan_s=3 * 3600)
        self.version = restd.api_versions(self.token)[-1]

    def config(self, token: str | None = None, **kw: Any) -> SlurmConfig:
        rest = {"url": self.restd.url, "token": token or self.token, "api_version": self.version}
        return SlurmConfig.model_validate({"rest": rest, "command_timeout_s": 15, **kw})

    def client(self, token: str | None = None, **kw: Any) -> SlurmRest:
        return SlurmRest(self.config(token, **kw))


@pytest.fixture(scope="module")
def lab_() -> Iterator[Lab]:
    with slurm_rest_cluster(NODES) as (cluster, restd):
        yield Lab(cluster, restd)


def _restore(lab: Lab) -> None:
    """slurmctld and slurmrestd up, no jobs, no drains."""
    if "slurmctld" not in lab.cluster.procs:
        lab.cluster.start_ctld()
    if lab.restd.proc is None:
        lab.restd.start()
    lab.cluster.reset()


@pytest.fixture
def lab(lab_: Lab) -> Iterator[Lab]:
    _restore(lab_)
    yield lab_
    _restore(lab_)


def server_link(port: int) -> Finding:
    """A flapping NIC cable of srv-g1-00<port> (lf-g1-r1:swp<port>)."""
    key = f"lf-g1-r1:swp{port}"
    scope = links_scope(FABRIC, [("lf-g1-r1", f"swp{port}")])
    return Finding("link_flapping", key, "critical", f"{key} link_flapping", scope, {"flaps": 5})


async def sync(pool: asyncpg.Pool, findings: list[Finding], at: datetime) -> None:
    incidents = decide_all(correlate(findings, FABRIC), FABRIC, ActionPolicy())
    await sync_alerts(pool, incidents, now=at, hold_down_s=HOLD, webhooks=[], schedulers=(POLICY,), drain_limit=1)


async def actions(pool: asyncpg.Pool) -> list[dict[str, Any]]:
    rows, _ = await list_actions(pool, limit=100)
    return [r.as_json() for r in reversed(rows)]


async def run_all(executor: SlurmExecutor) -> None:
    for _ in range(20):
        if not await executor.step():
            return
    raise AssertionError("the executor never ran out of actions")


@needs_slurmrestd
def test_the_openapi_document_agrees_with_what_fabricmon_says_each_version_can_do(lab: Lab) -> None:
    doc = lab.restd.openapi(lab.token)
    paths = doc["paths"]
    v = lab.version
    assert "get" in paths[f"/slurm/{v}/jobs"] and "get" in paths[f"/slurm/{v}/nodes"]
    # drain and resume are a POST on /node/{node_name}: 22.05's v0.0.38 has only GET there
    node_methods = set(paths[f"/slurm/{v}/node/{{node_name}}"])
    assert ("post" in node_methods) == (unsupported("drain", v) is None), node_methods
    if unsupported("drain", v) is not None:
        assert node_methods == {"get"} and "Slurm 23.02" in (unsupported("drain", v) or "")
    # v0.0.38's DELETE /job/{id} takes a signal but no flags: every step would get it
    job_delete = {p["name"] for p in paths[f"/slurm/{v}/job/{{job_id}}"]["delete"].get("parameters", [])}
    assert ("flags" in job_delete) == (unsupported("signal", v) is None), job_delete


@needs_slurmrestd
async def test_running_jobs_and_node_states_are_read_through_slurmrestd(pool: asyncpg.Pool, lab: Lab) -> None:
    c = lab.cluster
    job = c.sbatch(NODES[:2], time_limit_min=90)
    c.drain("srv-g1-003", "admin: bad DIMM")
    client = lab.client()
    nodes = await client.nodes()
    assert set(nodes) == set(NODES)
    assert nodes["srv-g1-003"].drained and nodes["srv-g1-003"].reason == "admin: bad DIMM"
    assert not nodes["srv-g1-001"].drained and "ALLOCATED" in nodes["srv-g1-001"].state

    discovery = SlurmDiscovery(pool, lab.config(), FABRIC.servers, client=client)
    assert await discovery.poll_once(datetime.now(UTC)) == (1, 0)
    (found,) = (await list_jobs(pool, 100, 0))[0]
    assert found.id == f"slurm:{job}" and found.hosts == NODES[:2]
    assert found.expected_days == pytest.approx(90 / 1440)
    assert found.started_at is not None and abs((datetime.now(UTC) - found.started_at).total_seconds()) < 120

    c.run("scancel", job)
    c.wait(lambda: not c.job_state(job), 30, "the job gone")
    assert await discovery.poll_once(datetime.now(UTC)) == (0, 1)


@needs_slurmrestd
async def test_a_drain_goes_through_the_executor_where_the_api_can_and_is_a_clear_refusal_where_it_cannot(
    pool: asyncpg.Pool, lab: Lab
) -> None:
    c = lab.cluster
    job = c.sbatch(NODES)
    executor = SlurmExecutor(pool, lab.config(max_attempts_refused=1), client=lab.client())
    t0 = datetime.now(UTC)
    await sync(pool, [server_link(3)], t0)
    await run_all(executor)
    (drain,) = await actions(pool)
    why = unsupported("drain", lab.version)
    if why is not None:  # Slurm 22.05: nothing in v0.0.38 updates a node
        assert drain["status"] == "failed", drain
        assert "Slurm 23.02" in drain["last_error"] and lab.version in drain["last_error"], drain
        assert not [n for n in NODES if c.node(n).drained] and c.drains_logged("srv-g1-003") == 0
        assert c.job_state(job) == "RUNNING"
        return
    assert drain["status"] == "done", drain
    assert drain["commands"][0].startswith(f"POST /slurm/{lab.version}/node/srv-g1-003 ")
    node = c.node("srv-g1-003")
    assert node.drained and node.reason.startswith("fabricmon: "), node
    assert [n for n in NODES if c.node(n).drained] == ["srv-g1-003"] and c.job_state(job) == "RUNNING"
    await sync(pool, [], t0 + timedelta(seconds=HOLD + 1))
    await run_all(executor)
    assert not c.node("srv-g1-003").drained and c.resumes_logged("srv-g1-003") == 1


@needs_slurmrestd
async def test_a_checkpoint_signal_reaches_only_the_batch_step_or_is_refused(lab: Lab) -> None:
    c = lab.cluster
    job = c.sbatch(NODES[:1])
    client = lab.client(checkpoint_signal="USR1")
    op = Operation("signal", job_id=job, signal="USR1")
    why = unsupported("signal", lab.version)
    if why is None:
        await client.execute(op)  # a `sleep` batch step ends on USR1: it got it
        c.wait(lambda: not c.job_state(job), 30, "the batch step to end on SIGUSR1")
        return
    with pytest.raises(SlurmRefused, match=r"Slurm 23\.11") as err:
        await client.execute(op)
    assert "batch step" in str(err.value)
    assert client.describe(op).startswith("not sent: ")
    await asyncio.sleep(1)
    assert c.job_state(job) == "RUNNING"


@needs_slurmrestd
async def test_bad_tokens_are_clear_and_never_shown(lab: Lab, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SlurmRefused, match="not a JWT"):
        await lab.client("not-a-token").jobs()

    short = lab.restd.token(lifespan_s=1)
    await asyncio.sleep(1.5)
    with pytest.raises(SlurmRefused, match="token expired at"):
        await lab.client(short).nodes()

    # signed with another key: slurmctld rejects it. 22.05's slurmrestd then answers as it does
    # when slurmctld is away ("Unspecified error", HTTP 500): unavailable, naming the token
    forged = forged_token({"exp": int(time.time()) + 3600, "iat": int(time.time()), "sun": "root"})
    with pytest.raises(SlurmError, match="rejected the token") as err:
        await lab.client(forged).jobs()
    if lab.version == "v0.0.38":
        assert isinstance(err.value, SlurmUnavailable)
    assert "jwt_decode failure" in lab.cluster.ctld_log.read_text()

    # no token at all: slurmrestd's own 401
    async with aiohttp.ClientSession() as s, s.get(f"{lab.restd.url}/slurm/{lab.version}/jobs") as resp:
        status, body = resp.status, await resp.read()
    assert status == 401
    with pytest.raises(SlurmRefused, match="no valid token"):
        check_answer(status, body, "GET /jobs")

    for secret in (short, forged, lab.token):
        assert secret not in caplog.text and secret not in str(err.value)


@needs_slurmrestd
async def test_slurmctld_or_slurmrestd_away_is_unavailable_and_passes(lab: Lab) -> None:
    c = lab.cluster
    client = lab.client(command_timeout_s=10)
    c.stop_ctld()
    with pytest.raises(SlurmUnavailable, match="slurmctld is unreachable"):
        await client.jobs()
    with pytest.raises(SlurmUnavailable):
        await client.nodes()
    await asyncio.to_thread(c.start_ctld)
    assert set(await client.nodes()) == set(NODES)

    lab.restd.stop()
    with pytest.raises(SlurmUnavailable, match="cannot connect"):
        await client.jobs()
    await asyncio.to_thread(lab.restd.start)
    assert await client.jobs() == []


# --- a stand-in for slurmrestd 23.02+ (v0.0.39 and later) ----------------------------------------


class FakeRestd:
    """Answers as a newer slurmrestd does, and records each request."""

    def __init__(self) -> None:
        self.got: list[tuple[str, str, dict[str, str], Any]] = []
        self.delay_s = 0.0

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else None
        self.got.append((request.method, request.path_qs, dict(request.headers), body))
        await asyncio.sleep(self.delay_s)
        meta = {"plugin": {"type": "openapi/slurmctld", "name": "Slurm OpenAPI slurmctld"}}
        if request.match_info["name"] == "nope":
            err = {"description": "Failure to update node nope", "error_number": 2018, "error": "Invalid node name"}
            return web.json_response({"meta": meta, "errors": [err], "warnings": []}, status=500)
        return web.json_response({"meta": meta, "errors": [], "warnings": []})


@pytest.fixture
async def fake() -> AsyncIterator[tuple[str, FakeRestd]]:
    restd = FakeRestd()
    app = web.Application()
    app.router.add_route("*", "/prefix/slurm/{version}/{what}/{name}", restd.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.2)  # a slow answer still pending is cut short
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/prefix/", restd
    finally:
        await runner.cleanup()


def fake_client(url: str, version: str, **kw: Any) -> SlurmRest:
    token = forged_token({"exp": int(time.time()) + 7 * 86400, "sun": "fabricmon"})
    rest = {"url": url, "user": "fabricmon", "token": token, "api_version": version}
    return SlurmRest(SlurmConfig.model_validate({"rest": rest, **kw}))


REASON = "fabricmon: 7 lf-g1-r1:swp1 flapping"


async def test_newer_slurmrestd_drain_resume_and_signal_requests(fake: tuple[str, FakeRestd]) -> None:
    url, restd = fake
    client = fake_client(url, "v0.0.41")
    await client.execute(Operation("drain", ("srv-g1-001", "srv-g1-002"), REASON))
    await client.execute(Operation("resume", ("srv-g1-001",)))
    await client.execute(Operation("signal", job_id="42", signal="USR1"))
    got = [(m, p, b) for m, p, _, b in restd.got]
    assert got == [
        ("POST", "/prefix/slurm/v0.0.41/node/srv-g1-001", {"state": ["DRAIN"], "reason": REASON}),
        ("POST", "/prefix/slurm/v0.0.41/node/srv-g1-002", {"state": ["DRAIN"], "reason": REASON}),
        ("POST", "/prefix/slurm/v0.0.41/node/srv-g1-001", {"state": ["RESUME"]}),
        ("DELETE", "/prefix/slurm/v0.0.41/job/42?signal=USR1&flags=BATCH_JOB", None),
    ]
    headers = restd.got[0][2]
    assert headers["X-SLURM-USER-NAME"] == "fabricmon"
    assert headers["X-SLURM-USER-TOKEN"] == client.rest.token.get_secret_value()

    with pytest.raises(SlurmRefused, match="Invalid node name"):
        await client.execute(Operation("resume", ("nope",)))


async def test_a_slow_slurmrestd_is_unavailable_after_the_deadline(fake: tuple[str, FakeRestd]) -> None:
    url, restd = fake
    restd.delay_s = 5.0
    client = fake_client(url, "v0.0.39", command_timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(SlurmUnavailable, match=r"no answer within 0\.5 s"):
        await client.execute(Operation("drain", ("srv-g1-001", "srv-g1-002"), "fabricmon: 7"))
    assert time.monotonic() - started < 3
