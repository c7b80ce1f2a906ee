"""A drill's report: JSON (SPEC §10.3) and the table ``fabricmon drill`` prints."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.table import Table

from drill.runner import DrillOptions, DrillResult
from drill.score import Finding, percentile


def report_dict(result: DrillResult) -> dict[str, Any]:
    """The drill's report as JSON-able data: figures at the top, then every miss, false incident,
    false and missed action by event and incident id, then the events and incidents themselves
    (an event's ``spec`` is what was applied: replay it through ``POST /faults``, or rerun the seed)."""
    s, interval = result.score, result.options.interval_s

    def pcts(values: list[float]) -> dict[str, float | None]:
        return {f"p{q}": percentile(values, q) for q in (50, 95, 99)}

    detection = pcts(s.detection_s)
    options = {k: (str(v) if isinstance(v, Path) else v) for k, v in
               ((f, getattr(result.options, f)) for f in DrillOptions.__slots__)}  # fmt: skip
    options["goals"] = dict(result.options.goals)
    return {
        "seed": result.options.seed,
        "ok": result.ok,
        "faults": s.faults,
        "benign": s.benign,
        "incidents_sent": s.incidents,
        "incidents_in_maintenance": s.maintenance,
        "precision": s.precision,
        "recall": s.recall,
        "localization": s.localization,
        "detection_s": detection,
        "detection_intervals": {k: None if v is None else v / interval for k, v in detection.items()},
        "resolution_s": pcts(s.resolution_s),
        "deliveries_per_fault": s.deliveries_per_fault,
        "false_drains": s.false_drains,
        "false_checkpoints": s.false_checkpoints,
        "by_kind": {
            kind: {
                "faults": k.faults,
                "found": k.detected,
                "of": k.must_detect,
                "localized": k.localized,
                "detection_s": pcts(k.detection_s),
                "deliveries_per_fault": k.deliveries / len(k.detection_s) if k.detection_s else None,
            }
            for kind, k in sorted(s.by_kind.items())
        },
        "goals": [asdict(g) for g in result.goals],
        "missed": [asdict(f) for f in s.misses],
        "false_incidents": [asdict(f) for f in s.false_incidents],
        "false_actions": [asdict(f) for f in s.false_actions],
        "missed_actions": [asdict(f) for f in s.missed_actions],
        "options": options,
        "fabric": {"gpus": result.gpus, "switches": result.switches},
        "elapsed_s": round(result.elapsed_s, 1),
        "events": [
            {
                "id": e.id,
                "kind": e.kind,
                "benign": e.benign,
                "start_s": round(e.start_s, 2),
                "end_s": round(e.end_s, 2),
                "spec": dict(e.spec),
                "incident": s.pairs.get(e.id),
            }
            for e in result.events
        ],
        "incidents": [
            {
                "fingerprint": i.fingerprint,
                "alert_id": i.alert_id,
                "rule": i.rule,
                "summary": i.summary,
                "root_cause": dict(i.root),
                "fired_s": round(i.fired_s, 2),
                "resolved_s": None if i.resolved_s is None else round(i.resolved_s, 2),
                "deliveries": i.deliveries,
                "actions": [a for a, _ in i.actions],
            }
            for i in result.incidents
        ],
    }


def goals_table(result: DrillResult) -> Table:
    """Each goal's figure beside its bound."""
    o = result.options
    t = Table(title=f"fabricmon drill: {result.gpus} GPUs, {o.faults} faults + {o.benign} benign, "
                    f"concurrency {o.concurrency}, seed {o.seed}", title_justify="left")  # fmt: skip
    for col in ("figure", "value", "goal", ""):
        t.add_column(col)
    for g in result.goals:
        value = "—" if g.value is None else (f"{g.value:.3f}" if isinstance(g.value, float) else str(g.value))
        t.add_row(g.name, value, g.goal, "✓" if g.ok else "✗")
    s = result.score
    t.caption = (f"{s.incidents} incidents sent; {len(s.misses)} missed, {len(s.false_incidents)} false, "
                 f"{len(s.missed_actions)} missed actions; {result.elapsed_s:.0f} s")  # fmt: skip
    return t


def kinds_table(result: DrillResult) -> Table:
    """Per fault kind: found, localized, detection p50/p95 (seconds): where the figures come from."""
    t = Table(title="by fault kind", title_justify="left")
    for col in ("kind", "found", "localized", "detection p50 s", "p95 s", "deliveries"):
        t.add_column(col)

    def num(x: float | None) -> str:
        return "—" if x is None else f"{x:.1f}"

    for kind, k in sorted(result.score.by_kind.items()):
        per = k.deliveries / len(k.detection_s) if k.detection_s else None
        t.add_row(kind, f"{k.detected}/{k.must_detect}", f"{k.localized}/{len(k.detection_s)}",
                  num(percentile(k.detection_s, 50)), num(percentile(k.detection_s, 95)), num(per))  # fmt: skip
    return t


def finding_lines(result: DrillResult) -> list[str]:
    """One line per miss, false incident, false action and missed action."""
    s = result.score
    groups: list[tuple[str, list[Finding]]] = [("missed", s.misses), ("false incident", s.false_incidents),
                                               ("false action", s.false_actions),
                                               ("missed action", s.missed_actions)]  # fmt: skip
    return [f"{label}: event {f.event or '—'}, incident {f.incident or '—'}: {f.detail}"
            for label, found in groups for f in found]  # fmt: skip
