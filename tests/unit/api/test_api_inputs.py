"""The API's parameter schemas state exactly what the server accepts: every value a pattern lets
through is parsed and within the route's bounds, and values outside are refused by the pattern."""

from __future__ import annotations

import re
import typing
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from api.inputs import DurationParam, Limit, TimeParam
from api.routes.series import MAX_RANGE, MIN_STEP_S, parse_duration, parse_time


def pattern_of(annotated: object) -> str:
    pattern = typing.get_args(annotated)[1].pattern
    assert isinstance(pattern, str)
    return pattern


TIME = pattern_of(TimeParam)
STEP = pattern_of(DurationParam)


@settings(max_examples=400, deadline=None)
@given(st.from_regex(TIME, fullmatch=True))
def test_every_time_the_pattern_allows_parses(value: str) -> None:
    at = parse_time(value, "from")
    assert datetime(1969, 12, 30, tzinfo=UTC) < at < datetime(3000, 1, 2, tzinfo=UTC)


@settings(max_examples=400, deadline=None)
@given(st.from_regex(STEP, fullmatch=True))
def test_every_step_the_pattern_allows_is_in_bounds(value: str) -> None:
    assert MIN_STEP_S <= parse_duration(value) <= MAX_RANGE.total_seconds()


@pytest.mark.parametrize(
    "value",
    ["0", "1700000000", "1700000000.5", "2026-11-30", "2026-11-30T12:00", "2026-11-30 12:00:05.123456789",
     "2026-11-30T12:00:00Z", "2026-11-30T12:00+0530", "2000-02-29", "2024-02-29T00:00-08:00", "1970-01-01"],
)  # fmt: skip
def test_times_accepted(value: str) -> None:
    assert re.fullmatch(TIME, value)
    parse_time(value, "to")


@pytest.mark.parametrize(
    "value",
    ["", "-1", "99999999999", "2026-13-01", "2026-02-30", "2026-04-31", "2100-02-29", "2023-02-29", "1969-12-31",
     "2026-11-30T24:00", "2026-11-30T12:60", "2026-11-30Z", "2026-11-30T12:00+24:00", "yesterday",
     "\u0661\u0667" + "\u0660" * 8],  # Arabic-Indic digits: \d would take them
)  # fmt: skip
def test_times_refused_by_the_pattern(value: str) -> None:
    assert not re.fullmatch(TIME, value)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("1", 1), ("1s", 1), ("1.5", 1.5), ("1000ms", 1), ("90s", 90), ("5m", 300), ("1.5h", 5400), ("744h", 2678400),
     ("31d", 2678400), ("30.5d", 2635200), ("2678400", 2678400), ("44640m", 2678400)],
)  # fmt: skip
def test_steps_accepted(value: str, seconds: float) -> None:
    assert re.fullmatch(STEP, value)
    assert parse_duration(value) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "value",
    ["0", "0s", "0.5", "999ms", "0.5h", "2678401", "44641m", "744.5h", "31.5d", "32d", "1w", "1e3", "-1s", "01"],
)
def test_steps_refused_by_the_pattern(value: str) -> None:
    assert not re.fullmatch(STEP, value)


def test_integer_bounds_are_in_the_schema_and_enforced() -> None:
    limit = TypeAdapter(Limit)
    schema = limit.json_schema()
    assert (schema["minimum"], schema["maximum"]) == (1, 1000)
    assert limit.validate_python("1000") == 1000
    for bad in ("0", "1001", "10.0", "1e1"):
        with pytest.raises(ValidationError):
            limit.validate_python(bad)
