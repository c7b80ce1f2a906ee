"""One validation of a job: a job file (``fabricmon check --job``) and the API's body agree."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from analyzer.job_spec import JobError, JobIn, job_from_dict, load_job_file
from store.jobs import Job

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
GOOD: list[dict[str, Any]] = [
    {"id": "train-42", "hosts": ["srv-g1-001"]},
    {"id": "slurm:1234", "hosts": ["srv-g1-001", "srv-g1-002"], "expected_days": 12},
    {"id": "a", "hosts": ["srv-g1-001"], "started_at": "2026-11-20T12:00:00Z", "expected_days": 0.5},
    {"id": "a", "hosts": ["srv-g1-001"], "started_at": "2026-11-20T12:00:00", "expected_days": 3650},
    {"id": "a", "hosts": ["srv-g1-001"], "started_at": None, "expected_days": None},
]
BAD: list[dict[str, Any]] = [
    {"id": "a", "hosts": []},
    {"id": "a", "hosts": [""]},
    {"id": "a", "hosts": ["srv\n1"]},
    {"id": "a", "hosts": "srv-g1-001"},
    {"id": "a", "hosts": [1]},
    {"id": "a/b", "hosts": ["srv-g1-001"]},
    {"id": "-a", "hosts": ["srv-g1-001"]},
    {"id": "x" * 129, "hosts": ["srv-g1-001"]},
    {"id": "a", "hosts": ["srv-g1-001"], "expected_days": 0},
    {"id": "a", "hosts": ["srv-g1-001"], "expected_days": -1},
    {"id": "a", "hosts": ["srv-g1-001"], "expected_days": 3651},
    {"id": "a", "hosts": ["srv-g1-001"], "expected_days": True},
    {"id": "a", "hosts": ["srv-g1-001"], "expected_days": "5"},
    {"id": "a", "hosts": ["srv-g1-001"], "expected_days": float("inf")},
    {"id": "a", "hosts": ["srv-g1-001"], "started_at": "yesterday"},
    {"id": "a", "hosts": ["srv-g1-001"], "started_at": 1700000000},
    {"id": "a", "hosts": ["srv-g1-001"], "gpus": 8},
]


def api_accepts(data: dict[str, Any]) -> bool:
    try:
        JobIn.model_validate(data)
    except ValidationError:
        return False
    return True


def file_accepts(data: dict[str, Any]) -> bool:
    try:
        job_from_dict(data)
    except JobError:
        return False
    return True


@pytest.mark.parametrize("data", GOOD + BAD, ids=lambda d: repr(d)[:60])
def test_a_file_and_the_api_agree(data: dict[str, Any]) -> None:
    assert api_accepts(data) is file_accepts(data) is (data in GOOD)


def test_the_api_publishes_the_same_model() -> None:
    from api.inputs import JobIn as ApiJobIn

    assert ApiJobIn is JobIn


def test_a_file_may_leave_the_id_out_the_api_may_not() -> None:
    assert job_from_dict({"hosts": ["srv-g1-001"]}).id == "preflight"
    assert not api_accepts({"hosts": ["srv-g1-001"]})


def test_the_job_hosts_deduplicated_and_times_in_utc() -> None:
    job = job_from_dict({"hosts": ["b", "a", "b"], "started_at": "2026-11-20T12:00:00", "expected_days": 15})
    assert job == Job("preflight", ("b", "a"), datetime(2026, 11, 20, 12, tzinfo=UTC), 15.0)
    assert job.remaining_days(NOW) == pytest.approx(5.0)
    assert JobIn.model_validate({"id": "j", "hosts": ["b", "a", "b"]}).to_job().hosts == ("b", "a")


def test_yaml_timestamps_and_dates(tmp_path: Path) -> None:
    f = tmp_path / "job.yaml"
    f.write_text("hosts: [srv-g1-001]\nstarted_at: 2026-11-20 12:00:00\nexpected_days: 3\n")
    assert load_job_file(f).started_at == datetime(2026, 11, 20, 12, tzinfo=UTC)
    f.write_text("hosts: [srv-g1-001]\nstarted_at: 2026-11-20\n")
    assert load_job_file(f).started_at == datetime.combine(date(2026, 11, 20), datetime.min.time(), UTC)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"hosts": []}, "'hosts' must be a non-empty list"),
        ({"hosts": ["a"], "expected_days": 0}, "'expected_days' must be a number > 0"),
        ({"hosts": ["a"], "started_at": "yesterday"}, "'started_at' must be an ISO 8601"),
        ({"hosts": ["a"], "id": "a b"}, "'id' must be 1-128"),
        ({"hosts": ["a"], "gpus": 8}, "unknown key"),
        ("not a mapping", "mapping"),
    ],
)
def test_bad_files_are_one_line_errors(data: object, message: str) -> None:
    with pytest.raises(JobError, match=message) as err:
        job_from_dict(data, "job.yaml")
    assert str(err.value).startswith("job.yaml: ") and "\n" not in str(err.value)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(JobError, match="cannot read"):
        load_job_file(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("hosts: [")
    with pytest.raises(JobError, match="not YAML"):
        load_job_file(tmp_path / "bad.yaml")
