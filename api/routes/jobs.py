"""Training jobs as a scheduler registers them, and the fabric under each one.

``POST /v1/jobs`` registers a job (``id``, ``hosts``, optional ``started_at``, ``expected_days``),
checked like a job file (:func:`analyzer.jobs.job_from_dict`). Every host must be a server of
the inventory: unknown hosts are a 422 naming them, because a job the fabric cannot place would
always look healthy. Registering an existing id replaces it (200; 201 when new), so a scheduler
may simply retry.

``GET /v1/jobs/{id}/health`` answers for that job only, from the latest verdict: the findings
whose blast radius touches its hosts, per rail the leaves its hosts hang from and the status of
that rail under the job, the firing alerts touching its hosts, the training-efficiency loss (the
worst rail sets the pace) and the probability that the network interrupts it in its remaining
days. The firing alerts come from the app's in-memory copy (refreshed each second), so a job
health query is one small database read whatever the fabric's size.
"""

from __future__ import annotations

from datetime import UTC

from aiohttp import web

from analyzer.findings import SEVERITY_ORDER
from analyzer.jobs import Job, JobError, job_from_dict, job_health
from api.inputs import JobIn, JobPath, PageQuery
from api.live import Placement
from api.problems import NotFound, Unprocessable, unknown
from api.routes.base import (
    CACHE,
    FABRIC,
    PLACEMENT,
    POOL,
    Endpoint,
    now,
    parse_body,
    parse_path,
    parse_query,
    respond,
    verdict_of,
)
from api.schemas import JobAlertOut, JobFaultOut, JobHealthOut, JobList, JobOut, JobRailOut, Status
from fabric.model import Fabric
from store.db import Record

MAX_ALERTS = 100
STATUS: dict[int, Status] = {0: "healthy", 1: "degraded", 2: "critical"}
_UPSERT_SQL = """
INSERT INTO jobs (id, hosts, started_at, expected_days) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET hosts = EXCLUDED.hosts, started_at = EXCLUDED.started_at,
                               expected_days = EXCLUDED.expected_days
RETURNING id, hosts, started_at, expected_days, created_at, (xmax = 0) AS inserted
"""


def _gpus(fabric: Fabric, hosts: list[str]) -> int:
    return sum(fabric.servers[h].gpus for h in hosts if h in fabric.servers)


def _job_out(fabric: Fabric, r: Record) -> JobOut:
    return JobOut(
        id=r["id"],
        hosts=list(r["hosts"]),
        started_at=r["started_at"],
        expected_days=r["expected_days"],
        created_at=r["created_at"],
        gpus=_gpus(fabric, list(r["hosts"])),
    )


async def register(request: web.Request) -> web.Response:
    body = await parse_body(request, JobIn)
    fabric = request.app[FABRIC]
    data = body.model_dump(exclude_none=True)
    if body.started_at is not None and body.started_at.tzinfo is None:
        data["started_at"] = body.started_at.replace(tzinfo=UTC)
    try:
        job = job_from_dict(data, "body")
    except JobError as exc:
        raise Unprocessable(str(exc), kind="invalid-job") from None
    missing = [h for h in job.hosts if h not in fabric.servers]
    if missing:
        raise unknown("hosts", missing)
    row = await request.app[POOL].fetchrow(_UPSERT_SQL, job.id, list(job.hosts), job.started_at, job.expected_days)
    assert row is not None
    status = 201 if row["inserted"] else 200
    return respond(_job_out(fabric, row), status=status, headers={"Location": f"/v1/jobs/{job.id}"})


async def list_jobs(request: web.Request) -> web.Response:
    q = parse_query(request, PageQuery)
    pool = request.app[POOL]
    rows = await pool.fetch(
        "SELECT id, hosts, started_at, expected_days, created_at FROM jobs ORDER BY id LIMIT $1 OFFSET $2",
        q.limit,
        q.offset,
    )
    total = await pool.fetchval("SELECT count(*) FROM jobs")
    fabric = request.app[FABRIC]
    return respond(JobList(items=[_job_out(fabric, r) for r in rows], total=total, limit=q.limit, offset=q.offset))


async def _row(request: web.Request, job_id: str) -> Record:
    row = await request.app[POOL].fetchrow(
        "SELECT id, hosts, started_at, expected_days, created_at FROM jobs WHERE id = $1", job_id
    )
    if row is None:
        raise NotFound(f"no job with id {job_id!r}", kind="unknown-job")
    return row


async def get_job(request: web.Request) -> web.Response:
    row = await _row(request, parse_path(request, JobPath).id)
    return respond(_job_out(request.app[FABRIC], row))


async def delete_job(request: web.Request) -> web.Response:
    job_id = parse_path(request, JobPath).id
    deleted = await request.app[POOL].fetchval("DELETE FROM jobs WHERE id = $1 RETURNING id", job_id)
    if deleted is None:
        raise NotFound(f"no job with id {job_id!r}", kind="unknown-job")
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
    row = await _row(request, parse_path(request, JobPath).id)
    verdict = await verdict_of(request)
    fabric, cache = request.app[FABRIC], request.app[CACHE]
    job = Job(row["id"], tuple(row["hosts"]), row["started_at"], row["expected_days"])
    a = next(
        (float(o["current"]) for o in verdict.report.get("slo", []) if o["name"] == "gpu_network_availability"), 1.0
    )
    h = job_health(job, fabric, verdict.findings, a, now())
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
    ),
    Endpoint("GET", "/v1/jobs", list_jobs, "Registered jobs", JobList, query=PageQuery, tag="jobs"),
    Endpoint("GET", "/v1/jobs/{id}", get_job, "One job", JobOut, path_model=JobPath, errors=(404,), tag="jobs"),
    Endpoint(
        "DELETE",
        "/v1/jobs/{id}",
        delete_job,
        "Forget a job",
        None,
        status=204,
        path_model=JobPath,
        errors=(404,),
        tag="jobs",
    ),
    Endpoint(
        "GET",
        "/v1/jobs/{id}/health",
        health,
        "The fabric under one job: status, faults and alerts touching its hosts and rails, efficiency loss, "
        "interruption probability for its remaining days",
        JobHealthOut,
        path_model=JobPath,
        errors=(404, 503),
        tag="jobs",
    ),
)
