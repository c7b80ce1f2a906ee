"""``fabricmon drill``'s bad input: one clear line and exit 2, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main
from drill.goals import DEFAULT_GOALS, GoalsError, judge, load_goals
from drill.score import Score


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--faults", "-1"], "--faults must be 0 or more"),
        (["--benign", "-3"], "--benign must be 0 or more"),
        (["--concurrency", "0"], "--concurrency must be at least 1"),
        (["--interval", "0"], "--interval must be positive"),
        (["--inventory", "/nonexistent/fabric.yaml"], "no such file"),
        (["--goals", "/nonexistent/goals.yaml"], "--goals /nonexistent/goals.yaml"),
        (["--kinds", "speed_degrade,linkdown"], "--kinds: unknown kind(s) linkdown"),
        (["--kinds", "speed_degrade"], "--kinds names no benign kind, but --benign is 10"),
        (["--kinds", "flap_once", "--benign", "0"], "--kinds names no fault kind, but --faults is 20"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["drill", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and "\n" not in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("precision: [0.9\n", "not YAML"),
        ("- 0.99\n", "expected a mapping of figure to bound"),
        ("precison: 0.99\n", "unknown figure 'precison'"),
        ("recall: high\n", "recall must be a number >= 0"),
        ("false_drains: -1\n", "false_drains must be a number >= 0"),
        ("recall: true\n", "recall must be a number >= 0"),
    ],
)
def test_a_bad_goals_file_names_what_is_wrong(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "goals.yaml"
    path.write_text(text)
    with pytest.raises(GoalsError, match=said.replace("[", r"\[")):
        load_goals(path)


def test_a_goals_file_overrides_only_what_it_names(tmp_path: Path) -> None:
    path = tmp_path / "goals.yaml"
    path.write_text("precision: 0.9\ndetection_p95_intervals: 5\n")
    goals = load_goals(path)
    assert goals == {**DEFAULT_GOALS, "precision": 0.9, "detection_p95_intervals": 5.0}


def test_goals_are_judged_each_way_and_a_missing_figure_fails() -> None:
    s = Score(faults=10, incidents=10, matched=9, must_detect=10, detected=10, false_drains=1)
    s.detection_s = [1.0, 2.0, 3.0, 10.0]
    verdicts = {g.name: g for g in judge(s, 2.0, DEFAULT_GOALS)}
    assert not verdicts["precision"].ok and verdicts["precision"].value == 0.9  # at least 0.99
    assert verdicts["recall"].ok and not verdicts["false_drains"].ok  # at most 0
    assert verdicts["detection_p95_intervals"].value == 5.0 and not verdicts["detection_p95_intervals"].ok
    assert not {g.name: g for g in judge(Score(), 2.0, DEFAULT_GOALS)}["detection_p95_intervals"].ok  # no detection
