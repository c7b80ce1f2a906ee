"""Rail symmetry and oversubscription: ``/v1/rails`` and ``/v1/oversubscription``.

Both come from the latest verdict. ``/v1/rails`` adds what the heat map needs: each rail's status
(the worst severity of the sent incidents holding its findings: one severity, as the health
verdict's) and, per aggregation group, the status of that rail's slice of the group (findings
whose blast radius holds both the rail and the group). Its body depends on
the verdict only, so it is rendered once per evaluation. ``/v1/oversubscription`` pages every
leaf and spine's ratio from the series the analyzer stored with that verdict.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from api.cache import Verdict
from api.inputs import OversubscriptionQuery
from api.routes.base import CONFIG, FABRIC, POOL, Endpoint, cached_json, parse_query, respond, verdict_of
from api.schemas import AsymmetryOut, OversubscriptionOut, RailGroupOut, RailOut, RailsOut, RatioOut
from fabric.model import Fabric, Role

_RATIOS_SQL = """
SELECT scope, name, down_gbps, up_gbps, ratio, design_ratio, count(*) OVER () AS full_count
FROM oversubscription
WHERE scope = 'switch' AND time = $1 AND (NOT $2 OR ratio IS NULL OR ratio > design_ratio * (1 + 1e-9))
ORDER BY ratio DESC NULLS FIRST, name
LIMIT $3 OFFSET $4
"""


def fabric_groups(fabric: Fabric) -> list[int]:
    """The aggregation groups, from the leaves (every group has one leaf per rail)."""
    return sorted({sw.group for sw in fabric.switches.values() if sw.role is Role.LEAF and sw.group is not None})


def design_by_rail(fabric: Fabric) -> dict[int, float]:
    """Design uplink capacity per rail (leaves and spines of the rail), Gbit/s."""
    out: dict[int, float] = {}
    for name, sw in fabric.switches.items():
        if sw.rail is not None and sw.role is not Role.SUPERSPINE:
            out[sw.rail] = out.get(sw.rail, 0.0) + fabric.capacity(name)[1]
    return out


def _round(value: Any, places: int = 4) -> float | None:
    return None if value is None else round(float(value), places)


def render_rails(verdict: Verdict, fabric: Fabric, load_min_gbps: float) -> RailsOut:
    """The rails and their per-group cells for one verdict."""
    groups = fabric_groups(fabric)
    stored = {int(r["rail"]): r for r in verdict.report.get("rails", [])}
    design = design_by_rail(fabric)
    rails: list[RailOut] = []
    for rail in sorted(set(design) | set(stored)):
        r = stored.get(rail, {})
        found = verdict.by_rail.get(rail, [])
        cells = []
        for g in groups:
            here = verdict.by_cell.get((rail, g), [])
            cells.append(
                RailGroupOut(
                    group=g, status=verdict.status(here), findings=len(here), summaries=[f.summary for f in here[:5]]
                )
            )
        dg = float(r.get("design_gbps", design.get(rail, 0.0)))
        live = r.get("live_gbps")
        rails.append(
            RailOut(
                rail=rail,
                status=verdict.status(found),
                design_gbps=dg,
                live_gbps=_round(live, 1),
                capacity_fraction=_round(float(live) / dg) if live is not None and dg > 0 else None,
                bottleneck=r.get("bottleneck"),
                bottleneck_fraction=_round(r.get("bottleneck_fraction")),
                asymmetry=_round(r.get("asymmetry")),
                load_gbps=_round(r.get("load_gbps"), 1),
                pfc_pause_ratio=verdict.rail_pfc.get(rail),
                findings=len(found),
                groups=cells,
            )
        )
    return RailsOut(updated_at=verdict.time, groups=groups, rails=rails, asymmetry=_asymmetry(rails, load_min_gbps))


def _asymmetry(rails: list[RailOut], load_min_gbps: float) -> AsymmetryOut | None:
    known = [r for r in rails if r.bottleneck_fraction is not None]
    if not known:
        return None
    best = max(known, key=lambda r: (r.bottleneck_fraction or 0.0, -r.rail))
    worst = min(known, key=lambda r: (r.bottleneck_fraction or 0.0, r.rail))
    loads = [r.load_gbps for r in rails if r.load_gbps is not None]
    top = max(loads, default=0.0)
    return AsymmetryOut(
        best_rail=best.rail,
        worst_rail=worst.rail,
        best_fraction=best.bottleneck_fraction or 0.0,
        worst_fraction=worst.bottleneck_fraction or 0.0,
        spread=round((best.bottleneck_fraction or 0.0) - (worst.bottleneck_fraction or 0.0), 4),
        load_spread=round((top - min(loads)) / top, 4) if loads and top >= load_min_gbps else None,
    )


async def rails(request: web.Request) -> web.Response:
    verdict = await verdict_of(request)
    fabric, config = request.app[FABRIC], request.app[CONFIG]
    body = verdict.memoized(
        "rails",
        lambda: render_rails(verdict, fabric, config.analyzer.thresholds.rail_load_min_gbps).model_dump_json().encode(),
    )
    return cached_json(body)


def _ratio(r: Any) -> RatioOut:
    ratio = r["ratio"]
    design = r["design_ratio"]
    return RatioOut(
        scope=r["scope"],
        name=r["name"],
        down_gbps=r["down_gbps"],
        up_gbps=r["up_gbps"],
        ratio=_round(ratio),
        design_ratio=design,
        drift=_round(ratio / design - 1) if ratio is not None and design else None,
    )


async def oversubscription(request: web.Request) -> web.Response:
    q = parse_query(request, OversubscriptionQuery)
    verdict = await verdict_of(request)
    over = verdict.report.get("oversubscription", {})
    rows = await request.app[POOL].fetch(_RATIOS_SQL, verdict.time, q.drifting, q.limit, q.offset)
    total = rows[0]["full_count"] if rows else 0
    if not rows and q.offset:
        total = await request.app[POOL].fetchval(
            "SELECT count(*) FROM oversubscription WHERE scope = 'switch' AND time = $1 "
            "AND (NOT $2 OR ratio IS NULL OR ratio > design_ratio * (1 + 1e-9))",
            verdict.time,
            q.drifting,
        )
    return respond(
        OversubscriptionOut(
            updated_at=verdict.time,
            design_ratio=float(over.get("design_ratio", 1.0)),
            worst=[RatioOut.model_validate(r) for r in over.get("worst", [])],
            rollups=[RatioOut.model_validate(r) for r in over.get("rollups", [])],
            items=[_ratio(r) for r in rows],
            total=total,
            limit=q.limit,
            offset=q.offset,
        )
    )


ENDPOINTS = (
    Endpoint(
        "GET",
        "/v1/rails",
        rails,
        "Per rail: design and live capacity, load, PFC pause ratio, status, per-group cells; the asymmetry",
        RailsOut,
        errors=(503,),
        description=__doc__ or "",
    ),
    Endpoint(
        "GET",
        "/v1/oversubscription",
        oversubscription,
        "Design ratio, every leaf and spine's live down:up ratio and drift, the worst ones, roll-ups",
        OversubscriptionOut,
        query=OversubscriptionQuery,
        errors=(503,),
    ),
)
