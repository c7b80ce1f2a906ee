"""Stability objectives and job interruption estimates: ``/v1/slo``.

From the latest verdict: each objective's target, current value, error budget left, burn rates
and status; each registered job's interruption probability for its remaining days; and, for
planning, the probability that a 30-day job of a given size is interrupted by the network at
today's per-GPU availability (FABRIC.md's ``1 - a^N`` per month).
"""

from __future__ import annotations

from aiohttp import web

from analyzer.objectives import job_interruption
from api.cache import Verdict
from api.routes.base import FABRIC, Endpoint, cached_json, verdict_of
from api.schemas import JobEstimateOut, ObjectiveOut, SizeEstimateOut, SloOut
from fabric.model import Fabric

ESTIMATE_DAYS = 30.0


def sizes(fabric: Fabric) -> list[int]:
    """Job sizes worth estimating: one group, powers of two up to the fabric, the whole fabric."""
    total = sum(s.gpus for s in fabric.servers.values())
    out = {fabric.group_gpus, total}
    n = 1024
    while n < total:
        out.add(n)
        n *= 4
    return sorted(x for x in out if 0 < x <= total)


def render_slo(verdict: Verdict, fabric: Fabric) -> SloOut:
    report = verdict.report
    objectives = [ObjectiveOut.model_validate(o) for o in report.get("slo", [])]
    a = next((o.current for o in objectives if o.name == "gpu_network_availability"), 1.0)
    jobs = [
        JobEstimateOut(
            id=j["id"],
            status=j["status"],
            gpus=j["gpus"],
            remaining_days=j["remaining_days"],
            efficiency_loss=j["efficiency_loss"],
            interruption_probability=j["interruption_probability"],
        )
        for j in report.get("jobs", [])
    ]
    estimates = [
        SizeEstimateOut(
            gpus=n, days=ESTIMATE_DAYS, interruption_probability=round(job_interruption(a, n, ESTIMATE_DAYS), 6)
        )
        for n in sizes(fabric)
    ]
    return SloOut(
        updated_at=verdict.time, objectives=objectives, gpu_network_availability=a, jobs=jobs, estimates=estimates
    )


async def slo(request: web.Request) -> web.Response:
    verdict = await verdict_of(request)
    fabric = request.app[FABRIC]
    return cached_json(verdict.memoized("slo", lambda: render_slo(verdict, fabric).model_dump_json().encode()))


ENDPOINTS = (
    Endpoint(
        "GET",
        "/v1/slo",
        slo,
        "Each objective: target, current, error budget left, burn rate, status; job interruption estimates",
        SloOut,
        errors=(503,),
        description=__doc__ or "",
    ),
)
