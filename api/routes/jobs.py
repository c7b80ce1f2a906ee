"""Training jobs as a scheduler registers them, and the fabric under each one.

``POST /v1/jobs`` registers a job (``id``, ``hosts``, optional ``started_at``, ``expected_days``).
Its body is :class:`analyzer.job_spec.JobIn`, the one validation a job file given to
``fabricmon check --job`` also goes through, and :mod:`store.jobs` stores it. Every host
must be a server of the inventory: unknown hosts are a 422 naming them, because a job the fabric
cannot place would always look healthy. Registering an existing id replaces it (200; 201 when
new), so a scheduler may simply retry.

``GET /v1/jobs/{id}/health`` answers for that job only, from the latest verdict: the findings
whose blast radius touches its hosts, per rail the leaves its hosts hang from and the status of
that rail under the job, the firing alerts touching its hosts, the training-efficiency loss (the
worst rail sets the pace) and the probability that the network interrupts it in its remaining
days. The firing alerts come from the app's in-memory copy (refreshed each second), so a job
health query is one small database read whatever the fabric's size.
"""

from __future__ import annotations

from aiohttp import web

from analyzer.findings import SEVERITY_ORDER
from analyzer.jobs import job_health
from analyzer.verdict import from_report
from api.inputs import JobIn, JobPath, PageQuery
from api.live import Placement
from api.problems import NotFound, Unprocessable, unknown
from api.routes.base import (
    CACHE,
    CONFIG,
    FABRIC,
    PLACEMENT,
    POOL,
    Endpoint,
    Refusal,
    now,
    parse_body,
    parse_path,
    parse_query,
    respond,
    verdict_of,
)
from api.schemas import Status
from api.schemas_jobs import JobAlertOut, JobFaultOut, JobHealthOut, JobList, JobOut, JobRailOut
from fabric.model import Fabric
from schedulers.discovery import PREFIX as DISCOVERED_PREFIX
from store import jobs as job_store
from store.jobs import Job

MAX_ALERTS = 100
STATUS: dict[int, Status] = {0: "healthy", 1: "degraded", 2: "critical"}
UNKNOWN_JOB = Refusal(404, "unknown-job", "no job is registered with that id")
RESERVED_ID = Refusal(
    422, "reserved-job-id", "ids starting `slurm:` are Slurm job discovery's while it is on (schedulers.slurm)"
)


def _job_out(fabric: Fabric, job: Job) -> JobOut:
    assert job.created_at is not None  # a stored job
    return JobOut(
        id=job.id,
        hosts=list(job.hosts),
        started_at=job.started_at,
        expected_days=job.expected_days,
        created_at=job.created_at,
        gpus=sum(fabric.servers[h].gpus for h in job.hosts if h in fabric.servers),
    )


async def register(request: web.Request) -> web.Response:
    job = (await parse_body(request, JobIn)).to_job()
    slurm = request.app[CONFIG].schedulers.slurm
    if slurm is not None and slurm.discover_jobs and job.id.startswith(DISCOVERED_PREFIX):
        # discovery would replace it with what Slurm runs, or delete it as finished
        raise Unprocessable(
            f"job ids starting {DISCOVERED_PREFIX!r} are Slurm's running jobs (discovered every "
            f"{slurm.poll_s:g} s); register a job of your own under another id",
            kind=RESERVED_ID.kind,
        )
    fabric = request.app[FABRIC]
    missing = [h for h in job.hosts if h not in fabric.servers]
    if missing:
        raise unknown("hosts", missing)
    stored, inserted = await job_store.save_job(request.app[POOL], job)
    status = 201 if inserted else 200
    return respond(_job_out(fabric, stored), status=status, headers={"Location": f"/v1/jobs/{job.id}"})


async def list_jobs(request: web.Request) -> web.Response:
    q = parse_query(request, PageQuery)
    jobs, total = await job_store.list_jobs(request.app[POOL], q.limit, q.offset)
    fabric = request.app[FABRIC]
    return respond(JobList(items=[_job_out(fabric, j) for j in jobs], total=total, limit=q.limit, offset=q.offset))


async def _job(request: web.Request, job_id: str) -> Job:
    job = await job_store.get_job(request.app[POOL], job_id)
    if job is None:
        raise NotFound(f"no job with id {job_id!r}", kind=UNKNOWN_JOB.kind)
    return job


