"""A drill's goals: each figure's bound, built in (the issue's) or from ``--goals FILE``.

A goals file is YAML, a mapping of figure to bound; figures it leaves out keep the built-in
bound::

    precision: 0.99                # at least
    recall: 0.99                   # at least
    localization: 0.98             # at least
    false_drains: 0                # at most
    false_checkpoints: 0           # at most
    detection_p95_intervals: 2     # at most: one sampling interval + one evaluation
    deliveries_per_fault: 2.2      # at most
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from drill.score import Score, percentile
from fabric.errors import FabricmonError


class GoalsError(FabricmonError, ValueError):
    """A goals file that cannot be used; the message names the figure."""


def _p95_intervals(s: Score, interval_s: float) -> float | None:
    p95 = percentile(s.detection_s, 95)
    return None if p95 is None else p95 / interval_s


#: figure → (``min``: at least the bound, ``max``: at most; how to read it from a score)
FIGURES: dict[str, tuple[str, Callable[[Score, float], float | None]]] = {
    "precision": ("min", lambda s, _: s.precision),
    "recall": ("min", lambda s, _: s.recall),
    "localization": ("min", lambda s, _: s.localization),
    "false_drains": ("max", lambda s, _: s.false_drains),
    "false_checkpoints": ("max", lambda s, _: s.false_checkpoints),
    "detection_p95_intervals": ("max", _p95_intervals),
    "deliveries_per_fault": ("max", lambda s, _: s.deliveries_per_fault),
}
DEFAULT_GOALS: dict[str, float] = {
    "precision": 0.99,
    "recall": 0.99,
    "localization": 0.98,
    "false_drains": 0,
    "false_checkpoints": 0,
    "detection_p95_intervals": 2.0,
    "deliveries_per_fault": 2.2,
}


@dataclass(frozen=True, slots=True)
class Goal:
    """One figure beside its bound."""

    name: str
    value: float | None
    goal: str
    ok: bool


def load_goals(path: Path) -> dict[str, float]:
    """The built-in goals, with the file's bounds instead where it gives them."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise GoalsError(f"--goals {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise GoalsError(f"--goals {path}: not YAML ({exc})") from None
    if not isinstance(data, Mapping):
        raise GoalsError(f"--goals {path}: expected a mapping of figure to bound, e.g. 'precision: 0.99'")
    out = dict(DEFAULT_GOALS)
    for key, bound in data.items():
        if key not in FIGURES:
            raise GoalsError(f"--goals {path}: unknown figure {key!r} (known: {', '.join(FIGURES)})")
        if isinstance(bound, bool) or not isinstance(bound, int | float) or bound < 0:
            raise GoalsError(f"--goals {path}: {key} must be a number >= 0, not {bound!r}")
        out[str(key)] = float(bound)
    return out


def judge(s: Score, interval_s: float, goals: Mapping[str, float]) -> list[Goal]:
    """Each goal's figure, bound and verdict (a figure with no value, e.g. no detection, fails)."""
    out = []
    for name, bound in goals.items():
        sense, read = FIGURES[name]
        value = read(s, interval_s)
        ok = value is not None and (value >= bound if sense == "min" else value <= bound)
        out.append(Goal(name, value, f"{'>=' if sense == 'min' else '<='} {bound:g}", ok))
    return out