async def get_job(request: web.Request) -> web.Response:
    job = await _job(request, parse_path(request, JobPath).id)
    return respond(_job_out(request.app[FABRIC], job))


async def delete_job(request: web.Request) -> web.Response:
    job_id = parse_path(request, JobPath).id
    if not await job_store.delete_job(request.app[POOL], job_id):
        raise NotFound(f"no job with id {job_id!r}", kind=UNKNOWN_JOB.kind)
    return web.Response(status=204)


def job_rails(placement: Placement, hosts: tuple[str, ...], faults: list[JobFaultOut]) -> list[JobRailOut]:
    """Per rail: the leaves under the job's hosts, the rail's spines, and the rail's status under the job."""
    out = []
    for rail, leaves in placement.leaves(hosts).items():
        here = [f for f in faults if rail in f.rails]
        worst = max((SEVERITY_ORDER[f.severity] for f in here), default=0)
        out.append(
            JobRailOut(
                rail=rail,
                status=STATUS[worst],
                leaves=list(leaves),
                spines=placement.spines.get(rail, 0),
                faults=len(here),
            )
        )
    return out


async def health(request: web.Request) -> web.Response:
    job = await _job(request, parse_path(request, JobPath).id)
    verdict = await verdict_of(request)
    fabric, cache = request.app[FABRIC], request.app[CACHE]
    a = next(
        (float(o["current"]) for o in verdict.report.get("slo", []) if o["name"] == "gpu_network_availability"), 1.0
    )
    stored = {f.incident.fingerprint: f.incident for f in cache.firing}
    by_member = {f"{x.rule}|{x.key}": x for x in verdict.findings}
    opened = list(stored.values()) + [
        from_report(e, by_member) for e in verdict.report.get("incidents", []) if e["fingerprint"] not in stored
    ]
    h = job_health(job, fabric, opened, a, now())
    faults = [JobFaultOut.model_validate(f) for f in h["faults"]]
    hosts = set(job.hosts)
    alerts = [
        JobAlertOut(
            id=a.id,
            rule=a.rule,
            severity=a.severity,
            summary=a.summary,
            started_at=a.started_at,
            affected_hosts=sorted(a.servers.intersection(hosts)),
        )
        for a in cache.firing
        if not a.servers.isdisjoint(hosts)
    ][:MAX_ALERTS]
    return respond(
        JobHealthOut(
            id=job.id,
            status=h["status"],
            evaluated_at=verdict.time,
            stale=cache.stale(),
            hosts=h["hosts"],
            gpus=h["gpus"],
            unknown_hosts=h["unknown_hosts"],
            groups=sorted({fabric.servers[x].group for x in hosts if x in fabric.servers}),
            rails=job_rails(request.app[PLACEMENT], job.hosts, faults),
            faults=faults,
            alerts=alerts,
            efficiency_loss=h["efficiency_loss"],
            remaining_days=h["remaining_days"],
            interruption_probability=h["interruption_probability"],
        )
    )


ENDPOINTS = (
    Endpoint(
        "POST",
        "/v1/jobs",
        register,
        "Register (or replace) a training job",
        JobOut,
        status=201,
        body=JobIn,
        errors=(415,),
        tag="jobs",
        description=__doc__ or "",
        refusals=(
            Refusal(
                422, "unknown-hosts", "a host is not a server of the inventory (the problem's `unknown` names them)"
            ),
            RESERVED_ID,
        ),
    ),
    Endpoint("GET", "/v1/jobs", list_jobs, "Registered jobs", JobList, query=PageQuery, tag="jobs"),
    Endpoint(
        "GET", "/v1/jobs/{id}", get_job, "One job", JobOut, path_model=JobPath, tag="jobs", refusals=(UNKNOWN_JOB,)
    ),
    Endpoint(
        "DELETE",
        "/v1/jobs/{id}",
        delete_job,
        "Forget a job",
        None,
        status=204,
        path_model=JobPath,
        tag="jobs",
        refusals=(UNKNOWN_JOB,),
    ),
    Endpoint(
        "GET",
        "/v1/jobs/{id}/health",
        health,
        "The fabric under one job: status, faults and alerts touching its hosts and rails, efficiency loss, "
        "interruption probability for its remaining days",
        JobHealthOut,
        path_model=JobPath,
        errors=(503,),
        tag="jobs",
        refusals=(UNKNOWN_JOB,),
    ),
)
